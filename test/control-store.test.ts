import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { ConfigError } from '../src/config.js';
import type { ControlEvent } from '../src/control/events.js';
import { hashKey, keyRecord } from '../src/control/keys.js';
import { openControlStore } from '../src/control/open.js';
import { IDEMPOTENCY_SWEEP_BATCH } from '../src/control/queries/idempotency.js';
import { SqliteControlStore } from '../src/control/sqlite.js';
import type { Account, ControlStore, DatabaseRecord } from '../src/control/store.js';
import type { TableRecord } from '../src/engine/tables/catalog.js';
import { StrataError } from '../src/errors.js';
import { freshControlUrl } from './support/postgres.js';

/** The same store contract, run against the embedded SQLite store and against PostgreSQL. */
interface Flavour {
  name: string;
  /** A new, empty store location (a URL for STRATA_CONTROL_URL). */
  fresh(): Promise<string>;
  /** Marks the store's schema as newer than this build knows. */
  fromTheFuture(url: string): Promise<void>;
  /** Runs one statement on the store's database directly (what no store method shows); returns its rows. */
  sql(url: string, statement: string): Promise<Record<string, unknown>[]>;
}

const dirs: string[] = [];
const opened: ControlStore[] = [];
afterAll(async () => {
  await Promise.allSettled(opened.map((store) => store.close()));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const flavours: Flavour[] = [
  {
    name: 'sqlite',
    async fresh() {
      const dir = mkdtempSync(join(tmpdir(), 'strata-store-'));
      dirs.push(dir);
      return `sqlite:${join(dir, 'control.sqlite')}`;
    },
    async fromTheFuture(url) {
      const db = new Database(url.slice('sqlite:'.length));
      db.prepare('INSERT INTO schema_migrations (version, applied_ms) VALUES (99, 0)').run();
      db.close();
    },
    async sql(url, statement) {
      const db = new Database(url.slice('sqlite:'.length));
      try {
        const prepared = db.prepare(statement);
        if (prepared.reader) return prepared.all() as Record<string, unknown>[];
        prepared.run();
        return [];
      } finally {
        db.close();
      }
    },
  },
  {
    name: 'postgres',
    fresh: freshControlUrl,
    async fromTheFuture(url) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query('INSERT INTO schema_migrations (version, applied_ms) VALUES (99, 0)');
      await client.end();
    },
    async sql(url, statement) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        return (await client.query<Record<string, unknown>>(statement)).rows;
      } finally {
        await client.end();
      }
    },
  },
];

async function open(url: string): Promise<ControlStore> {
  const store = await openControlStore({ controlUrl: url, dataDir: '/nonexistent' });
  opened.push(store);
  return store;
}

const database = (accountId: string, name: string, bucket = name): DatabaseRecord => ({
  id: `db_${name}_${Math.random().toString(36).slice(2)}`,
  accountId,
  name,
  createdMs: Date.now(),
  state: 'unverified',
  binding: { provider: 'local', bucket, prefix: '' },
  lastError: null,
});

const codeOf = (err: unknown) => (err instanceof StrataError ? err.code : String(err));

const readyTable = (databaseId: string, tableId: string): TableRecord => ({
  databaseId,
  name: tableId,
  tableId,
  schemaIpc: '',
  indexes: '{}',
  createdMs: 0,
  state: 'ready',
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits, up to a second, until `done`. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 50 && !done(); i++) await sleep(20);
}

/** What the store hears from now on. */
function events(store: ControlStore): ControlEvent[] {
  const seen: ControlEvent[] = [];
  store.events.on((event) => seen.push(event));
  return seen;
}

/** Until PostgreSQL's listener connected (the embedded store tells its own process at once). */
const listening = (store: ControlStore) => (store.shared ? sleep(200) : Promise.resolve());

