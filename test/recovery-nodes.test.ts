import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { rememberSecret } from './support/logs.js';
import { freshControlUrl } from './support/postgres.js';
import { cli, type Served, serveProcess } from './support/processes.js';
import { activeLocalDatabase, type Client, client, type Reply } from './support/server.js';
import { type Row, tablesOf } from './support/tables.js';

/**
 * Issue 27's crash through two nodes on one PostgreSQL and one data dir: a keyed write commits on node C, C is
 * killed before it answers, another client changes the same rows through node A, and the original client retries
 * with its key on A. The retry finds the write in the table's history and replays it: nothing is applied twice.
 * Slow: about 10 s, two `strata serve` processes on PostgreSQL, one of them killed.
 */

let controlUrl: string;
let dataDir: string;
let secret: string;
let a: Served | undefined;
let c: Served | undefined;
let apiA: Client;

const env = () => ({
  STRATA_CONTROL_URL: controlUrl,
  // A dead node's hold on a key, and its upkeep lease, lapse this soon.
  STRATA_IDEMPOTENCY_HOLD_MS: '300',
  STRATA_UPKEEP_LEASE_MS: '300',
});
const JSON_REPLY = { accept: 'application/json' };
const byId = (id: number) => encodeURIComponent(`id = ${id}`);

beforeAll(async () => {
  controlUrl = await freshControlUrl();
  dataDir = mkdtempSync(join(tmpdir(), 'strata-recovery-nodes-'));
  const created = await cli(['keys', 'create', '--account', 'acme'], { STRATA_CONTROL_URL: controlUrl });
  secret = created.stdout.trim();
  rememberSecret(secret);
  a = await serveProcess(dataDir, env());
  apiA = client(a.url, `Bearer ${secret}`);
  await activeLocalDatabase(apiA, 'db');
}, 60_000);

afterAll(() => {
  a?.child.kill('SIGKILL');
  c?.child.kill('SIGKILL');
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
});

/** Sends a keyed write through a node C that dies after committing it, before answering. */
async function crashOnC(path: string, body: unknown, key: string): Promise<void> {
  c = await serveProcess(dataDir, { ...env(), STRATA_TEST_CRASH_AFTER_COMMIT_EVERY: '1' });
  const apiC = client(c.url, `Bearer ${secret}`);
  const sent = await apiC.request('POST', path, body, { 'idempotency-key': key, ...JSON_REPLY }).catch(() => undefined);
  expect(sent, 'node C answered instead of dying').toBeUndefined();
  await c.exited;
  c = undefined;
}

/** Sends a keyed write again through node A until it is answered: C's hold on the key lapses first. */
async function retryOnA(path: string, body: unknown, key: string): Promise<Reply> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const sent = await apiA.request('POST', path, body, { 'idempotency-key': key, ...JSON_REPLY });
    if (sent.status !== 409 && sent.status !== 503) return sent;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${path} never answered`);
}

async function rows(table: string): Promise<Row[]> {
  const stored = await apiA.request<{ data: Row[] }>(
    'POST',
    '/v1/query_sql/db',
    { query: `SELECT id::INTEGER AS id, v::INTEGER AS v FROM ${table} ORDER BY id` },
    JSON_REPLY,
  );
  return stored.json.data;
}

async function createTable(name: string, data: Row[]): Promise<void> {
  const created = await tablesOf(apiA, 'db').create({
    table_name: name,
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'v', type: 'i64', nullable: false },
    ],
  });
  expect(created.status).toBe(200);
  expect((await apiA.request('POST', `/v1/append/db?table=${name}`, { data }, JSON_REPLY)).status).toBe(200);
}

test('an append committed on a node that died, whose row another client deleted on another node, stays deleted', async () => {
  await createTable('a', [{ id: 1, v: 1 }]);
  await crashOnC('/v1/append/db?table=a', { data: [{ id: 2, v: 2 }] }, 'append-1');
  const deleted = await apiA.request('POST', `/v1/delete/db?table=a&predicate=${byId(2)}`, undefined, JSON_REPLY);
  expect(deleted.json).toMatchObject({ matched: 1, n_tombstoned: 1 });

  const again = await retryOnA('/v1/append/db?table=a', { data: [{ id: 2, v: 2 }] }, 'append-1');
  expect(again.status).toBe(200);
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(await rows('a')).toEqual([{ id: 1, v: 1 }]);
}, 90_000);

test("an update committed on a node that died keeps another client's later update made on another node", async () => {
  await createTable('u', [{ id: 1, v: 1 }]);
  await crashOnC(`/v1/update/db?table=u&predicate=${byId(1)}`, { data: [{ id: 1, v: 5 }] }, 'update-1');
  const path = `/v1/update/db?table=u&predicate=${byId(1)}`;
  const other = await apiA.request('POST', path, { data: [{ id: 1, v: 9999 }] }, JSON_REPLY);
  expect(other.json).toMatchObject({ matched: 1, n_tombstoned: 1 });

  const again = await retryOnA(path, { data: [{ id: 1, v: 5 }] }, 'update-1');
  expect(again.status).toBe(200);
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(again.json).toMatchObject({ matched: 1, n_tombstoned: 1, n_not_found: 0 });
  expect(await rows('u')).toEqual([{ id: 1, v: 9999 }]);
}, 90_000);
