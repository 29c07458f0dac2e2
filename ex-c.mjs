import { DuckDBInstance } from '@duckdb/node-api';
import { BatchAppender } from './dist/sql/ingest.js';
import { arrow } from './dist/arrow/arrow.js';
import { connect } from '@lancedb/lancedb';
const dir = '/tmp/ex-lance-' + Date.now();
const db = await connect(dir);
const schema = new arrow.Schema([new arrow.Field('id', new arrow.Int64(), false), new arrow.Field('v', new arrow.Utf8(), true)]);
const t = await db.createEmptyTable('t', schema);
await t.add([{ id: 1, v: 'a' }, { id: 2, v: 'b' }]);
const inst = await DuckDBInstance.create(':memory:');
const con = await inst.connect();
await con.run('create table x (id bigint, v varchar)');
for await (const batch of t.query().select(['id', 'v'])) {
  const idData = batch.getChild('id').data[0];
  console.log(idData.values, idData.values.byteOffset, idData.values.buffer.byteLength, idData.values.constructor.name);
  const app = await con.createAppender('x');
  new BatchAppender(app).append(batch);
  app.flushSync(); app.closeSync();
}
const r = await con.runAndReadAll('select id, v from x');
console.log(r.getRowsJson());
