import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { MIGRATIONS } from '../src/control/migrations.js';
import { openControlStore } from '../src/control/open.js';
import type { ControlStore } from '../src/control/store.js';
import { freshControlUrl } from './support/postgres.js';

// Stores made by the builds before both stores shared one list of migrations: each kept its own (as shipped).

/** SQLite's five migrations; `accounts.external_id` was nullable. */
const SQLITE_BEFORE: readonly string[] = [
  `CREATE TABLE accounts (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL UNIQUE,
     created_ms INTEGER NOT NULL
   );
   CREATE TABLE api_keys (
     id TEXT PRIMARY KEY,
     account_id TEXT NOT NULL REFERENCES accounts(id),
     hash TEXT NOT NULL UNIQUE,
     created_ms INTEGER NOT NULL,
     revoked_ms INTEGER
   );
   CREATE TABLE databases (
     id TEXT PRIMARY KEY,
     account_id TEXT NOT NULL REFERENCES accounts(id),
     name TEXT NOT NULL,
     created_ms INTEGER NOT NULL,
     state TEXT NOT NULL,
     binding TEXT NOT NULL,
     last_error TEXT,
     UNIQUE (account_id, name)
   );`,
  `CREATE TABLE tables (
     database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
     name TEXT NOT NULL,
     table_id TEXT NOT NULL UNIQUE,
     schema_ipc TEXT NOT NULL,
     indexes TEXT NOT NULL,
     created_ms INTEGER NOT NULL,
     state TEXT NOT NULL,
     next_row_key INTEGER NOT NULL DEFAULT 0,
     PRIMARY KEY (database_id, name)
   );`,
  `ALTER TABLE accounts ADD COLUMN external_id TEXT;
   UPDATE accounts SET external_id = 'ext_' || lower(hex(randomblob(16))) WHERE external_id IS NULL;
   CREATE TABLE written_tables (
     database_id TEXT NOT NULL,
     table_id TEXT NOT NULL,
     PRIMARY KEY (database_id, table_id)
   );
   INSERT INTO written_tables (database_id, table_id) SELECT database_id, table_id FROM tables;`,
  `CREATE TABLE idempotency (
     account_id TEXT NOT NULL,
     database_id TEXT NOT NULL,
     key TEXT NOT NULL,
     fingerprint TEXT NOT NULL,
     state TEXT NOT NULL,
     holder TEXT NOT NULL,
     running_until_ms INTEGER NOT NULL,
     intent TEXT,
     response TEXT,
     expires_ms INTEGER NOT NULL,
     PRIMARY KEY (account_id, database_id, key)
   );
   CREATE INDEX idempotency_expiry ON idempotency (expires_ms);
   ALTER TABLE databases ADD COLUMN verifying_until_ms INTEGER;
   CREATE TABLE upkeep_leases (
     table_id TEXT PRIMARY KEY,
     holder TEXT NOT NULL,
     expires_ms INTEGER NOT NULL
   );`,
  'DELETE FROM upkeep_leases WHERE table_id NOT IN (SELECT table_id FROM tables);',
];

/** PostgreSQL's two: its 1 made what SQLite's 1 to 4 made, its 2 was SQLite's 5. */
const POSTGRES_BEFORE: readonly string[] = [
  `CREATE TABLE accounts (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL UNIQUE,
     created_ms BIGINT NOT NULL,
     external_id TEXT NOT NULL
   );
   CREATE TABLE api_keys (
     id TEXT PRIMARY KEY,
     account_id TEXT NOT NULL REFERENCES accounts(id),
     hash TEXT NOT NULL UNIQUE,
     created_ms BIGINT NOT NULL,
     revoked_ms BIGINT
   );
   CREATE TABLE databases (
     id TEXT PRIMARY KEY,
     account_id TEXT NOT NULL REFERENCES accounts(id),
     name TEXT NOT NULL,
     created_ms BIGINT NOT NULL,
     state TEXT NOT NULL,
     binding TEXT NOT NULL,
     last_error TEXT,
     verifying_until_ms BIGINT,
     UNIQUE (account_id, name)
   );
   CREATE TABLE tables (
     database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
     name TEXT NOT NULL,
     table_id TEXT NOT NULL UNIQUE,
     schema_ipc TEXT NOT NULL,
     indexes TEXT NOT NULL,
     created_ms BIGINT NOT NULL,
     state TEXT NOT NULL,
     next_row_key BIGINT NOT NULL DEFAULT 0,
     PRIMARY KEY (database_id, name)
   );
   CREATE TABLE written_tables (
     database_id TEXT NOT NULL,
     table_id TEXT NOT NULL,
     PRIMARY KEY (database_id, table_id)
   );
   CREATE TABLE idempotency (
     account_id TEXT NOT NULL,
     database_id TEXT NOT NULL,
     key TEXT NOT NULL,
     fingerprint TEXT NOT NULL,
     state TEXT NOT NULL,
     holder TEXT NOT NULL,
     running_until_ms BIGINT NOT NULL,
     intent TEXT,
     response TEXT,
     expires_ms BIGINT NOT NULL,
     PRIMARY KEY (account_id, database_id, key)
   );
   CREATE INDEX idempotency_expiry ON idempotency (expires_ms);
   CREATE TABLE upkeep_leases (
     table_id TEXT PRIMARY KEY,
     holder TEXT NOT NULL,
     expires_ms BIGINT NOT NULL
   );`,
  'DELETE FROM upkeep_leases WHERE table_id NOT IN (SELECT table_id FROM tables);',
];

