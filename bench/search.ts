/**
 * npm run bench:search — warm search latency through HTTP (k = 10) beside the same queries in-process on
 * LanceDB, hybrid searches a second with 8 clients at once (HTTP and in process, warm, the median of three rounds), the round trip of requests that search nothing (the floor under every HTTP figure), recall@10 of the
 * vector leg against exact search, hybrid search with and without a filter 1% of rows pass (a range of ids through
 * the scalar index on id), exact count of a two-term query, index build and upkeep times, latency with
 * 1% and 10% of rows unindexed on the node that wrote them (its fresh tier; the 10% also with 5% of rows deleted)
 * and on a node that did not (Lance's own path), the 10% through HTTP strong and `consistency: "eventual"`, in process, and in process over the indexed
 * rows alone; how long upkeep then takes to fold them in and latency after; latency while 2,000 rows/s are
 * appended in 1k-row batches (sustained ingest, measured once it has run 15 s); and server RSS.
 * Sizes: BENCH_ROWS (default 1000000), BENCH_QUERIES (200). BENCH_ONLY_INDEXED=1 stops after the fully indexed
 * phases (latency, recall, a selective filter), before the tail's.
 */
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Table as LanceTable, MatchQuery } from '@lancedb/lancedb';
import type { Table as ArrowTable } from 'apache-arrow';
import { arrow } from '../src/arrow/arrow.js';
import { READ_OPTIONS } from '../src/engine/lance/lance.js';
import { NPROBES, refineFactorFor } from '../src/engine/lance/legs.js';
import { firstTextRead } from '../src/engine/search/legs.js';
import { DIM, exactTopK, makeCorpus, makeQueries } from './corpus.js';
import {
  ARROW,
  activeDatabase,
  appendWaiting,
  batchOf,
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

const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const QUERIES = Number(process.env.BENCH_QUERIES ?? 200);
const RECALL_QUERIES = 30;
const BATCH = 20_000;
const K = 10;
/**
 * What the service first asks of each leg (src/engine/search.ts): the rows it ranks (the default window of 100
 * when both legs run, else k), past them what `firstTextRead` says for text, where scores tie often, and one
 * more for vectors.
 */
const HYBRID_WINDOW = 100;
const VECTOR_SLACK = 1;
/** Sustained ingest: rows appended a second, in batches of this many, and at most this many rows in all. */
const INGEST_RATE = 2_000;
const INGEST_BATCH = 1_000;
const INGEST_ROWS = 100_000;
const INGEST_WARMUP_MS = 15_000;

const schema = new arrow.Schema([
  new arrow.Field('id', new arrow.Int64(), false),
  new arrow.Field('body', new arrow.Utf8(), true),
  new arrow.Field('emb', vectorType(DIM), true),
]);

function batchBody(texts: string[], vectors: Float32Array, from: number, to: number): Uint8Array {
  const n = to - from;
  const batch = batchOf(schema, [
    arrow.makeVector(BigInt64Array.from({ length: n }, (_, i) => BigInt(from + i))),
    arrow.vectorFromArray(texts.slice(from, to), new arrow.Utf8()),
    vectorColumn(vectors.subarray(from * DIM, to * DIM), DIM),
  ]);
  return arrow.tableToIPC(new arrow.Table([batch]), 'stream');
}

async function appendCorpus(
  server: Server,
  texts: string[],
  vectors: Float32Array,
  from: number,
  to: number,
  batch = BATCH,
): Promise<void> {
  for (let start = from; start < to; start += batch) {
    const body = batchBody(texts, vectors, start, Math.min(to, start + batch));
    await appendWaiting(server, '/v1/append/bench?table=docs', body, { 'content-type': ARROW, accept: ARROW });
  }
}

/** The table's dataset in the bucket, opened in-process as a Lance client. */
async function dataset(dataDir: string): Promise<{ lance: LanceTable; close: () => void }> {
  const dir = join(dataDir, 'buckets', 'bench', 'tables');
  const name = (readdirSync(dir).find((f) => f.endsWith('.lance')) ?? '').replace(/\.lance$/, '');
  const connection = await connect(dir, { readConsistencyInterval: 0 });
  const lance = await connection.openTable(name);
  return {
    lance,
    close: () => {
      lance.close();
      connection.close();
    },
  };
}

/** Rows some index of the table does not cover yet (the most any one index lacks). */
async function unindexedRows(lance: LanceTable): Promise<number> {
  let unindexed = 0;
  for (const index of await lance.listIndices()) {
    unindexed = Math.max(unindexed, (await lance.indexStats(index.name))?.numUnindexedRows ?? 0);
  }
  return unindexed;
}

interface Latencies {
  text: number[];
  vector: number[];
  hybrid: number[];
  count: number[];
}
type Kind = keyof Latencies;
const KINDS: readonly Kind[] = ['text', 'vector', 'hybrid', 'count'];
/** How one side (the service over HTTP, or LanceDB in-process) runs query `q` of each kind. */
type Runner = Record<Kind, (q: number) => Promise<unknown>>;

/** The service's searches over HTTP; `eventual` asks them to read only what the indexes cover (count cannot). */
function httpRunner(server: Server, queries: ReturnType<typeof makeQueries>, eventual = false): Runner {
  const consistency = eventual ? { consistency: 'eventual' } : {};
  const run = (body: object, path = '/v1/hybrid_search/bench') =>
    server.post(
      path,
      JSON.stringify({ table_name: 'docs', ...body, ...(path === '/v1/count/bench' ? {} : consistency) }),
      {
        'content-type': 'application/json',
        accept: ARROW,
      },
    );
  const text = (q: number) => ({ text_field: 'body', text_query: queries.texts[q], k: K, projection: ['id'] });
  const vector = (q: number) => ({ vector_field: 'emb', vector_query: queries.vectors[q], k: K, projection: ['id'] });
  return {
    text: (q) => run(text(q)),
    vector: (q) => run(vector(q)),
    hybrid: (q) => run({ ...text(q), ...vector(q) }),
    count: (q) => run({ field_name: 'body', query: queries.texts[q] }, '/v1/count/bench'),
  };
}

/**
 * The service's queries run on LanceDB in this process, with the same execution options as the service's reads.
 * `indexedOnly`: Lance's `fastSearch()`, which skips rows no index covers yet (the service never does: API.md);
 * it shows what the brute-force part of a search over fresh rows costs.
 */
function inProcessRunner(lance: LanceTable, queries: ReturnType<typeof makeQueries>, indexedOnly = false): Runner {
  const fast = <Q extends { fastSearch(): Q }>(query: Q): Q => (indexedOnly ? query.fastSearch() : query);
  const text = (q: number) => fast(lance.query().fullTextSearch(new MatchQuery(queries.texts[q] ?? '', 'body')));
  const vector = (q: number) =>
    fast(
      lance
        .vectorSearch(queries.vectors[q] ?? [])
        .column('emb')
        .distanceType('l2'),
    );
  const textLeg = (q: number) =>
    text(q).select(['_rowkey', '_score', 'id']).limit(firstTextRead(K, false)).toArrow(READ_OPTIONS);
  const vectorLeg = (q: number) =>
    vector(q)
      .select(['_rowkey', 'id'])
      .limit(K + VECTOR_SLACK)
      .nprobes(NPROBES)
      .refineFactor(refineFactorFor(K + VECTOR_SLACK))
      .toArrow(READ_OPTIONS);
  // With both legs the service reads only row ids and measures, then the winners' columns (src/engine/search.ts).
  const idsOf = (t: ArrowTable) => Array.from(t.getChild('_rowid')?.toArray() as BigUint64Array);
  const hybrid = async (q: number) => {
    const [textHits, vectorHits] = await Promise.all([
      text(q).select(['_score']).withRowId().limit(firstTextRead(HYBRID_WINDOW, true)).toArrow(READ_OPTIONS),
      vector(q)
        .select(['_distance'])
        .withRowId()
        .limit(HYBRID_WINDOW + VECTOR_SLACK)
        .nprobes(NPROBES)
        .refineFactor(refineFactorFor(HYBRID_WINDOW + VECTOR_SLACK))
        .toArrow(READ_OPTIONS),
    ]);
    const winners = [...idsOf(textHits).slice(0, K / 2), ...idsOf(vectorHits).slice(0, K / 2)];
    return lance.takeRowIds(winners).select(['id']).toArrow(READ_OPTIONS);
  };
  return {
    text: (q) => textLeg(q),
    vector: (q) => vectorLeg(q),
    hybrid,
    count: (q) => text(q).select([]).limit(1e9).toArrow(READ_OPTIONS),
  };
}

/**
 * Latencies of every side's queries, taken in turns query by query (which side goes first alternates), so that
 * the sides share the machine's state (caches, memory, neighbours) rather than each having its own stretch of it.
 */
async function measure<S extends string>(
  runners: Record<S, Runner>,
  queryCount: number,
): Promise<Record<S, Latencies>> {
  const sides = Object.keys(runners) as S[];
  const out = Object.fromEntries(
    sides.map((side) => [side, { text: [], vector: [], hybrid: [], count: [] } as Latencies]),
  ) as Record<S, Latencies>;
  for (let i = 0; i < QUERIES + 20; i++) {
    const q = i % queryCount;
    const order = i % 2 === 0 ? sides : [...sides].reverse();
    for (const kind of KINDS) {
      for (const side of order) {
        const start = performance.now();
        await runners[side][kind](q);
        if (i >= 20) out[side][kind].push(performance.now() - start); // the first 20 warm up
      }
    }
  }
  return out;
}

const summary = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return { p50: Number(percentile(sorted, 50).toFixed(2)), p99: Number(percentile(sorted, 99).toFixed(2)) };
};
/** p50 over HTTP against p50 in process, per kind of search. */
const ratios = (http: Latencies, inProcess: Latencies) => ({
  text: Number((summary(http.text).p50 / summary(inProcess.text).p50).toFixed(2)),
  vector: Number((summary(http.vector).p50 / summary(inProcess.vector).p50).toFixed(2)),
  hybrid: Number((summary(http.hybrid).p50 / summary(inProcess.hybrid).p50).toFixed(2)),
});

