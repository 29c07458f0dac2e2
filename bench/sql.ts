/**
 * npm run bench:sql — query_sql over HTTP beside DuckDB in-process on the same rows.
 * A fact table of BENCH_ROWS (default 1,000,000) rows of (id i64, x f64, cat utf8, vec 384-d f32) and a 10k-row
 * dimension table are appended over HTTP as Arrow; then: the first query (which loads the table into the
 * database's DuckDB without its vector column, which it does not read), the first query that reads the vector
 * column (which loads the whole table), warm GROUP BY and join latencies against the same SQL on a DuckDB this
 * process loads itself, and the first query after appending 10k rows (which should load 10k rows, not all).
 * The loads are timed twice: as the first queries after the writes, and on a restarted server after `sync`.
 * The server runs as its own process; in-process timings are taken while it is idle. BENCH_RUNS (default 20).
 */
import { mkdtempSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import type { RecordBatch } from 'apache-arrow';
import { arrow } from '../src/arrow/arrow.js';
import { RowGroupFeed } from '../src/sql/feed.js';
import {
  ARROW,
  activeDatabase,
  batchOf,
  flushDisk,
  pendingDiskWritesMb,
  percentile,
  removeDataDir,
  saveResults,
  seconds,
  startServer,
  untilIndexed,
  vectorColumn,
  vectorType,
} from './harness.js';

const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const BATCH = 10_000;
const DIM = 384;
const DIMENSION_ROWS = 10_000;
const APPENDED = 10_000;

const GROUP_BY = 'SELECT cat, count(*) AS n, avg(x) AS mean, max(id) AS top FROM facts GROUP BY cat ORDER BY cat';
const JOIN =
  'SELECT d.label, count(*) AS n, sum(f.x) AS total FROM facts f JOIN dims d ON f.id % 10000 = d.id GROUP BY d.label ORDER BY n DESC, d.label LIMIT 20';
const COUNT = 'SELECT count(*) AS n, sum(id) AS s FROM facts';
/** The first statement that reads the vector column, which loads the whole table. */
const VECTOR = 'SELECT sum(vec[1]) AS v FROM facts';

function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

const FACTS = new arrow.Schema([
  new arrow.Field('id', new arrow.Int64(), false),
  new arrow.Field('x', new arrow.Float64(), true),
  new arrow.Field('cat', new arrow.Utf8(), true),
  new arrow.Field('vec', vectorType(DIM), true),
]);

function facts(from: number, rows: number): RecordBatch[] {
  const rand = random(from + 7);
  const batches: RecordBatch[] = [];
  for (let start = from; start < from + rows; start += BATCH) {
    const n = Math.min(BATCH, from + rows - start);
    batches.push(
      batchOf(FACTS, [
        arrow.makeVector(BigInt64Array.from({ length: n }, (_, i) => BigInt(start + i))),
        arrow.makeVector(Float64Array.from({ length: n }, () => rand() * 1000)),
        arrow.vectorFromArray(
          Array.from({ length: n }, () => `category_${Math.floor(rand() * rand() * 200)}`),
          new arrow.Utf8(),
        ),
        vectorColumn(
          Float32Array.from({ length: n * DIM }, () => rand() * 2 - 1),
          DIM,
        ),
      ]),
    );
  }
  return batches;
}

const DIMS = new arrow.Schema([
  new arrow.Field('id', new arrow.Int64(), false),
  new arrow.Field('label', new arrow.Utf8(), true),
]);
const dims = (): RecordBatch =>
  batchOf(DIMS, [
    arrow.makeVector(BigInt64Array.from({ length: DIMENSION_ROWS }, (_, i) => BigInt(i))),
    arrow.vectorFromArray(
      Array.from({ length: DIMENSION_ROWS }, (_, i) => `label_${i % 37}`),
      new arrow.Utf8(),
    ),
  ]);

const ipc = (batches: RecordBatch[]) => arrow.tableToIPC(new arrow.Table(batches), 'stream');

async function latencies(run: () => Promise<unknown>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < 3; i++) await run();
  const ms: number[] = [];
  for (let i = 0; i < RUNS; i++) ms.push((await seconds(run)) * 1000);
  ms.sort((a, b) => a - b);
  return { p50: Number(percentile(ms, 50).toFixed(2)), p99: Number(percentile(ms, 99).toFixed(2)) };
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'strata-bench-sql-'));
  let server = await startServer(dataDir, { STRATA_SQL_MAX_ROWS: '10000000' });
  try {
    await activeDatabase(server, 'bench');
    const create = (body: object) => server.post('/v1/create_table/bench', JSON.stringify(body));
    await create({
      table_name: 'facts',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'x', type: 'f64' },
        { name: 'cat', type: 'utf8' },
        { name: 'vec', type: 'vector', dim: DIM },
      ],
    });
    await create({
      table_name: 'dims',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'label', type: 'utf8' },
      ],
    });
    const append = (table: string, batches: RecordBatch[]) =>
      // The rows come back as Arrow, as a bulk loader would take them (as JSON, 10k × 384-d is 80 MB a reply).
      server.post(`/v1/append/bench?table=${table}`, ipc(batches), { 'content-type': ARROW, accept: ARROW });
    // Made a batch at a time and let go, so this process is small while the server is measured.
    const loadS = await seconds(async () => {
      for (let start = 0; start < ROWS; start += BATCH)
        await append('facts', facts(start, Math.min(BATCH, ROWS - start)));
    });
    await append('dims', [dims()]);
    console.log(`appended ${ROWS} rows over HTTP in ${loadS.toFixed(1)} s`);

    const settledS = await untilIndexed(dataDir, 'bench');
    console.log(`upkeep settled in ${settledS.toFixed(1)} s`);
    const sql = (query: string) =>
      server.post('/v1/query_sql/bench', JSON.stringify({ query }), {
        'content-type': 'application/json',
        accept: 'application/json',
      });
    // As a user would meet it: right after the writes, while the kernel still writes back what they left.
    const pendingAtFirstMb = pendingDiskWritesMb();
    const firstS = await seconds(() => sql(COUNT));
    const firstVectorS = await seconds(() => sql(VECTOR));
    await sql('SELECT count(*) FROM dims');
    console.log(
      `first query (loads ${ROWS} rows without their vectors, ${pendingAtFirstMb} MB of disk writes pending): ` +
        `${firstS.toFixed(2)} s; first query of the vectors (loads the whole table): ${firstVectorS.toFixed(2)} s`,
    );

    const http = { groupBy: await latencies(() => sql(GROUP_BY)), join: await latencies(() => sql(JOIN)) };
    const warmCount = await latencies(() => sql(COUNT));

    const extra = facts(ROWS, APPENDED);
    await append('facts', extra);
    const afterAppendMs = (await seconds(() => sql(COUNT))) * 1000;
    const counted = JSON.parse((await sql(COUNT)).toString()) as { data: { n: number }[] };
    if (counted.data[0]?.n !== ROWS + APPENDED) throw new Error(`count after append: ${JSON.stringify(counted)}`);
    const rssMb = await server.rssMb();

    // The load alone: a restarted server (an empty DuckDB) loads the same table with the disk quiet and
    // nothing left for upkeep to fold (a compaction of the 10k rows would otherwise share the machine).
    await untilIndexed(dataDir, 'bench');
    await server.stop();
    const flushed = flushDisk();
    server = await startServer(dataDir, { STRATA_SQL_MAX_ROWS: '10000000' }, { build: false, secret: server.secret });
    const quietPartialS = await seconds(() => sql(COUNT));
    const quietLoadS = await seconds(() => sql(VECTOR));
    console.log(
      `loads after a restart, disk quiet (${ROWS + APPENDED} rows): without vectors ${quietPartialS.toFixed(2)} s, ` +
        `whole ${quietLoadS.toFixed(2)} s`,
    );

    // DuckDB in this process, loaded from the same batches in memory, in one insert, the way the service
    // loads each segment (on a session that need not keep insertion order).
    // Queries then run on a connection of their own, as in the service.
    const instance = await DuckDBInstance.create(':memory:');
    const loader = await instance.connect();
    await loader.run('SET SESSION preserve_insertion_order = false');
    const feed = RowGroupFeed.register(loader, availableParallelism());
    await loader.run('CREATE TABLE facts (id BIGINT, x DOUBLE, cat VARCHAR, vec FLOAT[384])');
    await loader.run('CREATE TABLE dims (id BIGINT, label VARCHAR)');
    const all: RecordBatch[] = [];
    for (let start = 0; start < ROWS; start += BATCH) all.push(...facts(start, Math.min(BATCH, ROWS - start)));
    const nativeLoadS = await seconds(() => feed.insert('facts', all));
    await feed.insert('dims', [dims()]);
    loader.closeSync();
    const connection = await instance.connect();
    const native = {
      groupBy: await latencies(() => connection.runAndReadAll(GROUP_BY)),
      join: await latencies(() => connection.runAndReadAll(JOIN)),
    };
    const nativeCount = await latencies(() => connection.runAndReadAll(COUNT));
    connection.closeSync();
    instance.closeSync();

    saveResults('sql', {
      rows: ROWS,
      httpAppendS: Number(loadS.toFixed(1)),
      upkeepSettledS: Number(settledS.toFixed(1)),
      firstQueryS: Number(firstS.toFixed(2)),
      firstQueryRowsPerS: Math.round(ROWS / firstS),
      firstVectorQueryS: Number(firstVectorS.toFixed(2)),
      firstVectorQueryRowsPerS: Math.round(ROWS / firstVectorS),
      pendingDiskWritesAtFirstQueryMb: pendingAtFirstMb,
      flushedBeforeQuietLoad: flushed,
      quietLoadWithoutVectorsS: Number(quietPartialS.toFixed(2)),
      loadWithoutVectorsRowsPerS: Math.round((ROWS + APPENDED) / quietPartialS),
      quietLoadS: Number(quietLoadS.toFixed(2)),
      loadRowsPerS: Math.round((ROWS + APPENDED) / quietLoadS),
      nativeLoadRowsPerS: Math.round(ROWS / nativeLoadS),
      http,
      native,
      ratioP50: {
        groupBy: Number((http.groupBy.p50 / native.groupBy.p50).toFixed(2)),
        join: Number((http.join.p50 / native.join.p50).toFixed(2)),
      },
      count: { http: warmCount, native: nativeCount },
      afterAppend: {
        appendedRows: APPENDED,
        firstQueryMs: Number(afterAppendMs.toFixed(1)),
        warmCountP50Ms: warmCount.p50,
        fullLoadMs: Math.round(firstVectorS * 1000),
      },
      serverRssMb: rssMb,
      medianOf: RUNS,
    });
  } finally {
    await server.stop();
    removeDataDir(dataDir);
  }
}

await main();