const dirs: string[] = [];
const opened: ControlStore[] = [];
afterAll(async () => {
  await Promise.allSettled(opened.map((store) => store.close()));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function open(url: string): Promise<ControlStore> {
  const store = await openControlStore({ controlUrl: url, dataDir: '/nonexistent' });
  opened.push(store);
  return store;
}

const EVERY_VERSION = MIGRATIONS.map((_, i) => i + 1);

/** A store's rows, written as an older build would have: an account, its key, a database with a table, a lease. */
const OLD_ROWS = [
  "INSERT INTO accounts (id, name, created_ms, external_id) VALUES ('acct_kept', 'kept', 1, 'ext_kept')",
  "INSERT INTO api_keys (id, account_id, hash, created_ms, revoked_ms) VALUES ('key_1', 'acct_kept', 'h1', 2, NULL)",
  `INSERT INTO databases (id, account_id, name, created_ms, state, binding, last_error)
     VALUES ('db_1', 'acct_kept', 'shop', 3, 'active', '{"provider":"local","bucket":"shop","prefix":""}', NULL)`,
  `INSERT INTO tables (database_id, name, table_id, schema_ipc, indexes, created_ms, state)
     VALUES ('db_1', 't', 't_1', '', '{}', 4, 'ready')`,
  "INSERT INTO written_tables (database_id, table_id) VALUES ('db_1', 't_1')",
];

/** What every store holding `OLD_ROWS` answers after its migration. */
async function expectOldRowsKept(store: ControlStore): Promise<void> {
  expect(await store.findAccount('acct_kept')).toEqual({ id: 'acct_kept', name: 'kept', externalId: 'ext_kept' });
  expect(await store.findKeyByHash('h1')).toMatchObject({ id: 'key_1', accountId: 'acct_kept', revokedMs: null });
  expect((await store.listKeys()).map((key) => key.accountName)).toEqual(['kept']);
  expect(await store.findDatabase('acct_kept', 'shop')).toMatchObject({ id: 'db_1', state: 'active' });
  expect(await store.findTable('db_1', 't')).toMatchObject({ tableId: 't_1', state: 'ready' });
  expect(await store.writtenTables('db_1')).toEqual(['t_1']);
  expect(await store.reserveRowKeys('t_1', 2)).toBe(0n);
}

describe('an embedded store made before one list of migrations', () => {
  test('keeps its rows and numbering, and every account gets an external id, which may never be missing again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-migrate-'));
    dirs.push(dir);
    const path = join(dir, 'control.sqlite');
    const before = new Database(path);
    before.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_ms INTEGER NOT NULL)');
    SQLITE_BEFORE.forEach((script, i) => {
      before.exec(script);
      before.prepare('INSERT INTO schema_migrations (version, applied_ms) VALUES (?, 0)').run(i + 1);
    });
    for (const row of OLD_ROWS) before.exec(row);
    // Nullable then: written by no build, but nothing stopped it.
    before.exec("INSERT INTO accounts (id, name, created_ms, external_id) VALUES ('acct_null', 'nameless', 5, NULL)");
    before.close();

    const store = await open(`sqlite:${path}`);

    await expectOldRowsKept(store);
    expect((await store.findAccount('acct_null'))?.externalId).toMatch(/^ext_[0-9a-f]{32}$/);
    const after = new Database(path);
    try {
      const versions = after.prepare('SELECT version FROM schema_migrations ORDER BY version').all();
      expect(versions.map((row) => (row as { version: number }).version)).toEqual(EVERY_VERSION);
      const columns = after.prepare('SELECT name, "notnull" FROM pragma_table_info(\'accounts\')').all();
      expect(columns).toContainEqual({ name: 'external_id', notnull: 1 });
      // The rebuilt table is still the one the keys and databases refer to.
      after.pragma('foreign_keys = ON');
      expect(() => after.exec("DELETE FROM accounts WHERE id = 'acct_kept'")).toThrow(/FOREIGN KEY/);
      expect(() =>
        after.exec("INSERT INTO accounts (id, name, created_ms, external_id) VALUES ('a', 'a', 0, NULL)"),
      ).toThrow(/NOT NULL/);
    } finally {
      after.close();
    }
  });
});