describe.each(flavours)('the $name control store', (flavour) => {
  test('migrations run once even when several nodes start at once, and a newer schema is refused', async () => {
    const url = await flavour.fresh();
    const stores = await Promise.all([open(url), open(url), open(url)]);
    const account = await stores[0]?.ensureAccount('acme');

    expect((await stores[2]?.ensureAccount('acme'))?.id).toBe(account?.id);
    await Promise.all(stores.map((s) => s.close()));
    await flavour.fromTheFuture(url);
    const refused = await openControlStore({ controlUrl: url, dataDir: '/nonexistent' }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ConfigError);
    expect(String((refused as Error).message)).toMatch(/version 99, newer than this build knows/);
  });

  test('registrations racing on one store: one name, one location, the account limit each hold', async () => {
    const url = await flavour.fresh();
    const [a, b] = [await open(url), await open(url)];
    const acme = await a.ensureAccount('acme');
    const other = await a.ensureAccount('other');

    const sameName = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? a : b).insertDatabase(database(acme.id, 'shop', `b${i}`), 10)),
    );
    expect(sameName.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(sameName.flatMap((r) => (r.status === 'rejected' ? [codeOf(r.reason)] : []))).toEqual(
      Array(5).fill('database_exists'),
    );

    const sameBucket = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) =>
        (i % 2 === 0 ? a : b).insertDatabase(database(i % 2 === 0 ? acme.id : other.id, `n${i}`, 'shared'), 10),
      ),
    );
    expect(sameBucket.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(new Set(sameBucket.flatMap((r) => (r.status === 'rejected' ? [codeOf(r.reason)] : [])))).toEqual(
      new Set(['location_in_use']),
    );

    const held = (await a.listDatabases(other.id)).length;
    const limited = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? a : b).insertDatabase(database(other.id, `l${i}`), 3)),
    );
    expect(limited.filter((r) => r.status === 'fulfilled')).toHaveLength(3 - held);
    expect(new Set(limited.flatMap((r) => (r.status === 'rejected' ? [codeOf(r.reason)] : [])))).toEqual(
      new Set(['limit_exceeded']),
    );
  });

  test('row keys reserved at once by many writers never overlap', async () => {
    const url = await flavour.fresh();
    const stores = [await open(url), await open(url)];
    const [a] = stores as [ControlStore];
    const acme = await a.ensureAccount('acme');
    const db = database(acme.id, 'keys');
    await a.insertDatabase(db, 10);
    await a.insertTable({
      databaseId: db.id,
      name: 't',
      tableId: 't_keys',
      schemaIpc: '',
      indexes: '{}',
      createdMs: 0,
      state: 'ready',
    });

    const firsts = await Promise.all(
      Array.from({ length: 60 }, (_, i) => stores[i % 2]?.reserveRowKeys('t_keys', 1 + (i % 7)) ?? 0n),
    );
    const ranges = firsts
      .map((first, i) => [first, first + BigInt(1 + (i % 7))] as const)
      .sort((x, y) => (x[0] < y[0] ? -1 : 1));
    for (let i = 1; i < ranges.length; i++) expect(ranges[i]?.[0]).toBe(ranges[i - 1]?.[1]);
    expect(ranges[0]?.[0]).toBe(0n);
  });

  test('one verification at a time across stores; a claim lapses by itself', async () => {
    const url = await flavour.fresh();
    const [a, b] = [await open(url), await open(url)];
    const acme = await a.ensureAccount('acme');
    const db = database(acme.id, 'v');
    await a.insertDatabase(db, 10);

    expect(await a.claimVerification(db.id, 60_000)).toBe(true);
    expect(await b.claimVerification(db.id, 60_000)).toBe(false);
    await a.releaseVerification(db.id);
    expect(await b.claimVerification(db.id, 200)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await a.claimVerification(db.id, 60_000)).toBe(true);
  });

  test('upkeep leases: one holder, renewed by it, taken over once lapsed, handed back on release', async () => {
    const url = await flavour.fresh();
    const [a, b] = [await open(url), await open(url)];
    const acme = await a.ensureAccount('acme');
    const db = database(acme.id, 'leases');
    await a.insertDatabase(db, 10);
    await a.insertTable(readyTable(db.id, 't1'));
    const held = (tookOver: boolean) => ({ held: true, tookOver, dropped: false });
    const notHeld = { held: false, tookOver: false, dropped: false };

    expect(await a.acquireLease('t1', 'node-a', 300)).toEqual(held(false));
    expect(await b.acquireLease('t1', 'node-b', 300)).toEqual(notHeld);
    expect(await a.acquireLease('t1', 'node-a', 300)).toEqual(held(false));
    await sleep(400);
    expect(await b.acquireLease('t1', 'node-b', 300)).toEqual(held(true));
    expect(await a.acquireLease('t1', 'node-a', 300)).toEqual(notHeld);
    await b.releaseLease('t1', 'node-b');
    expect(await a.acquireLease('t1', 'node-a', 300)).toEqual(held(false));
  });

  test("a pass's lease is renewed through its database's deletion, which a purge waits for; no pass starts", async () => {
    const url = await flavour.fresh();
    const [a, b] = [await open(url), await open(url)];
    const acme = await a.ensureAccount('acme');
    const db = database(acme.id, 'purged');
    await a.insertDatabase(db, 10);
    for (const id of ['t_busy', 't_idle']) await a.insertTable(readyTable(db.id, id));
    const dropped = { held: false, tookOver: false, dropped: true };
    expect(await a.acquireLease('t_busy', 'node-a', 300)).toMatchObject({ held: true });

    expect(await b.markDeleting(db.id, true)).toBe('purging');

    // The pass under way keeps its lease past the time it would have lapsed, and the purge sees it held.
    for (let i = 0; i < 3; i++) {
      await sleep(150);
      expect(await a.renewLease('t_busy', 'node-a', 300)).toBe(true);
    }
    expect(await b.upkeepLeasesHeld(db.id)).toBe(1);
    // No other node takes it, no new pass starts on either table, and no one else renews it.
    expect(await b.renewLease('t_busy', 'node-b', 300)).toBe(false);
    expect(await b.acquireLease('t_busy', 'node-b', 300)).toEqual(dropped);
    expect(await a.acquireLease('t_idle', 'node-a', 300)).toEqual(dropped);
    // The pass ends and hands its lease back: the purge may go on, and the lease is not renewed again.
    await a.releaseLease('t_busy', 'node-a');
    expect(await b.upkeepLeasesHeld(db.id)).toBe(0);
    expect(await a.renewLease('t_busy', 'node-a', 300)).toBe(false);
  });

  test('a lease that lapsed is not renewed', async () => {
    const url = await flavour.fresh();
    const store = await open(url);
    const acme = await store.ensureAccount('acme');
    const db = database(acme.id, 'lapsed');
    await store.insertDatabase(db, 10);
    await store.insertTable(readyTable(db.id, 't1'));
    expect(await store.acquireLease('t1', 'node-a', 100)).toMatchObject({ held: true });
    await sleep(250);
    expect(await store.renewLease('t1', 'node-a', 60_000)).toBe(false);
    expect(await store.acquireLease('t1', 'node-b', 60_000)).toMatchObject({ held: true, tookOver: true });
  });

  test("a dropped table's upkeep lease ends with the drop, and no node takes it again", async () => {
    const url = await flavour.fresh();
    const [a, b] = [await open(url), await open(url)];
    const acme = await a.ensureAccount('acme');
    const db = database(acme.id, 'drops');
    await a.insertDatabase(db, 10);
    for (const id of ['t_dropped', 't_other']) await a.insertTable(readyTable(db.id, id));
    const leases = async () => (await flavour.sql(url, 'SELECT table_id FROM upkeep_leases')).map((r) => r.table_id);
    const dropped = { held: false, tookOver: false, dropped: true };
    expect(await a.acquireLease('t_dropped', 'node-a', 60_000)).toMatchObject({ held: true });
    expect(await a.acquireLease('t_other', 'node-a', 60_000)).toMatchObject({ held: true });

    await b.deleteTable('t_dropped');

    expect(await leases()).toEqual(['t_other']);
    expect(await a.acquireLease('t_dropped', 'node-a', 60_000)).toEqual(dropped);
    expect(await b.acquireLease('t_dropped', 'node-b', 60_000)).toEqual(dropped);
    expect(await leases()).toEqual(['t_other']);
    // A database deleted takes its tables' leases with it.
    await b.deleteDatabase(db.id);
    expect(await leases()).toEqual([]);
    expect(await a.acquireLease('t_other', 'node-a', 60_000)).toEqual(dropped);
  });

  test('expired idempotency keys are swept by the next claim, a bounded batch at a time, never an unresolved one', async () => {
    const url = await flavour.fresh();
    const store = await open(url);
    const scope = (key: string) => ({ accountId: 'acct', databaseId: 'db', key });
    const keys = async () =>
      (await flavour.sql(url, "SELECT key FROM idempotency WHERE key NOT LIKE 'old-%'"))
        .map((r) => String(r.key))
        .sort();
    const old = async () =>
      Number((await flavour.sql(url, "SELECT count(*) AS n FROM idempotency WHERE key LIKE 'old-%'"))[0]?.n);

    // Answered.
    await store.beginIdempotent(scope('answered'), 'f', 'node-a', 60_000, 100);
    await store.finishIdempotent(scope('answered'), 'node-a', '{}');
    // Its node died after recording its intent (the hold let go): unresolved, it outlives its expiry until a retry
    // finds out whether its write landed.
    await store.beginIdempotent(scope('failed'), 'f', 'node-a', 60_000, 100);
    expect(await store.recordIntent(scope('failed'), 'node-a', '{}')).toBe(true);
    await store.renewIdempotent(scope('failed'), 'node-a', -1);
    // Claimed by a node that died before it wrote: its hold lapsed.
    await store.beginIdempotent(scope('abandoned'), 'f', 'node-a', 50, 100);
    // Still running past its expiry: its node renews its hold.
    await store.beginIdempotent(scope('running'), 'f', 'node-a', 60_000, 100);
    // Kept for a day.
    await store.beginIdempotent(scope('kept'), 'f', 'node-a', 60_000, 86_400_000);
    await store.finishIdempotent(scope('kept'), 'node-a', '{}');
    await sleep(300);

    expect((await store.beginIdempotent(scope('next'), 'f', 'node-b', 60_000, 86_400_000)).kind).toBe('started');

    expect(await keys()).toEqual(['failed', 'kept', 'next', 'running']);
    expect(await store.beginIdempotent(scope('failed'), 'f', 'node-b', 60_000, 86_400_000)).toEqual({
      kind: 'resumed',
      intent: '{}',
    });
    await store.finishIdempotent(scope('failed'), 'node-b', '{}');
    // The request still running records its intent and its answer as if nothing happened.
    expect(await store.recordIntent(scope('running'), 'node-a', '{}')).toBe(true);
    await store.finishIdempotent(scope('running'), 'node-a', '{"done":true}');
    expect(await store.beginIdempotent(scope('kept'), 'f', 'node-b', 60_000, 86_400_000)).toEqual({
      kind: 'done',
      response: '{}',
    });

    // A backlog (a store that never swept, as PostgreSQL's before) goes a batch per claim.
    const backlog = 2 * IDEMPOTENCY_SWEEP_BATCH + 50;
    const rows = Array.from(
      { length: backlog },
      (_, i) => `('acct', 'db', 'old-${i}', 'f', 'done', 'node-a', 0, NULL, '{}', ${1 + i})`,
    );
    await flavour.sql(
      url,
      `INSERT INTO idempotency (account_id, database_id, key, fingerprint, state, holder, running_until_ms, intent,
         response, expires_ms) VALUES ${rows.join(', ')}`,
    );
    for (const left of [backlog - IDEMPOTENCY_SWEEP_BATCH, backlog - 2 * IDEMPOTENCY_SWEEP_BATCH, 0]) {
      await store.beginIdempotent(scope(`claim-${left}`), 'f', 'node-b', 60_000, 86_400_000);
      expect(await old()).toBe(left);
    }
    expect(await keys()).toEqual(['claim-0', 'claim-150', 'claim-50', 'kept', 'next']);
  });

  test('deleting a database tells every store listening', async () => {
    const url = await flavour.fresh();
    const a = await open(url);
    // The embedded store tells only its own process; PostgreSQL tells every node.
    const b = flavour.name === 'postgres' ? await open(url) : a;
    const seen: ControlEvent[] = [];
    b.events.on((event) => seen.push(event));
    const acme = await a.ensureAccount('acme');
    const db = database(acme.id, 'gone');
    await a.insertDatabase(db, 10);
    await new Promise((resolve) => setTimeout(resolve, 200)); // the listener is connected

    await a.deleteDatabase(db.id);

    for (let i = 0; i < 50 && !seen.some((e) => e.kind === 'database_gone'); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(seen).toContainEqual({ kind: 'database_gone', databaseId: db.id });
    expect(await b.databaseExists(db.id)).toBe(false);
  });
  test('accounts: made once by name, however many nodes ask at once; found by id', async () => {
    const url = await flavour.fresh();
    const [a, b] = [await open(url), await open(url)];
    await a.ping();

    const made = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? a : b).ensureAccount('acme')));

    expect(new Set(made.map((account) => account.id)).size).toBe(1);
    const [acme] = made as [Account];
    expect(acme).toEqual({
      id: expect.stringMatching(/^acct_/),
      name: 'acme',
      externalId: expect.stringMatching(/^ext_[0-9a-f]{32}$/),
    });
    expect(await b.findAccount(acme.id)).toEqual(acme);
    expect(await b.findAccount('acct_missing')).toBeUndefined();
    expect((await a.ensureAccount('other')).id).not.toBe(acme.id);
  });

  test('keys: the first made once among nodes starting together; listed, found by hash, revoked once', async () => {
    const url = await flavour.fresh();
    const [a, b] = [await open(url), await open(url)];
    const acme = await a.ensureAccount('acme');
    expect(await a.countKeys()).toBe(0);

    const firsts = await Promise.all(
      Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? a : b).insertFirstKey(keyRecord(acme.id, `sk_first_${i}`))),
    );

    expect(firsts.filter(Boolean)).toHaveLength(1);
    expect(await b.countKeys()).toBe(1);
    const second = { ...keyRecord(acme.id, 'sk_second'), createdMs: Date.now() + 1000 };
    await a.insertKey(second);
    expect(await a.insertFirstKey(keyRecord(acme.id, 'sk_late'))).toBe(false);
    expect(await b.countKeys()).toBe(2);
    const listed = await b.listKeys();
    expect(listed.map((key) => [key.id, key.accountName])).toEqual([
      [expect.stringMatching(/^key_/), 'acme'],
      [second.id, 'acme'],
    ]);
    expect(listed[1]).toEqual({ ...second, accountName: 'acme' });
    expect(await b.findKeyByHash(second.hash)).toEqual(second);
    expect(await b.findKeyByHash(hashKey('sk_unknown'))).toBeUndefined();

    expect(await a.revokeKey(second.id, 1234)).toBe(true);
    expect(await b.revokeKey(second.id, 5678)).toBe(false);
    expect(await a.revokeKey('key_missing', 1)).toBe(false);
    expect(await a.findKeyByHash(second.hash)).toEqual({ ...second, revokedMs: 1234 });
  });

  test('a key revoked on one node is refused at once by every node that looked it up before', async () => {
    const url = await flavour.fresh();
    const a = await open(url);
    const b = flavour.name === 'postgres' ? await open(url) : a;
    const acme = await a.ensureAccount('acme');
    const key = keyRecord(acme.id, 'sk_cached');
    await a.insertKey(key);
    await listening(b);
    expect((await b.findKeyByHash(key.hash))?.revokedMs).toBeNull();
    expect((await b.findKeyByHash(key.hash))?.revokedMs).toBeNull();
    const seen = events(b);

    await a.revokeKey(key.id, 99);

    await until(() => seen.some((e) => e.kind === 'key_revoked'));
    expect(seen).toContainEqual({ kind: 'key_revoked', hash: key.hash });
    expect((await b.findKeyByHash(key.hash))?.revokedMs).toBe(99);
  });

  test('databases: found, listed, their state set, verified and deleted, and every node told what it must let go', async () => {
    const url = await flavour.fresh();
    const a = await open(url);
    const b = flavour.name === 'postgres' ? await open(url) : a;
    const acme = await a.ensureAccount('acme');
    const [zeta, alpha] = [database(acme.id, 'zeta'), database(acme.id, 'alpha')];
    for (const db of [zeta, alpha]) await a.insertDatabase(db, 10);
    await listening(b);
    const seen = events(b);

    expect(await b.findDatabase(acme.id, 'zeta')).toEqual(zeta);
    expect(await b.findDatabase(acme.id, 'missing')).toBeUndefined();
    expect(await b.findDatabase('acct_other', 'zeta')).toBeUndefined();
    expect((await b.listDatabases(acme.id)).map((db) => db.name)).toEqual(['alpha', 'zeta']);
    expect(await b.listDatabases('acct_other')).toEqual([]);
    expect(await b.databaseExists(zeta.id)).toBe(true);
    expect(await b.databaseState(zeta.id)).toBe('unverified');

    // Placement marks active only a database still activating (or active).
    await a.markActive(zeta.id);
    expect(await b.databaseState(zeta.id)).toBe('unverified');
    await a.setDatabaseState(zeta.id, 'activating', null);
    await a.markActive(zeta.id);
    expect(await b.databaseState(zeta.id)).toBe('active');
    await a.setDatabaseState(zeta.id, 'verify_failed', 'storage verification failed at list');
    expect(await b.findDatabase(acme.id, 'zeta')).toMatchObject({
      state: 'verify_failed',
      lastError: 'storage verification failed at list',
    });
    await a.markActive(zeta.id);
    expect(await b.databaseState(zeta.id)).toBe('verify_failed');
    await until(() => seen.some((e) => e.kind === 'database_gone'));
    expect(seen).toContainEqual({ kind: 'database_gone', databaseId: zeta.id });

    // A deletion is recorded once and never undone; a purge once begun stays one.
    expect(await a.markDeleting(alpha.id, false)).toBe('deleting');
    expect(await a.markDeleting(alpha.id, true)).toBe('purging');
    expect(await b.markDeleting(alpha.id, false)).toBe('purging');
    await a.setDatabaseState(alpha.id, 'active', null);
    await a.markActive(alpha.id);
    expect(await b.databaseState(alpha.id)).toBe('purging');
    await until(() => seen.some((e) => e.kind === 'database_deleting'));
    expect(seen).toContainEqual({ kind: 'database_deleting', databaseId: alpha.id });

    await b.deleteDatabase(alpha.id);
    expect(await a.databaseExists(alpha.id)).toBe(false);
    expect(await a.databaseState(alpha.id)).toBeUndefined();
    expect(await a.markDeleting(alpha.id, true)).toBeUndefined();
    expect((await a.listDatabases(acme.id)).map((db) => db.name)).toEqual(['zeta']);
  });

  test('a database whose deletion began takes no new table and reserves no row keys', async () => {
    const url = await flavour.fresh();
    const [a, b] = [await open(url), await open(url)];
    const acme = await a.ensureAccount('acme');
    const db = database(acme.id, 'closing');
    await a.insertDatabase(db, 10);
    await a.insertTable(readyTable(db.id, 't_before'));

    await b.markDeleting(db.id, false);

    expect(codeOf(await a.insertTable(readyTable(db.id, 't_after')).catch((err: unknown) => err))).toBe(
      'database_deleting',
    );
    expect(codeOf(await a.reserveRowKeys('t_before', 1).catch((err: unknown) => err))).toBe('database_deleting');
    expect((await a.listTables(db.id)).map((t) => t.tableId)).toEqual(['t_before']);
    expect(await a.writtenTables(db.id)).toEqual(['t_before']);
  });

  test('catalog: tables named once per database, found, listed, readied, dropped once; purge still finds them', async () => {
    const url = await flavour.fresh();
    const [a, b] = [await open(url), await open(url)];
    const acme = await a.ensureAccount('acme');
    const db = database(acme.id, 'catalog');
    const other = database(acme.id, 'other');
    await a.insertDatabase(db, 10);
    await a.insertDatabase(other, 10);
    const creating: TableRecord = { ...readyTable(db.id, 't_b'), name: 'b', state: 'creating', createdMs: 7 };
    await a.insertTable(creating);
    await a.insertTable({ ...readyTable(db.id, 't_a'), name: 'a' });
    await a.insertTable({ ...readyTable(other.id, 't_other_b'), name: 'b' });

    const again = await b.insertTable({ ...readyTable(db.id, 't_b2'), name: 'b' }).catch((err: unknown) => err);
    expect(codeOf(again)).toBe('table_exists');
    expect(await b.findTable(db.id, 'b')).toEqual(creating);
    expect(await b.findTable(db.id, 'missing')).toBeUndefined();
    expect((await b.listTables(db.id)).map((t) => [t.name, t.tableId])).toEqual([
      ['a', 't_a'],
      ['b', 't_b'],
    ]);
    await b.setTableState('t_b', 'ready');
    expect((await a.findTable(db.id, 'b'))?.state).toBe('ready');

    const drops = await Promise.all([a.deleteTable('t_b'), b.deleteTable('t_b')]);
    expect(drops.filter(Boolean)).toHaveLength(1);
    expect(await a.deleteTable('t_b')).toBe(false);
    expect(await a.findTable(db.id, 'b')).toBeUndefined();
    expect(await a.writtenTables(db.id)).toEqual(['t_a', 't_b']);
    await expect(a.reserveRowKeys('t_b', 1)).rejects.toThrow(/not in the catalog/);
    await expect(a.durable()).resolves.toBeUndefined();

    await a.deleteDatabase(db.id);
    expect(await a.writtenTables(db.id)).toEqual([]);
    expect(await a.listTables(db.id)).toEqual([]);
    expect(await a.writtenTables(other.id)).toEqual(['t_other_b']);
  });

  test('idempotency keys: started once, then running, mismatched, answered, resumed or let go as the record says', async () => {
    const url = await flavour.fresh();
    const [a, b] = [await open(url), await open(url)];
    const scope = (key: string) => ({ accountId: 'acct', databaseId: 'db', key });
    const day = 86_400_000;
    const begin = (store: ControlStore, key: string, fingerprint: string, holder: string, runForMs = 60_000) =>
      store.beginIdempotent(scope(key), fingerprint, holder, runForMs, day);

    // Nodes racing with one key: one starts it, the others find it running.
    const raced = await Promise.all(
      Array.from({ length: 6 }, (_, i) => begin(i % 2 === 0 ? a : b, 'k', 't1/req', `node-${i}`)),
    );
    expect(raced.map((r) => r.kind).sort()).toEqual(['running', 'running', 'running', 'running', 'running', 'started']);
    const holder = `node-${raced.findIndex((r) => r.kind === 'started')}`;
    expect(await begin(b, 'k', 't1/other', 'node-x')).toEqual({ kind: 'mismatch' });
    // Only the holder records the intent, and the answer that later requests get.
    expect(await b.recordIntent(scope('k'), 'node-x', '{"x":1}')).toBe(false);
    expect(await a.recordIntent(scope('k'), holder, '{"rows":1}')).toBe(true);
    await a.renewIdempotent(scope('k'), holder, 60_000);
    await b.finishIdempotent(scope('k'), 'node-x', '{"wrong":true}');
    expect(await begin(b, 'k', 't1/req', 'node-x')).toEqual({ kind: 'running' });
    await a.finishIdempotent(scope('k'), holder, '{"version":3}');
    expect(await begin(b, 'k', 't1/req', 'node-x')).toEqual({ kind: 'done', response: '{"version":3}' });
    expect(await begin(b, 'k', 't1/other', 'node-x')).toEqual({ kind: 'mismatch' });
    // The same request to a table made again under its name is a new write.
    expect(await begin(b, 'k', 't2/req', 'node-y')).toEqual({ kind: 'started' });
    // An answered key is not let go.
    await b.finishIdempotent(scope('k'), 'node-y', '{}');
    await b.dropIdempotent(scope('k'), 'node-y');
    expect((await begin(a, 'k', 't2/req', 'node-z')).kind).toBe('done');

    // A request that failed before writing lets its key go (only its own holder can), so it may be sent again.
    expect(await begin(a, 'dropped', 'f', 'node-a')).toEqual({ kind: 'started' });
    await b.dropIdempotent(scope('dropped'), 'node-b');
    expect(await begin(b, 'dropped', 'f', 'node-b')).toEqual({ kind: 'running' });
    await a.dropIdempotent(scope('dropped'), 'node-a');
    expect(await begin(b, 'dropped', 'f', 'node-b')).toEqual({ kind: 'started' });

    // A node that stopped holding: the next request resumes the key, with the intent recorded (or none), and the
    // node that lost it can no longer record or answer.
    expect(await begin(a, 'lapsed', 'f', 'node-a', 100)).toEqual({ kind: 'started' });
    expect(await a.recordIntent(scope('lapsed'), 'node-a', '{"intent":1}')).toBe(true);
    expect(await begin(a, 'bare', 'f', 'node-a', 100)).toEqual({ kind: 'started' });
    expect(await begin(a, 'renewed', 'f', 'node-a', 100)).toEqual({ kind: 'started' });
    await a.renewIdempotent(scope('renewed'), 'node-a', 60_000);
    await b.renewIdempotent(scope('bare'), 'node-b', 60_000);
    await sleep(250);
    expect(await begin(b, 'renewed', 'f', 'node-b')).toEqual({ kind: 'running' });
    expect(await begin(b, 'lapsed', 'f', 'node-b')).toEqual({ kind: 'resumed', intent: '{"intent":1}' });
    expect(await begin(b, 'bare', 'f', 'node-b')).toEqual({ kind: 'resumed', intent: null });
    expect(await begin(a, 'lapsed', 'f', 'node-a')).toEqual({ kind: 'running' });
    expect(await a.recordIntent(scope('lapsed'), 'node-a', '{"late":1}')).toBe(false);
    await a.finishIdempotent(scope('lapsed'), 'node-a', '{"late":1}');
    await b.finishIdempotent(scope('lapsed'), 'node-b', '{"found":1}');
    expect(await begin(a, 'lapsed', 'f', 'node-a')).toEqual({ kind: 'done', response: '{"found":1}' });

    // A key kept past its expiry is started afresh, by whichever request comes.
    expect(await a.beginIdempotent(scope('short'), 'f', 'node-a', 60_000, 50)).toEqual({ kind: 'started' });
    await a.finishIdempotent(scope('short'), 'node-a', '{}');
    await sleep(150);
    expect(await begin(b, 'short', 'other', 'node-b')).toEqual({ kind: 'started' });
    // Scopes are apart: the same key of another database is another key.
    expect(await b.beginIdempotent({ ...scope('k'), databaseId: 'db2' }, 'f', 'node-b', 60_000, day)).toEqual({
      kind: 'started',
    });
  });

  test('a closed store answers nothing more', async () => {
    const store = await openControlStore({ controlUrl: await flavour.fresh(), dataDir: '/nonexistent' });
    await store.ping();
    await store.close();
    await expect(store.ping()).rejects.toThrow();
  });
});

describe('the embedded store', () => {
  test('makes commits on the request path durable through a symbolic link to its file, and says so when it cannot', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-store-link-'));
    dirs.push(dir);
    mkdirSync(join(dir, 'real'));
    await new SqliteControlStore(join(dir, 'real', 'control.sqlite')).close();
    symlinkSync(join(dir, 'real', 'control.sqlite'), join(dir, 'control.sqlite'));
    const store = new SqliteControlStore(join(dir, 'control.sqlite'));
    opened.push(store);
    const account = await store.ensureAccount('acme');
    const scope = { accountId: account.id, databaseId: 'db', key: 'k' };

    // A claim commits without SQLite's fsync; the log SQLite keeps is beside the real file, not the link.
    expect((await store.beginIdempotent(scope, 'f', 'node', 1000, 60_000)).kind).toBe('started');
    await expect(store.durable()).resolves.toBeUndefined();

    // With the log gone, a relaxed commit cannot be made durable: refused, and every later one with it.
    await store.finishIdempotent(scope, 'node', '{}');
    rmSync(join(dir, 'real', 'control.sqlite-wal'));
    await expect(store.durable()).rejects.toThrow(/log .* is missing/);
    await expect(store.durable()).rejects.toThrow(/log .* is missing/);
  });
});
