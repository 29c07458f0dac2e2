import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { rememberSecret } from './support/logs.js';
import { type Served, serveProcess } from './support/processes.js';
import { activeLocalDatabase, type Client, client } from './support/server.js';
import { ARROW, ipcOf, type Row, tablesOf } from './support/tables.js';

/**
 * The node's budget for SQL copies, scaled down: three databases whose copies are ~40 MiB each in DuckDB, under
 * a 100 MiB budget that holds two. The server runs as its own process so that its memory can be read. Costs
 * ~35 s: 900k rows written, seven table loads, and three rounds of statements held for the 3 s SQL time limit.
 */
const KEY = `sk_${'m'.repeat(43)}`;
const MIB = 1024 * 1024;
const BUDGET_MB = 100;
const ROWS = 300_000;
const DIM = 32;
const TIME_LIMIT_MS = 3000;
/**
 * Memory the server may gain beyond the budget: three workers placed (Lance connections, table handles, DuckDB
 * instances), and what a load holds beside the copy (Lance's read-ahead, the Arrow segments). Measured here
 * 181–218 MiB beyond the budget over four runs, and 264 once in CI; at this scale those dwarf the one copy the
 * budget keeps out, which the copies' own peak (`highest`) checks.
 */
const MARGIN_MB = 320;

const dataDir = mkdtempSync(join(tmpdir(), 'strata-sql-memory-'));
let server: Served;
let api: Client;

afterAll(async () => {
  // Stopped in order, so that DuckDB deletes any temporary files it made.
  server?.child.kill('SIGTERM');
  const killer = setTimeout(() => server?.child.kill('SIGKILL'), 10_000);
  await server?.exited;
  clearTimeout(killer);
  rmSync(dataDir, { recursive: true, force: true });
});

const DATABASES = ['alpha', 'beta', 'gamma'] as const;

/** 300k rows of an id and a 32-d vector: ~40 MiB once DuckDB holds them. */
function rowsOf(from: number, n: number): Uint8Array {
  const values = new Float32Array(n * DIM);
  for (let i = 0; i < values.length; i++) values[i] = (i % 97) / 97;
  const type = new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true));
  const child = arrow.makeData({ type: new arrow.Float32(), length: n * DIM, data: values });
  return ipcOf(
    new arrow.Table({
      id: arrow.vectorFromArray(
        Array.from({ length: n }, (_, i) => BigInt(from + i)),
        new arrow.Int64(),
      ),
      v: arrow.makeVector(arrow.makeData({ type, length: n, child })),
    }),
  );
}

const sqlOn = (database: string, query: string) =>
  api.request<{ data: Row[]; error?: string; code?: string }>(
    'POST',
    `/v1/query_sql/${database}`,
    { query },
    { accept: 'application/json' },
  );
/** Reads the vector column, so the copy is the whole table. */
const readAll = (database: string) => sqlOn(database, 'SELECT count(*) AS n, sum(v[1]) > 0 AS any FROM t');
/** Runs until the SQL time limit interrupts it, reading no table: its database is busy and its copy stays. */
const longStatement = (database: string) =>
  sqlOn(database, 'SELECT sum(a.range * b.range) AS s FROM range(2000000) a, range(2000000) b');