/**
 * p50 round trips of requests that do no search, beside the searches' figures: what any request through HTTP
 * costs here. `healthz` is a GET that the service answers without authentication; `schema` an authenticated
 * POST with a JSON body that finds the table as a search does, and answers from the catalog.
 */
async function httpFloor(server: Server): Promise<{ healthz: number; schema: number }> {
  const p50 = async (run: () => Promise<unknown>) => {
    const times: number[] = [];
    for (let i = 0; i < QUERIES + 20; i++) {
      const start = performance.now();
      await run();
      if (i >= 20) times.push(performance.now() - start);
    }
    return summary(times).p50;
  };
  return {
    healthz: await p50(() => server.get('/healthz')),
    schema: await p50(() => server.post('/v1/schema/bench', JSON.stringify({ table_name: 'docs' }))),
  };
}

/** Searches a second with `CLIENTS` clients each running queries one after another, `QUERIES` in all. */
const CLIENTS = 8;
async function throughput(run: (q: number) => Promise<unknown>, queryCount: number): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < QUERIES) await run(next++ % queryCount);
    }),
  );
  return Math.round((QUERIES * 1000) / (performance.now() - started));
}

/**
 * Hybrid searches a second with `CLIENTS` clients on each side once warm: a round of each to warm it (the server's
 * row-key cache fills as searches touch fragments, and the first round of a side ran 15–25% slower than its later
 * ones), then `ROUNDS` rounds taking turns, which side goes first alternating; the median round of each.
 */
