import { DuckDBInstance, DuckDBDataChunk, BIGINT, VARCHAR } from '@duckdb/node-api';
const mode = process.argv[2];
const inst = await DuckDBInstance.create(':memory:');
const con = await inst.connect();
let bad = 0;
for (let i = 0; i < 200; i++) {
  const t = `t${i}`;
  if (mode === 'rename') {
    await con.run(`create table s${i} (id bigint, v varchar)`);
    await con.run(`create table ${t} (id bigint, v varchar)`);
    await con.run('begin'); await con.run(`drop table ${t}`); await con.run(`alter table s${i} rename to ${t}`); await con.run('commit');
  } else await con.run(`create table ${t} (id bigint, v varchar)`);
  if (mode !== 'notx') await con.run('begin');
  const app = await con.createAppender(t);
  const chunk = DuckDBDataChunk.create([BIGINT, VARCHAR]);
  chunk.setColumns([[1n, 2n], ['a', 'b']]);
  app.appendDataChunk(chunk); app.flushSync(); app.closeSync();
  if (mode !== 'notx') await con.run('commit');
  const c = await inst.connect();
  const r = await c.runAndReadAll(`select id, v from ${t} order by id`);
  const ids = r.getColumns()[0];
  if (ids[0] !== 1n || ids[1] !== 2n) { bad++; if (bad < 3) console.log(i, ids); }
  c.closeSync();
}
console.log(mode, 'bad', bad);
