/**
 * npm run bench:write — rows/s of appends over HTTP (Arrow and JSON bodies, 10k-row requests) beside the same
 * batches added in-process with LanceDB `add()`, and the latency of replacing one row by key.
 * Sizes: BENCH_ROWS (default 200000), BENCH_BATCH (10000), BENCH_UPDATES (200).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@lancedb/lancedb';
import type { RecordBatch } from 'apache-arrow';
import { arrow } from '../src/arrow/arrow.js';
import { rowsToJson } from '../src/arrow/to-json.js';
import { loadConfig } from '../src/config.js';
import { issueKey } from '../src/control/keys.js';
import { SqliteControlStore } from '../src/control/sqlite.js';
import { buildApp } from '../src/http/app.js';

const ROWS = Number(process.env.BENCH_ROWS ?? 200_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 10_000);
const UPDATES = Number(process.env.BENCH_UPDATES ?? 200);
const DIM = 384;
const ARROW = 'application/vnd.apache.arrow.stream';

function words(rand: () => number, n: number): string {
  const vocab = [
    'alpha',
    'bravo',
    'charlie',
    'delta',
    'echo',
    'foxtrot',
    'golf',
    'hotel',
    'india',
    'juliet',
    'kilo',
    'lima',
  ];
  return Array.from({ length: n }, () => `${vocab[Math.floor(rand() * vocab.length)]}${Math.floor(rand() * 500)}`).join(
    ' ',
  );
}

function makeBatches(): RecordBatch[] {
  let seed = 42;
  const rand = () => {
    seed = (seed * 1664525 + 1013904223) >>> 0;
    return seed / 4294967296;
  };
  const vecType = new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true));
  const batches: RecordBatch[] = [];
  for (let start = 0; start < ROWS; start += BATCH) {
    const n = Math.min(BATCH, ROWS - start);
    const ids = BigInt64Array.from({ length: n }, (_, i) => BigInt(start + i));
    const texts = Array.from({ length: n }, () => words(rand, 20));
    const flat = Float32Array.from({ length: n * DIM }, () => rand() * 2 - 1);
    const vec = arrow.makeVector(
      arrow.makeData({
        type: vecType,
        length: n,
        nullCount: 0,
        child: arrow.makeData({ type: new arrow.Float32(), length: n * DIM, nullCount: 0, data: flat }),
      }),
    );
    const table = new arrow.Table({
      id: arrow.makeVector(ids),
      text: arrow.vectorFromArray(texts, new arrow.Utf8()),
      vec,
    });
    batches.push(...table.batches);
  }
  return batches;
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'strata-bench-'));
  const store = new SqliteControlStore(join(dataDir, 'control.sqlite'));
  const { secret } = await issueKey(store, 'bench');
  const app = await buildApp({ config: loadConfig({ STRATA_DATA_DIR: dataDir, STRATA_LOG_LEVEL: 'warn' }), store });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const url = `http://127.0.0.1:${address.port}`;
  const auth = { authorization: `Bearer ${secret}` };
  const post = async (path: string, body: BodyInit | undefined, headers: Record<string, string>) => {
    const res = await fetch(`${url}${path}`, { method: 'POST', headers: { ...auth, ...headers }, body });
    const bytes = await res.arrayBuffer();
    if (!res.ok) throw new Error(`${path}: ${res.status} ${Buffer.from(bytes).toString()}`);
    return res;
  };
  const json = { 'content-type': 'application/json' };

  await post('/v1/databases', JSON.stringify({ name: 'bench', storage: { provider: 'local', bucket: 'bench' } }), json);
  await post('/v1/databases/bench/storage/verify', undefined, {});
  for (let i = 0; i < 100; i++) {
    const res = await fetch(`${url}/v1/databases`, { headers: auth });
    const list = (await res.json()) as { databases: { state: string }[] };
    if (list.databases[0]?.state === 'active') break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const schema = [
    { name: 'id', type: 'i64', nullable: false },
    { name: 'text', type: 'utf8' },
    { name: 'vec', type: 'vector', dim: DIM },
  ];
  for (const table of ['via_arrow', 'via_json']) {
    await post('/v1/create_table/bench', JSON.stringify({ table_name: table, schema }), json);
  }

  console.log(`generating ${ROWS} rows × (i64, ~20-word utf8, ${DIM}-d f32 vector) in ${BATCH}-row batches…`);
  const batches = makeBatches();
  const ipcBodies = batches.map((b) => arrow.tableToIPC(new arrow.Table([b]), 'stream') as BodyInit);
  const jsonBodies = batches.map((b) => JSON.stringify({ data: rowsToJson([b]) }));

  const time = async (run: () => Promise<void>) => {
    const start = performance.now();
    await run();
    return (performance.now() - start) / 1000;
  };

  const arrowSeconds = await time(async () => {
    for (const body of ipcBodies)
      await post('/v1/append/bench?table=via_arrow', body, { 'content-type': ARROW, accept: ARROW });
  });
  const jsonSeconds = await time(async () => {
    for (const body of jsonBodies) await post('/v1/append/bench?table=via_json', body, { ...json, accept: ARROW });
  });

  const inProcessDir = join(dataDir, 'in-process');
  const db = await connect(inProcessDir);
  const native = await db.createEmptyTable('native', batches[0]?.schema ?? new arrow.Schema([]));
  const nativeSeconds = await time(async () => {
    for (const batch of batches) await native.add(new arrow.Table([batch]));
  });

  const latencies: number[] = [];
  let seed = 7;
  for (let i = 0; i < UPDATES; i++) {
    seed = (seed * 48271) % 2147483647;
    const id = seed % ROWS;
    const row = { id, text: words(() => 0.5, 20), vec: Array.from({ length: DIM }, () => 0.25) };
    const start = performance.now();
    await post(
      `/v1/update/bench?table=via_arrow&predicate=${encodeURIComponent(`id = ${id}`)}`,
      JSON.stringify({ data: [row] }),
      json,
    );
    latencies.push(performance.now() - start);
  }
  latencies.sort((a, b) => a - b);

  const results = {
    rows: ROWS,
    batch: BATCH,
    dim: DIM,
    http_arrow_rows_per_s: Math.round(ROWS / arrowSeconds),
    http_json_rows_per_s: Math.round(ROWS / jsonSeconds),
    in_process_add_rows_per_s: Math.round(ROWS / nativeSeconds),
    ratio_http_arrow_vs_in_process: Number((nativeSeconds / arrowSeconds).toFixed(3)),
    ratio_http_json_vs_in_process: Number((nativeSeconds / jsonSeconds).toFixed(3)),
    update_one_row_ms: {
      p50: Number(percentile(latencies, 50).toFixed(2)),
      p99: Number(percentile(latencies, 99).toFixed(2)),
      n: UPDATES,
    },
    rss_mb: Math.round(process.memoryUsage().rss / 2 ** 20),
  };
  console.log(JSON.stringify(results, null, 2));
  writeFileSync(join(import.meta.dirname, 'results', 'write.json'), `${JSON.stringify(results, null, 2)}\n`);
  native.close();
  db.close();
  await app.close();
  rmSync(dataDir, { recursive: true, force: true });
}

await main();
