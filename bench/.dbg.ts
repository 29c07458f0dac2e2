import { readFileSync } from 'node:fs';
import { openFile } from '../src/cli/files.js';
import { arrow } from '../src/arrow/arrow.js';
const KEY = readFileSync('/tmp/dbg/key', 'utf8').trim();
const URL = 'http://127.0.0.1:18999';
const post = async (path: string, body: Uint8Array | string, headers: Record<string, string>) => {
  const t = performance.now();
  const r = await fetch(URL + path, { method: 'POST', body, headers: { authorization: `Bearer ${KEY}`, ...headers } });
  const txt = await r.text();
  return [r.status, Math.round(performance.now() - t), txt.slice(0, 100)];
};
const file = await openFile('/tmp/dbg/rows.parquet', 'parquet', new Map([['emb', 384]]));
const groups = [];
for await (const g of file.groups(10000)) groups.push(g.ipc);
file.close();
const single = groups.map((ipc) => arrow.tableToIPC(new arrow.Table(arrow.tableFromIPC(ipc).batches).combineChunks?.() ?? arrow.tableFromIPC(ipc), 'stream'));
const schema = [{ name: 'id', type: 'i64' }, { name: 'body', type: 'utf8' }, { name: 'emb', type: 'vector', dim: 384 }];
const json = { 'content-type': 'application/json' };
for (const [name, indexes] of [['plain', undefined], ['idx', { fts: ['body'], vector: [{ column: 'emb', metric: 'cosine' }] }]] as const) {
  const t = `${name}_${Date.now()}`;
  console.log(await post('/v1/create_table/db', JSON.stringify({ table_name: t, schema, indexes }), json));
  for (const [i, ipc] of groups.entries()) {
    console.log(name, 'cli-ipc', i, await post(`/v1/append/db?table=${t}`, ipc, { 'content-type': 'application/vnd.apache.arrow.stream' }));
  }
  for (const [i, ipc] of groups.entries()) {
    console.log(name, 'cli-ipc+key', i, await post(`/v1/append/db?table=${t}`, ipc, { 'content-type': 'application/vnd.apache.arrow.stream', 'idempotency-key': `k${Math.random()}` }));
  }
}
console.log(arrow.tableFromIPC(groups[0]!).batches.length, groups[0]!.length);
