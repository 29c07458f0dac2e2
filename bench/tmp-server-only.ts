import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openFile } from '../src/cli/files.js';
import { ARROW, activeDatabase, startServer } from './harness.js';

const file = process.argv[2] as string;
const conc = Number(process.argv[3] ?? 2);
const opened = await openFile(file, 'parquet', new Map([['emb', 384]]));
const bodies: Uint8Array[] = [];
for await (const g of opened.groups(10_000)) bodies.push(g.ipc);
opened.close();
const server = await startServer(mkdtempSync(join(tmpdir(), 'x-')), JSON.parse(process.env.XENV ?? '{}'), {
  build: false,
});
await activeDatabase(server, 'bench');
await server.post(
  '/v1/create_table/bench',
  JSON.stringify({
    table_name: 't',
    schema: [
      { name: 'id', type: 'i64' },
      { name: 'body', type: 'utf8' },
      { name: 'emb', type: 'vector', dim: 384 },
    ],
    indexes: process.env.NOIDX ? undefined : { fts: ['body'], vector: [{ column: 'emb', metric: 'cosine' }] },
  }),
);
const t0 = performance.now();
let next = 0;
const times: number[] = [];
await Promise.all(
  Array.from({ length: conc }, async () => {
    while (next < bodies.length) {
      const b = bodies[next++] as Uint8Array;
      const s = performance.now();
      await server.post('/v1/append/bench?table=t', b, { 'content-type': ARROW, prefer: 'return=minimal' });
      times.push(performance.now() - s);
    }
  }),
);
const secs = (performance.now() - t0) / 1000;
times.sort((a, b) => a - b);
console.log(
  `server only, conc ${conc}: ${secs.toFixed(2)} s, ${Math.round(1e6 / secs)} rows/s, p50 ${times[times.length >> 1]?.toFixed(0)} ms`,
);
await server.stop();
