import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { rememberSecret } from './support/logs.js';
import { type Served, serveProcess } from './support/processes.js';
import { activeLocalDatabase, type Client, client, type Reply } from './support/server.js';
import { type Row, tablesOf } from './support/tables.js';

/**
 * A keyed write whose server died around its commit is sent again with its key after another client changed the
 * same rows. Whether it committed is read from the table's history, not its rows now: one that committed is
 * answered as it would have been and never applied again (a row another client deleted stays deleted, another
 * client's later update stays); one that did not commit is applied once.
 * Slow: about 22 s, a `strata serve` process killed around a commit and started again in every case.
 */

const KEY = `sk_${'h'.repeat(43)}`;
const dataDir = mkdtempSync(join(tmpdir(), 'strata-recovery-'));
// A dead node's hold on a key lapses this soon, so the retry does not wait long to look for its write.
const BASE = { STRATA_BOOTSTRAP_KEY: KEY, STRATA_IDEMPOTENCY_HOLD_MS: '300' };
const AFTER_COMMIT = { ...BASE, STRATA_TEST_CRASH_AFTER_COMMIT_EVERY: '1' };
const BEFORE_COMMIT = { ...BASE, STRATA_TEST_CRASH_BEFORE_COMMIT_EVERY: '1' };

let node: Served | undefined;
let api: Client;
afterAll(() => {
  node?.child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

async function start(env: Record<string, string>): Promise<void> {
  if (node !== undefined) {
    node.child.kill('SIGKILL');
    await node.exited;
  }
  node = await serveProcess(dataDir, env);
  api = client(node.url, `Bearer ${KEY}`);
}

const JSON_REPLY = { accept: 'application/json' };
const byId = (id: number) => encodeURIComponent(`id = ${id}`);

/** Sends a keyed write to a server set to die around its commit; the server is gone when this returns. */
async function crashOn(path: string, body: unknown, key: string): Promise<void> {
  const sent = await api.request('POST', path, body, { 'idempotency-key': key, ...JSON_REPLY }).catch(() => undefined);
  expect(sent, 'the server answered instead of dying').toBeUndefined();
  await node?.exited;
  node = undefined;
}

/** Sends a keyed write again until it is answered: a dead node's hold on the key lapses first. */
async function retry(path: string, body: unknown, key: string): Promise<Reply> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const sent = await api.request('POST', path, body, { 'idempotency-key': key, ...JSON_REPLY });
    if (sent.status !== 409 && sent.status !== 503) return sent;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${path} never answered`);
}

async function rows(table: string): Promise<Row[]> {
  const stored = await api.request<{ data: Row[] }>(
    'POST',
    '/v1/query_sql/db',
    { query: `SELECT id::INTEGER AS id, v::INTEGER AS v FROM ${table} ORDER BY id` },
    JSON_REPLY,
  );
  expect(stored.status).toBe(200);
  return stored.json.data;
}

async function createTable(name: string, data: Row[], keyed = false): Promise<void> {
  const created = await tablesOf(api, 'db').create({
    table_name: name,
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'v', type: 'i64', nullable: false },
    ],
    ...(keyed ? { primary_key: 'id' } : {}),
  });
  expect(created.status).toBe(200);
  expect((await api.request('POST', `/v1/append/db?table=${name}`, { data }, JSON_REPLY)).status).toBe(200);
}

beforeAll(async () => {
  rememberSecret(KEY);
  await start(BASE);
  await activeLocalDatabase(api, 'db');
}, 60_000);

test('an append that committed, whose row another client then deleted, is replayed and stays deleted', async () => {
  await createTable('a', [{ id: 1, v: 1 }]);
  await start(AFTER_COMMIT);
  await crashOn('/v1/append/db?table=a', { data: [{ id: 2, v: 2 }] }, 'append-1');
  await start(BASE);
  const deleted = await api.request('POST', `/v1/delete/db?table=a&predicate=${byId(2)}`, undefined, JSON_REPLY);
  expect(deleted.json).toMatchObject({ matched: 1, n_tombstoned: 1 });

  const again = await retry('/v1/append/db?table=a', { data: [{ id: 2, v: 2 }] }, 'append-1');
  expect(again.status).toBe(200);
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(await rows('a')).toEqual([{ id: 1, v: 1 }]);
}, 90_000);

test("an update that committed, then another client's update of the same row, is replayed and the other's value stays", async () => {
  await createTable('u', [
    { id: 1, v: 1 },
    { id: 2, v: 2 },
  ]);
  await start(AFTER_COMMIT);
  await crashOn(`/v1/update/db?table=u&predicate=${byId(1)}`, { data: [{ id: 1, v: 5 }] }, 'update-1');
  await start(BASE);
  const other = await api.request(
    'POST',
    `/v1/update/db?table=u&predicate=${byId(1)}`,
    { data: [{ id: 1, v: 9999 }] },
    JSON_REPLY,
  );
  expect(other.json).toMatchObject({ matched: 1, n_tombstoned: 1 });

  const again = await retry(`/v1/update/db?table=u&predicate=${byId(1)}`, { data: [{ id: 1, v: 5 }] }, 'update-1');
  expect(again.status).toBe(200);
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(again.json).toMatchObject({ matched: 1, n_tombstoned: 1, n_not_found: 0 });
  expect(await rows('u')).toEqual([
    { id: 1, v: 9999 },
    { id: 2, v: 2 },
  ]);
}, 90_000);

test('a delete that committed, then another append of a row its predicate matches, is replayed and the new row stays', async () => {
  await createTable('d', [
    { id: 1, v: 1 },
    { id: 2, v: 2 },
  ]);
  await start(AFTER_COMMIT);
  await crashOn(`/v1/delete/db?table=d&predicate=${byId(1)}`, undefined, 'delete-1');
  await start(BASE);
  const other = await api.request('POST', '/v1/append/db?table=d', { data: [{ id: 1, v: 7 }] }, JSON_REPLY);
  expect(other.status).toBe(200);

  const again = await retry(`/v1/delete/db?table=d&predicate=${byId(1)}`, undefined, 'delete-1');
  expect(again.status).toBe(200);
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(again.json).toMatchObject({ matched: 1, n_tombstoned: 1, n_not_found: 0 });
  expect(await rows('d')).toEqual([
    { id: 1, v: 7 },
    { id: 2, v: 2 },
  ]);
}, 90_000);

test('writes that did not commit, retried after other clients committed, are applied once', async () => {
  await createTable('n', [
    { id: 1, v: 1 },
    { id: 2, v: 2 },
  ]);
  await start(BEFORE_COMMIT);
  await crashOn('/v1/append/db?table=n', { data: [{ id: 3, v: 3 }] }, 'append-n');
  await start(BASE);
  // Versions after the one the write started from, none of them its own.
  expect((await api.request('POST', '/v1/append/db?table=n', { data: [{ id: 4, v: 4 }] })).status).toBe(200);
  const appended = await retry('/v1/append/db?table=n', { data: [{ id: 3, v: 3 }] }, 'append-n');
  expect(appended.status).toBe(200);
  expect(appended.headers.get('idempotent-replayed')).toBeNull();

  await start(BEFORE_COMMIT);
  await crashOn(`/v1/update/db?table=n&predicate=${byId(1)}`, { data: [{ id: 1, v: 10 }] }, 'update-n');
  await start(BASE);
  const other = await api.request(
    'POST',
    `/v1/update/db?table=n&predicate=${byId(2)}`,
    { data: [{ id: 2, v: 20 }] },
    JSON_REPLY,
  );
  expect(other.status).toBe(200);
  const updated = await retry(`/v1/update/db?table=n&predicate=${byId(1)}`, { data: [{ id: 1, v: 10 }] }, 'update-n');
  expect(updated.status).toBe(200);
  expect(updated.headers.get('idempotent-replayed')).toBeNull();
  expect(updated.json).toMatchObject({ matched: 1, n_tombstoned: 1, n_not_found: 0 });

  expect(await rows('n')).toEqual([
    { id: 1, v: 10 },
    { id: 2, v: 20 },
    { id: 3, v: 3 },
    { id: 4, v: 4 },
  ]);
}, 120_000);

test("upserts that committed, then another client's upsert of the same keys, are replayed and the other's values stay", async () => {
  await createTable('k', [{ id: 1, v: 1 }], true);
  // One that inserts a key (found by its new row key), and one that only replaces (found as an update is).
  for (const [body, key, counts] of [
    [
      [
        { id: 1, v: 5 },
        { id: 2, v: 5 },
      ],
      'upsert-insert',
      { inserted: 1, updated: 1 },
    ],
    [[{ id: 2, v: 6 }], 'upsert-replace', { inserted: 0, updated: 1 }],
  ] as const) {
    await start(AFTER_COMMIT);
    await crashOn('/v1/upsert/db?table=k', { data: body }, key);
    await start(BASE);
    const other = await api.request('POST', '/v1/upsert/db?table=k', { data: [{ id: 2, v: 9999 }] }, JSON_REPLY);
    expect(other.json).toEqual({ inserted: 0, updated: 1 });
    const again = await retry('/v1/upsert/db?table=k', { data: body }, key);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.json).toEqual(counts);
  }
  expect(await rows('k')).toEqual([
    { id: 1, v: 5 },
    { id: 2, v: 9999 },
  ]);
}, 120_000);

test('an upsert that did not commit, retried after another client committed, is applied once', async () => {
  await createTable('m', [{ id: 1, v: 1 }], true);
  await start(BEFORE_COMMIT);
  await crashOn(
    '/v1/upsert/db?table=m',
    {
      data: [
        { id: 1, v: 10 },
        { id: 3, v: 3 },
      ],
    },
    'upsert-m',
  );
  await start(BASE);
  expect((await api.request('POST', '/v1/append/db?table=m', { data: [{ id: 4, v: 4 }] })).status).toBe(200);
  const upserted = await retry(
    '/v1/upsert/db?table=m',
    {
      data: [
        { id: 1, v: 10 },
        { id: 3, v: 3 },
      ],
    },
    'upsert-m',
  );
  expect(upserted.status).toBe(200);
  expect(upserted.headers.get('idempotent-replayed')).toBeNull();
  expect(upserted.json).toEqual({ inserted: 1, updated: 1 });
  expect(await rows('m')).toEqual([
    { id: 1, v: 10 },
    { id: 3, v: 3 },
    { id: 4, v: 4 },
  ]);
}, 120_000);

/** The folders of the versions each table's dataset keeps. */
function versionFolders(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const path = join(dir, entry.name);
      if (entry.name === '_versions') found.push(path);
      else walk(path);
    }
  };
  walk(dataDir);
  return found;
}

const keptIn = (folder: string) => readdirSync(folder).filter((f) => f.endsWith('.manifest')).length;

test('a write whose versions were pruned before its retry is refused with 422, not applied again', async () => {
  // Every version but the latest is pruned as soon as upkeep passes.
  // A dead node's upkeep lease on the table lapses soon too.
  const PRUNING = {
    STRATA_VERSION_RETENTION_MS: '0',
    STRATA_UPKEEP_INTERVAL_MS: '100',
    STRATA_UPKEEP_LEASE_MS: '300',
  };
  await start(BASE);
  const before = new Set(versionFolders());
  await createTable('p', [{ id: 1, v: 1 }]);
  const [versions] = versionFolders().filter((f) => !before.has(f));
  if (versions === undefined) throw new Error("table p's versions folder not found");
  await start({ ...AFTER_COMMIT, ...PRUNING });
  await crashOn('/v1/append/db?table=p', { data: [{ id: 2, v: 2 }] }, 'append-p');
  await start({ ...BASE, ...PRUNING });
  const deleted = await api.request('POST', `/v1/delete/db?table=p&predicate=${byId(2)}`, undefined, JSON_REPLY);
  expect(deleted.json).toMatchObject({ matched: 1, n_tombstoned: 1 });
  for (let waited = 0; keptIn(versions) > 1; waited += 100) {
    expect(waited, `versions kept: ${keptIn(versions)}`).toBeLessThan(30_000);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  const again = await retry('/v1/append/db?table=p', { data: [{ id: 2, v: 2 }] }, 'append-p');
  expect(again.status, JSON.stringify(again.json)).toBe(422);
  expect(again.json).toMatchObject({ code: 'idempotency_unresolvable' });
  expect(String(again.json.error)).toMatch(/STRATA_VERSION_RETENTION_MS/);
  expect(await rows('p')).toEqual([{ id: 1, v: 1 }]);
}, 120_000);