const ROUNDS = 3;
async function steadyThroughput(
  sides: { http: (q: number) => Promise<unknown>; inProcess: (q: number) => Promise<unknown> },
  queryCount: number,
) {
  const rounds: { http: number[]; inProcess: number[] } = { http: [], inProcess: [] };
  for (const side of ['http', 'inProcess'] as const) await throughput(sides[side], queryCount);
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? (['http', 'inProcess'] as const) : (['inProcess', 'http'] as const);
    for (const side of order) rounds[side].push(await throughput(sides[side], queryCount));
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  return { http: med(rounds.http), inProcess: med(rounds.inProcess), rounds };
}

/** Each text query's top 10 over HTTP: ids and `_bm25`. */
async function textRankings(server: Server, queries: ReturnType<typeof makeQueries>) {
  const out: { ids: number[]; bm25: number[] }[] = [];
  for (const query of queries.texts) {
    const body = JSON.stringify({
      table_name: 'docs',
      text_field: 'body',
      text_query: query,
      k: K,
      projection: ['id'],
    });
    const reply = await server.post('/v1/hybrid_search/bench', body, {
      'content-type': 'application/json',
      accept: 'application/json',
    });
    const rows = (JSON.parse(reply.toString()) as { data: { id: number; _bm25: number }[] }).data;
    out.push({ ids: rows.map((r) => r.id), bm25: rows.map((r) => r._bm25) });
  }
  return out;
}