/** The server's resident memory now and at its peak since `resetPeak`, MiB (Linux). */
function memory(): { rssMb: number; peakMb: number } {
  const status = readFileSync(`/proc/${server.child.pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
}
const resetPeak = () => writeFileSync(`/proc/${server.child.pid}/clear_refs`, '5');

async function copiesBytes(): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  return Number(/^strata_sql_copies_bytes (\S+)$/m.exec(text)?.[1]);
}

beforeAll(async () => {
  rememberSecret(KEY);
  server = await serveProcess(dataDir, {
    STRATA_BOOTSTRAP_KEY: KEY,
    STRATA_SQL_NODE_MEMORY_MB: String(BUDGET_MB),
    STRATA_SQL_MEMORY_MB: String(BUDGET_MB),
    STRATA_SQL_THREADS: '1',
    STRATA_SQL_TIMEOUT_MS: String(TIME_LIMIT_MS),
    STRATA_UPKEEP_INTERVAL_MS: '600000',
  });
  api = client(server.url, `Bearer ${KEY}`);
  for (const name of DATABASES) {
    await activeLocalDatabase(api, name);
    const db = tablesOf(api, name);
    const created = await db.create({
      table_name: 't',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'v', type: 'vector', dim: DIM },
      ],
    });
    expect(created.status).toBe(200);
    for (let from = 0; from < ROWS; from += 100_000) {
      const appended = await api.request('POST', `/v1/append/${name}?table=t`, rowsOf(from, 100_000), {
        'content-type': ARROW,
        prefer: 'return=minimal',
      });
      expect(appended.status, JSON.stringify(appended.json)).toBeLessThan(300);
    }
  }
}, 120_000);

test('three databases whose copies do not all fit: idle ones make room, busy ones make 503 sql_memory_busy', async () => {
  const before = memory();
  resetPeak();
  let highest = 0;
  const sample = setInterval(() => {
    void copiesBytes().then((bytes) => (highest = Math.max(highest, bytes)));
  }, 50);
  try {
    const whole = [{ n: ROWS, any: true }];
    expect((await readAll('alpha')).json.data).toEqual(whole);
    expect((await readAll('beta')).json.data).toEqual(whole);
    const two = await copiesBytes();
    expect(two).toBeGreaterThan(60 * MIB);

    // alpha and beta hold two copies and are running statements: gamma's copy has nowhere to go.
    const alphaBusy = longStatement('alpha');
    const betaBusy = longStatement('beta');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const refused = await readAll('gamma');
    expect(refused.status).toBe(503);
    expect(refused.json.code).toBe('sql_memory_busy');
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refused.json.error).toMatch(/loading table "t" into SQL needs \d+ MiB more.*STRATA_SQL_NODE_MEMORY_MB/);
    expect([(await alphaBusy).json.code, (await betaBusy).json.code]).toEqual(['sql_timeout', 'sql_timeout']);

    // Both idle now; beta was used last, so alpha's copy is the one let go.
    expect((await sqlOn('beta', 'SELECT count(*) AS n FROM t')).json.data).toEqual([{ n: ROWS }]);
    expect((await readAll('gamma')).json.data).toEqual(whole);

    // With beta and gamma busy, alpha has to load again (its copy went), and cannot.
    const betaAgain = longStatement('beta');
    const gammaBusy = longStatement('gamma');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const alphaRefused = await readAll('alpha');
    expect(alphaRefused.status).toBe(503);
    expect(alphaRefused.json.code).toBe('sql_memory_busy');
    await Promise.all([betaAgain, gammaBusy]);
    expect((await readAll('alpha')).json.data).toEqual(whole);
  } finally {
    clearInterval(sample);
  }

  const after = memory();
  const grown = after.peakMb - before.rssMb;
  console.info(
    `SQL budget ${BUDGET_MB} MiB: copies peaked at ${(highest / MIB).toFixed(1)} MiB; server RSS ${before.rssMb.toFixed(0)} → peak ${after.peakMb.toFixed(0)} MiB (+${grown.toFixed(0)}), now ${after.rssMb.toFixed(0)} MiB`,
  );
  expect(highest).toBeLessThanOrEqual(BUDGET_MB * MIB);
  expect(grown).toBeLessThan(BUDGET_MB + MARGIN_MB);
}, 120_000);

test('a copy replaced while a statement reads it counts until that statement ends, then only the new one does', async () => {
  expect((await readAll('alpha')).json.data).toEqual([{ n: ROWS, any: true }]);
  // Reads alpha's copy until the time limit interrupts it.
  const reader = sqlOn('alpha', 'SELECT count(*) AS n FROM t a, t b WHERE (a.id * b.id) % 7 = 8');
  await new Promise((resolve) => setTimeout(resolve, 300));
  const removed = await api.request('POST', `/v1/delete/alpha?table=t&predicate=${encodeURIComponent('id = 0')}`);
  expect(removed.status).toBe(200);

  // The next statement loads the table again; the copy the reader holds stays until it ends.
  expect((await readAll('alpha')).json.data).toEqual([{ n: ROWS - 1, any: true }]);
  const both = await copiesBytes();
  expect((await reader).json.code).toBe('sql_timeout');
  const after = await eventuallyBelow(both - 30 * MIB);

  console.info(`copies while the reader ran ${(both / MIB).toFixed(1)} MiB, after it ${(after / MIB).toFixed(1)} MiB`);
  expect(both).toBeGreaterThan(75 * MIB);
  expect(after).toBeLessThan(50 * MIB);
}, 60_000);

/** The copies' bytes once they drop below `bytes`, or after 2 s. */
async function eventuallyBelow(bytes: number): Promise<number> {
  const until = Date.now() + 2000;
  for (;;) {
    const now = await copiesBytes();
    if (now < bytes || Date.now() > until) return now;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