describe('a PostgreSQL store made before one list of migrations', () => {
  async function storeBefore(url: string, versions: number): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL)');
    for (const [i, script] of POSTGRES_BEFORE.slice(0, versions).entries()) {
      await client.query(script);
      await client.query('INSERT INTO schema_migrations (version, applied_ms) VALUES ($1, 0)', [i + 1]);
    }
    return client;
  }

  const versionsOf = async (client: pg.Client) =>
    (await client.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')).rows.map(
      (row) => row.version,
    );

  test('is renumbered into the one list, keeping its rows, and migrated once by nodes starting together', async () => {
    const url = await freshControlUrl();
    const client = await storeBefore(url, 2);
    for (const row of OLD_ROWS) await client.query(row);

    const stores = await Promise.all([open(url), open(url), open(url)]);

    await expectOldRowsKept(stores[1] as ControlStore);
    for (const store of stores) expect((await store.findAccount('acct_kept'))?.externalId).toBe('ext_kept');
    expect(await versionsOf(client)).toEqual(EVERY_VERSION);
    await client.end();
  });

  test('that never applied its second migration gets it, as the one list numbers it', async () => {
    const url = await freshControlUrl();
    const client = await storeBefore(url, 1);
    await client.query("INSERT INTO upkeep_leases (table_id, holder, expires_ms) VALUES ('t_gone', 'node', 0)");

    await open(url);

    expect(await versionsOf(client)).toEqual(EVERY_VERSION);
    expect((await client.query('SELECT * FROM upkeep_leases')).rows).toEqual([]);
    await client.end();
  });
});

describe('both stores', () => {
  /** Each table's columns in order, with whether they must not be null (a primary key's must not). */
  type Columns = Record<string, [string, boolean][]>;
  const add = (columns: Columns, table: string, column: string, notNull: boolean) => {
    columns[table] = [...(columns[table] ?? []), [column, notNull]];
  };

  test('have the same schema, made by the same migrations', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-schema-'));
    dirs.push(dir);
    const path = join(dir, 'control.sqlite');
    await open(`sqlite:${path}`);
    const url = await freshControlUrl();
    await open(url);

    const sqlite = new Database(path);
    const embedded: Columns = {};
    const rows = sqlite
      .prepare(
        `SELECT m.name AS tbl, p.name AS col, p."notnull" AS not_null, p.pk AS pk FROM sqlite_master m
           JOIN pragma_table_info(m.name) p WHERE m.type = 'table' ORDER BY m.name, p.cid`,
      )
      .all() as { tbl: string; col: string; not_null: number; pk: number }[];
    sqlite.close();
    for (const row of rows) add(embedded, row.tbl, row.col, row.not_null === 1 || row.pk > 0);

    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const shared: Columns = {};
    const columns = await client.query<{ tbl: string; col: string; nullable: string }>(
      `SELECT table_name AS tbl, column_name AS col, is_nullable AS nullable FROM information_schema.columns
         WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`,
    );
    await client.end();
    for (const row of columns.rows) add(shared, row.tbl, row.col, row.nullable === 'NO');

    expect(embedded).toEqual(shared);
    expect(Object.keys(shared).sort()).toEqual([
      'accounts',
      'api_keys',
      'databases',
      'idempotency',
      'schema_migrations',
      'tables',
      'upkeep_leases',
      'written_tables',
    ]);
  });
});