/**
 * How the same text queries answer with a tail and deletions pending and once upkeep folded them: queries whose
 * top 10 differ, and `_bm25` values (of rows in both) that differ by more than 1e-6 relative.
 */
function rankingAgreement(before: Awaited<ReturnType<typeof textRankings>>, after: typeof before) {
  let differentTop10 = 0;
  let scores = 0;
  let differentScores = 0;
  before.forEach((b, q) => {
    const a = after[q] ?? { ids: [], bm25: [] };
    if (JSON.stringify(a.ids) !== JSON.stringify(b.ids)) differentTop10++;
    b.ids.forEach((id, i) => {
      const j = a.ids.indexOf(id);
      if (j < 0) return;
      scores++;
      const x = b.bm25[i] ?? 0;
      const y = a.bm25[j] ?? 0;
      if (Math.abs(x - y) > 1e-6 * Math.max(Math.abs(x), Math.abs(y))) differentScores++;
    });
  });
  return {
    queries: before.length,
    different_top10: differentTop10,
    bm25_compared: scores,
    bm25_different: differentScores,
  };
}

/** A gauge of the server's `/metrics`. */
async function gauge(server: Server, name: string): Promise<number> {
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1] ?? Number.NaN);
}

/** Upkeep steps of one kind the server has finished since it started. */
async function upkeepSteps(server: Server, work: string): Promise<number> {
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  const line = new RegExp(`^strata_upkeep_duration_seconds_count\\{work="${work}"\\} (\\S+)$`, 'm');
  return Number(line.exec(metrics)?.[1] ?? 0);
}

/**
 * Latencies while another client appends `INGEST_RATE` rows a second in `INGEST_BATCH`-row Arrow batches (rows
 * `from` on of the corpus, `INGEST_ROWS` at most), with upkeep folding them as it does; and the rate achieved.
 * Measured once the ingest has run `INGEST_WARMUP_MS` (searches running meanwhile, unmeasured): a steady state,
 * not the server's first minute after its restart, whose upkeep process starts cold (its first fold at 1M rows
 * took 13–14 s against 2–4 s for later ones).
 */
async function underIngest(
  server: Server,
  corpus: { texts: string[]; vectors: Float32Array },
  queries: ReturnType<typeof makeQueries>,
  from: number,
) {
  let done = false;
  let appended = 0;
  const started = performance.now();
  const appender = (async () => {
    for (let i = 0; !done && appended + INGEST_BATCH <= INGEST_ROWS; i++) {
      const due = started + (i * INGEST_BATCH * 1000) / INGEST_RATE;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const at = from + appended;
      await appendCorpus(server, corpus.texts, corpus.vectors, at, at + INGEST_BATCH, INGEST_BATCH);
      appended += INGEST_BATCH;
    }
  })();
  const runner = httpRunner(server, queries);
  for (let q = 0; performance.now() - started < INGEST_WARMUP_MS; q++) await runner.hybrid(q % queries.texts.length);
  const folds = { optimize: await upkeepSteps(server, 'optimize'), retrain: await upkeepSteps(server, 'ann_retrain') };
  const measuring = performance.now();
  const before = appended;
  const { http } = await measure({ http: runner }, queries.texts.length);
  const measuredSeconds = (performance.now() - measuring) / 1000;
  const during = appended - before;
  folds.optimize = (await upkeepSteps(server, 'optimize')) - folds.optimize;
  folds.retrain = (await upkeepSteps(server, 'ann_retrain')) - folds.retrain;
  done = true;
  await appender;
  return { http, rowsPerS: Math.round(during / measuredSeconds), appended, measuredSeconds, folds };
}

