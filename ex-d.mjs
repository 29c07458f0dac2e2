import { DuckDBInstance } from '@duckdb/node-api';
import { arrowType, chunkToBatch } from './dist/sql/results.js';
import { arrow } from './dist/arrow/arrow.js';
import { rowsToJson } from './dist/arrow/to-json.js';
const inst = await DuckDBInstance.create(':memory:');
const con = await inst.connect();
await con.run("create table x (id bigint, v varchar)");
await con.run("insert into x values (1, 'a'), (2, 'b')");
let bad = 0;
for (let i = 0; i < 3000; i++) {
  const c = await inst.connect();
  const p = await c.prepare('SELECT id, v FROM x ORDER BY id');
  const result = await p.stream();
  const types = result.columnTypes();
  const schema = new arrow.Schema(result.deduplicatedColumnNames().map((n, k) => new arrow.Field(n, arrowType(types[k]), true)));
  const batches = [];
  for (;;) { const ch = await result.fetchChunk(); if (!ch || ch.rowCount === 0) break; batches.push(chunkToBatch(ch, types, schema)); }
  const rows = rowsToJson(batches);
  if (rows[0].id !== 1 || rows[1].id !== 2) { bad++; if (bad < 4) console.log(i, JSON.stringify(rows)); }
  p.destroySync(); c.closeSync();
  if (i % 100 === 0) global.gc?.();
}
console.log('bad', bad);
