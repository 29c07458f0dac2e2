/**
 * npm run bench:write — rows/s of appends over HTTP (Arrow and JSON bodies, 10k-row requests) beside the same
 * batches added in-process with LanceDB `add()`, and the latency of replacing one row by key. The service
 * answers a write once its files are fsynced (API.md §5, local storage: src/storage/durable.ts); `add()` leaves
 * them in the page cache, so the ratio includes the price of durability (~10–15 ms per 10k-row append).
 * The server runs as its own process (`strata serve`, as deployed); this process is the client, and runs the
 * in-process baseline while the server is idle. Then one-row replaces by `id = X` and `exact_match` on `id`, on a
 * table without and one keyed by `id` (`primary_key`, which gives it a scalar index), one-row upserts on the keyed
 * table (each phase once upkeep has folded the one before), and upserts of BENCH_BATCH-row batches of keys it
 * holds and of new keys beside appends of the same batches. Sizes: BENCH_ROWS (default 200000), BENCH_BATCH (10000), BENCH_UPDATES (200), BENCH_ROUNDS (3),
 * BENCH_JSON_ROWS (200000: the JSON appends send at most so many), BENCH_UPSERT_BATCHES (5).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@lancedb/lancedb';
import type { RecordBatch, Vector } from 'apache-arrow';
import { arrow } from '../src/arrow/arrow.js';
import { rowsToJson } from '../src/arrow/to-json.js';
import {
  ARROW,
  activeDatabase,
  appendWaiting,
  batchOf,
  JSON_BODY,
  median,
  percentile,
  removeDataDir,
  saveResults,
  seconds,
  startServer,
  untilIndexed,
  vectorColumn,
  vectorType,
} from './harness.js';

const ROWS = Number(process.env.BENCH_ROWS ?? 200_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 10_000);
const UPDATES = Number(process.env.BENCH_UPDATES ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DIM = 384;
/** Rows the JSON appends send, at most (BENCH_JSON_ROWS). */
const JSON_ROWS = Number(process.env.BENCH_JSON_ROWS ?? 200_000);
/** Batches each upsert phase sends (BENCH_UPSERT_BATCHES). */
const UPSERT_BATCHES = Number(process.env.BENCH_UPSERT_BATCHES ?? 5);

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
  // The table's own schema, field for field, as a client that read `schema?encoding=ipc` would send.
  const schema = new arrow.Schema([
    new arrow.Field('id', new arrow.Int64(), false),
    new arrow.Field('text', new arrow.Utf8(), true),
    new arrow.Field('vec', vectorType(DIM), true),
  ]);
  const batches: RecordBatch[] = [];
  for (let start = 0; start < ROWS; start += BATCH) {
    const n = Math.min(BATCH, ROWS - start);
    const texts = Array.from({ length: n }, () => words(rand, 20));
    batches.push(
      batchOf(schema, [
        arrow.makeVector(BigInt64Array.from({ length: n }, (_, i) => BigInt(start + i))),
        arrow.vectorFromArray(texts, new arrow.Utf8()),
        vectorColumn(
          Float32Array.from({ length: n * DIM }, () => rand() * 2 - 1),
          DIM,
        ),
      ]),
    );
  }
  return batches;
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'strata-bench-'));
  const server = await startServer(dataDir);
  const { post } = server;
  const json = JSON_BODY;
  await activeDatabase(server, 'bench');
  const schema = [
    { name: 'id', type: 'i64', nullable: false },
    { name: 'text', type: 'utf8' },
    { name: 'vec', type: 'vector', dim: DIM },
  ];

  console.log(`generating ${ROWS} rows × (i64, ~20-word utf8, ${DIM}-d f32 vector) in ${BATCH}-row batches…`);
  const batches = makeBatches();
  const ipcBodies = batches.map((b) => arrow.tableToIPC(new arrow.Table([b]), 'stream'));
  // JSON bodies of 384-d rows are ~20 times their Arrow size: past 200k rows they would not fit in this process.
  const jsonBatches = batches.slice(0, Math.ceil(Math.min(ROWS, JSON_ROWS) / BATCH));
  const jsonRows = jsonBatches.reduce((n, b) => n + b.numRows, 0);
  const jsonBodies = jsonBatches.map((b) => JSON.stringify({ data: rowsToJson([b]) }));

  const time = seconds;
  const appendAll = async (table: string, bodies: readonly (Uint8Array | string)[], type: string, lanes: number) => {
    await post('/v1/create_table/bench', JSON.stringify({ table_name: table, schema }), json);
    return time(async () => {
      let next = 0;
      const lane = async () => {
        for (let body = bodies[next++]; body !== undefined; body = bodies[next++]) {
          await post(`/v1/append/bench?table=${table}`, body, { 'content-type': type, accept: ARROW });
        }
      };
      await Promise.all(Array.from({ length: lanes }, lane));
    });
  };
  const db = await connect(join(dataDir, 'in-process'));
  const nativeAdd = async (round: number) => {
    const native = await db.createEmptyTable(`native_${round}`, batches[0]?.schema ?? new arrow.Schema([]));
    const seconds = await time(async () => {
      for (const batch of batches) await native.add(new arrow.Table([batch]));
    });
    native.close();
    return seconds;
  };

  // Rounds interleave the three ways of writing, and medians are reported: this machine's timings wander.
  const arrowRuns: number[] = [];
  const pipelinedRuns: number[] = [];
  const nativeRuns: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    arrowRuns.push(await appendAll(`via_arrow_${round}`, ipcBodies, ARROW, 1));
    // Two requests in flight, as a loader would send them: one is received while the other commits.
    pipelinedRuns.push(await appendAll(`via_arrow_2_${round}`, ipcBodies, ARROW, 2));
    nativeRuns.push(await nativeAdd(round));
  }
  const arrowSeconds = median(arrowRuns);
  const pipelinedSeconds = median(pipelinedRuns);
  const nativeSeconds = median(nativeRuns);
  const jsonSeconds = await appendAll('via_json', jsonBodies, 'application/json', 1);

  // The same rows in a table keyed by id (a scalar index on it), folded in by upkeep before the replaces.
  await post('/v1/create_table/bench', JSON.stringify({ table_name: 'keyed', schema, primary_key: 'id' }), json);
  for (const body of ipcBodies) {
    await appendWaiting(server, '/v1/append/bench?table=keyed', body, { 'content-type': ARROW, accept: ARROW });
  }
  await post('/v1/exact_match/bench', JSON.stringify({ table_name: 'keyed', field_name: 'id', value: '1' }), json);
  await untilIndexed(dataDir, 'bench');

  /** p50 and p99 of `UPDATES` runs of `run` on random ids. */
  const timed = async (run: (id: number) => Promise<unknown>) => {
    const latencies: number[] = [];
    let seed = 7;
    for (let i = 0; i < UPDATES; i++) {
      seed = (seed * 48271) % 2147483647;
      const id = seed % ROWS;
      const start = performance.now();
      await run(id);
      latencies.push(performance.now() - start);
    }
    latencies.sort((a, b) => a - b);
    return {
      p50: Number(percentile(latencies, 50).toFixed(2)),
      p99: Number(percentile(latencies, 99).toFixed(2)),
      n: UPDATES,
    };
  };
  const replace = (table: string) => (id: number) =>
    post(
      `/v1/update/bench?table=${table}&predicate=${encodeURIComponent(`id = ${id}`)}`,
      JSON.stringify({ data: [{ id, text: words(() => 0.5, 20), vec: Array.from({ length: DIM }, () => 0.25) }] }),
      json,
    );
  const exact = (table: string) => (id: number) =>
    post(
      '/v1/exact_match/bench',
      JSON.stringify({ table_name: table, field_name: 'id', value: String(id), projection: ['id'] }),
      json,
    );
  // Reads first, on folded tables: the replaces leave rows outside the indexes, and upkeep folding them shares
  // the machine with whatever is measured next.
  const exactScan = await timed(exact('via_arrow_0'));
  const exactIndexed = await timed(exact('keyed'));
  // Each phase of one-row writes starts once upkeep has folded the one before: a first fold after a load compacts
  // the whole table, which would otherwise share the machine with what is measured next.
  const replaceScan = await timed(replace('via_arrow_0'));
  const settleSeconds = [await untilIndexed(dataDir, 'bench')];
  const replaceIndexed = await timed(replace('keyed'));
  settleSeconds.push(await untilIndexed(dataDir, 'bench'));
  const upsertOne = await timed((id) =>
    post(
      '/v1/upsert/bench?table=keyed',
      JSON.stringify({ data: [{ id, text: words(() => 0.25, 20), vec: Array.from({ length: DIM }, () => 0.5) }] }),
      json,
    ),
  );

  settleSeconds.push(await untilIndexed(dataDir, 'bench'));

  // Batches of keys the table holds (every row replaced), of new keys (every row inserted), and the same new
  // batches appended to an unkeyed table, one request at a time: rows/s of each.
  const sendBatches = async (route: string, table: string, shift: number) => {
    const sent = ipcBodies.slice(0, UPSERT_BATCHES).map((_, i) => {
      const batch = batches[i] as RecordBatch;
      if (shift === 0) return ipcBodies[i] as Uint8Array;
      const ids = BigInt64Array.from({ length: batch.numRows }, (_, r) => BigInt(r + i * BATCH + shift));
      const shifted = batchOf(batch.schema, [
        arrow.makeVector(ids),
        batch.getChildAt(1) as Vector,
        batch.getChildAt(2) as Vector,
      ]);
      return arrow.tableToIPC(new arrow.Table([shifted]), 'stream');
    });
    const rows = sent.length * BATCH;
    const took = await time(async () => {
      for (const body of sent) {
        await appendWaiting(server, `/v1/${route}/bench?table=${table}`, body, {
          prefer: 'return=minimal',
          'content-type': ARROW,
          accept: json['content-type'],
        });
      }
    });
    return Math.round(rows / took);
  };
  const upsertExistingRate = await sendBatches('upsert', 'keyed', 0);
  const upsertNewRate = await sendBatches('upsert', 'keyed', ROWS);
  const appendRate = await sendBatches('append', 'via_arrow_0', ROWS);

  const results = {
    rows: ROWS,
    batch: BATCH,
    rounds: ROUNDS,
    dim: DIM,
    http_arrow_rows_per_s: Math.round(ROWS / arrowSeconds),
    http_arrow_2_in_flight_rows_per_s: Math.round(ROWS / pipelinedSeconds),
    http_json_rows_per_s: Math.round(jsonRows / jsonSeconds),
    json_rows: jsonRows,
    in_process_add_rows_per_s: Math.round(ROWS / nativeSeconds),
    ratio_http_arrow_vs_in_process: Number((nativeSeconds / arrowSeconds).toFixed(3)),
    ratio_http_arrow_2_in_flight_vs_in_process: Number((nativeSeconds / pipelinedSeconds).toFixed(3)),
    ratio_http_json_vs_in_process: Number((nativeSeconds / ROWS / (jsonSeconds / jsonRows)).toFixed(3)),
    update_one_row_ms: replaceScan,
    update_one_row_by_indexed_id_ms: replaceIndexed,
    exact_match_ms: exactScan,
    exact_match_by_indexed_id_ms: exactIndexed,
    upsert_one_row_ms: upsertOne,
    upkeep_settle_s_after_each_one_row_phase: settleSeconds.map((x) => Number(x.toFixed(1))),
    upsert_batches: UPSERT_BATCHES,
    upsert_existing_keys_rows_per_s: upsertExistingRate,
    upsert_new_keys_rows_per_s: upsertNewRate,
    append_same_batches_rows_per_s: appendRate,
    ratio_upsert_existing_vs_append: Number((upsertExistingRate / appendRate).toFixed(3)),
    ratio_upsert_new_vs_append: Number((upsertNewRate / appendRate).toFixed(3)),
    server_rss_mb: await server.rssMb(),
  };
  saveResults('write', results);
  db.close();
  await server.stop();
  removeDataDir(dataDir);
}

await main();