const summarize = (l: Latencies) => ({
  text: summary(l.text),
  vector: summary(l.vector),
  hybrid: summary(l.hybrid),
  count: summary(l.count),
});

/**
 * Hybrid search with a filter that 1% of the rows pass (a range of ids, through the scalar index on `id`) against
 * the same searches without it, interleaved.
 */
async function selectiveFilter(server: Server, queries: ReturnType<typeof makeQueries>) {
  const width = Math.floor(ROWS / 100);
  const hybrid = (q: number, filter?: string) =>
    server.post(
      '/v1/hybrid_search/bench',
      JSON.stringify({
        table_name: 'docs',
        text_field: 'body',
        text_query: queries.texts[q % queries.texts.length],
        vector_field: 'emb',
        vector_query: queries.vectors[q % queries.vectors.length],
        k: K,
        projection: ['id'],
        ...(filter === undefined ? {} : { filter }),
      }),
      { 'content-type': 'application/json', accept: ARROW },
    );
  const plain: number[] = [];
  const withFilter: number[] = [];
  for (let i = 0; i < QUERIES + 20; i++) {
    const low = (i * 7919 * 97) % (ROWS - width);
    const filter = `id >= ${low} AND id < ${low + width}`;
    for (const [into, run] of [
      [plain, () => hybrid(i)],
      [withFilter, () => hybrid(i, filter)],
    ] as const) {
      const start = performance.now();
      await run();
      if (i >= 20) into.push(performance.now() - start);
    }
  }
  const p = summary(plain);
  const f = summary(withFilter);
  return {
    filter_passes: width,
    hybrid_ms: p,
    hybrid_with_filter_ms: f,
    ratio_p50: Number((f.p50 / p.p50).toFixed(2)),
  };
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'strata-bench-search-'));
  const extra = Math.floor(ROWS / 9); // 10% of the final table
  console.log(`generating ${ROWS + extra} rows (Zipf text, ${DIM}-d latent-model vectors)…`);
  const onePercent = Math.floor(ROWS / 99);
  const corpus = makeCorpus(ROWS + extra + INGEST_ROWS, 1);
  const queries = makeQueries(50, 2);

  let server = await startServer(dataDir, { STRATA_UPKEEP_INTERVAL_MS: '1000' });
  await activeDatabase(server, 'bench');
  await server.post(
    '/v1/create_table/bench',
    JSON.stringify({
      table_name: 'docs',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'body', type: 'utf8' },
        { name: 'emb', type: 'vector', dim: DIM },
      ],
      indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'l2' }], scalar: ['id'] },
    }),
  );
  const loadSeconds = await seconds(() => appendCorpus(server, corpus.texts, corpus.vectors, 0, ROWS));
  console.log(`loaded ${ROWS} rows in ${loadSeconds.toFixed(1)} s; waiting for upkeep to index them…`);
  // A query opens the table, which hands it to the worker's upkeep.
  await server.post('/v1/count/bench', JSON.stringify({ table_name: 'docs', field_name: 'body', query: 'x' }));
  const settleSeconds = await untilIndexed(dataDir, 'bench', true);
  const { lance, close } = await dataset(dataDir);
  console.log(`indexes built and caught up in ${settleSeconds.toFixed(1)} s`);

  const versionsBefore = await tableVersions(dataDir, 'bench');
  const { http, inProcess } = await measure(
    { http: httpRunner(server, queries), inProcess: inProcessRunner(lance, queries) },
    queries.texts.length,
  );
  // Upkeep that commits meanwhile (an ANN index trained again) shares the machine with the measurement.
  const upkeepDuringMeasurement = (await tableVersions(dataDir, 'bench')) !== versionsBefore;

  const floor = await httpFloor(server);
  const concurrent = await steadyThroughput(
    {
      http: httpRunner(server, queries).hybrid,
      inProcess: inProcessRunner(lance, queries).hybrid,
    },
    queries.texts.length,
  );

  let found = 0;
  for (let q = 0; q < RECALL_QUERIES; q++) {
    const query = queries.vectors[q] ?? [];
    const exact = exactTopK(corpus.vectors.subarray(0, ROWS * DIM), query, K);
    const body = await server.post(
      '/v1/hybrid_search/bench',
      JSON.stringify({ table_name: 'docs', vector_field: 'emb', vector_query: query, k: K, projection: ['id'] }),
      { 'content-type': 'application/json', accept: 'application/json' },
    );
    const got = (JSON.parse(body.toString()) as { data: { id: number }[] }).data.map((r) => r.id);
    found += got.filter((id) => exact.includes(id)).length;
  }
  const filtered = await selectiveFilter(server, queries);
  if (process.env.BENCH_ONLY_INDEXED === '1') {
    saveResults('search', { rows: ROWS, http_ms: summarize(http), selective_filter: filtered });
    close();
    await server.stop();
    removeDataDir(dataDir);
    return;
  }
  const rssIndexed = await server.rssMb();
  const upkeepRssIndexed = server.childrenRssMb();
  const countHits = JSON.parse(
    (
      await server.post(
        '/v1/count/bench',
        JSON.stringify({ table_name: 'docs', field_name: 'body', query: queries.texts[0] }),
      )
    ).toString(),
  ) as { count: number };

  // 10% more rows that no index covers yet: upkeep paused on the same server, warm as it was for the figures above
  // (a restarted one answered its first rounds slower: its row-key cache and Lance's index caches start empty).
  await server.pauseUpkeep(true);
  // First 1%, the steady state under ingest, searched on the node that wrote it (beside the indexes, in its tier).
  await appendCorpus(server, corpus.texts, corpus.vectors, ROWS, ROWS + onePercent);
  const { http: httpOnePercent } = await measure({ http: httpRunner(server, queries) }, queries.texts.length);
  await appendCorpus(server, corpus.texts, corpus.vectors, ROWS + onePercent, ROWS + extra);
  // The 10% appended and nothing deleted: the case of a bulk load searched at once.
  const { http: httpTenPercent } = await measure({ http: httpRunner(server, queries) }, queries.texts.length);
  // And 5% of the rows deleted, which the full-text index keeps counting until a compaction drops them.
  await server.post(`/v1/delete/bench?table=docs&predicate=${encodeURIComponent('id % 20 = 7')}`, undefined, {});
  const unindexed = await unindexedRows(lance);
  const rankedWithTail = await textRankings(server, queries);
  const unindexedPhase = await measure(
    {
      http: httpRunner(server, queries),
      httpEventual: httpRunner(server, queries, true),
      inProcess: inProcessRunner(lance, queries),
      indexedOnly: inProcessRunner(lance, queries, true),
    },
    queries.texts.length,
  );
  const httpUnindexed = unindexedPhase.http;
  const tier = { rows: await gauge(server, 'strata_fresh_rows'), bytes: await gauge(server, 'strata_fresh_bytes') };
  const concurrentUnindexed = await throughput(httpRunner(server, queries).hybrid, queries.texts.length);
  const rssUnindexed = await server.rssMb();
  const upkeepRssUnindexed = server.childrenRssMb();

  // The same tail on a node that did not write it (restarted): no fresh tier, Lance reads the tail itself.
  await server.stop();
  server = await startServer(dataDir, { STRATA_UPKEEP_PAUSED: '1' }, { build: false, secret: server.secret });
  const { http: httpLancePath } = await measure({ http: httpRunner(server, queries) }, queries.texts.length);

  // Upkeep let loose again: how long it takes to fold the fresh 10% in, and latency once it has.
  await server.stop();
  server = await startServer(dataDir, { STRATA_UPKEEP_INTERVAL_MS: '1000' }, { build: false, secret: server.secret });
  await server.post('/v1/count/bench', JSON.stringify({ table_name: 'docs', field_name: 'body', query: 'x' }));
  const foldSeconds = await untilIndexed(dataDir, 'bench', true);
  console.log(`the fresh ${extra} rows folded in ${foldSeconds.toFixed(1)} s`);
  const { http: httpFolded } = await measure({ http: httpRunner(server, queries) }, queries.texts.length);
  const rankedFolded = await textRankings(server, queries);
  const agreement = rankingAgreement(rankedWithTail, rankedFolded);
  // Sustained ingest on a node with the default settings (upkeep every 5 s, and at once past a quarter of the cap).
  await server.stop();
  server = await startServer(dataDir, {}, { build: false, secret: server.secret });
  const ingest = await underIngest(server, corpus, queries, ROWS + extra);
  const ratioToIndexed = (l: Latencies, kind: Kind, p: 'p50' | 'p99') =>
    Number((summary(l[kind])[p] / summary(http[kind])[p]).toFixed(2));
  const versus = (l: Latencies) =>
    Object.fromEntries(
      (['text', 'vector', 'hybrid'] as const).map((kind) => [
        kind,
        { p50: ratioToIndexed(l, kind, 'p50'), p99: ratioToIndexed(l, kind, 'p99') },
      ]),
    );

  const results = {
    rows: ROWS,
    k: K,
    queries: QUERIES,
    load_seconds: Number(loadSeconds.toFixed(1)),
    load_rows_per_s: Math.round(ROWS / loadSeconds),
    index_build_and_upkeep_seconds: Number(settleSeconds.toFixed(1)),
    upkeep_committed_during_measurement: upkeepDuringMeasurement,
    http_ms: summarize(http),
    in_process_ms: summarize(inProcess),
    ratio_http_vs_in_process_p50: ratios(http, inProcess),
    http_floor_ms: floor,
    hybrid_per_s_with_8_clients: {
      ...concurrent,
      ratio_http_vs_in_process: Number((concurrent.http / concurrent.inProcess).toFixed(2)),
    },
    recall_at_10_vector_leg: Number((found / (RECALL_QUERIES * K)).toFixed(3)),
    selective_filter: filtered,
    count_two_terms: { query: queries.texts[0], hits: countHits.count },
    with_1pct_unindexed: { http_ms: summarize(httpOnePercent), vs_indexed: versus(httpOnePercent) },
    with_10pct_appended: { http_ms: summarize(httpTenPercent), vs_indexed: versus(httpTenPercent) },
    with_10pct_unindexed: {
      unindexed_rows: unindexed,
      fresh_tier: tier,
      http_ms: summarize(httpUnindexed),
      vs_indexed: versus(httpUnindexed),
      hybrid_per_s_with_8_clients: concurrentUnindexed,
      http_ms_on_a_node_without_the_tier: summarize(httpLancePath),
      vs_indexed_without_the_tier: versus(httpLancePath),
      in_process_ms: summarize(unindexedPhase.inProcess),
      ratio_http_vs_in_process_p50: ratios(httpUnindexed, unindexedPhase.inProcess),
      in_process_indexed_rows_only_ms: summarize(unindexedPhase.indexedOnly),
      http_eventual_ms: summarize(unindexedPhase.httpEventual),
      hybrid_p50_vs_indexed: Number((summary(httpUnindexed.hybrid).p50 / summary(http.hybrid).p50).toFixed(2)),
      upkeep_fold_seconds: Number(foldSeconds.toFixed(1)),
      text_top10_with_tail_vs_folded: agreement,
      http_ms_after_fold: summarize(httpFolded),
    },
    sustained_ingest: {
      target_rows_per_s: INGEST_RATE,
      rows_per_s: ingest.rowsPerS,
      rows_appended: ingest.appended,
      measured_seconds: Number(ingest.measuredSeconds.toFixed(1)),
      upkeep_steps_finished_while_measured: ingest.folds,
      http_ms: summarize(ingest.http),
      vs_indexed: versus(ingest.http),
    },
    server_rss_mb: { indexed: rssIndexed, after_unindexed_phase: rssUnindexed, after_fold: await server.rssMb() },
    upkeep_process_rss_mb: {
      indexed: upkeepRssIndexed,
      after_unindexed_phase: upkeepRssUnindexed,
      after_fold: server.childrenRssMb(),
    },
  };
  saveResults('search', results);
  close();
  await server.stop();
  removeDataDir(dataDir);
}

await main();
