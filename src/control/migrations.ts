import { ConfigError } from '../config.js';
import type { Db, Tx } from './dialect/db.js';
import { type Dialect, sql } from './dialect/sql.js';

/** A migration's script: written once, or per dialect where the two really differ. */
type Migration = string | Readonly<Record<Dialect, string>>;

/** 128 random bits as hex: an account's external id (`ext_` + this). */
const RANDOM_HEX: Record<Dialect, string> = {
  sqlite: 'lower(hex(randomblob(16)))',
  postgres: "replace(gen_random_uuid()::text, '-', '')",
};

const perDialect = (script: (dialect: Dialect) => string): Migration => ({
  sqlite: script('sqlite'),
  postgres: script('postgres'),
});

/**
 * Numbered migrations of both stores; each runs once, in order. Never edit one that has shipped: add one. Times
 * are BIGINT milliseconds (SQLite reads the type as INTEGER).
 */
export const MIGRATIONS: readonly Migration[] = [
  `CREATE TABLE accounts (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL UNIQUE,
     created_ms BIGINT NOT NULL
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
     UNIQUE (account_id, name)
   );`,
  `CREATE TABLE tables (
     database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
     name TEXT NOT NULL,
     table_id TEXT NOT NULL UNIQUE,
     schema_ipc TEXT NOT NULL,
     indexes TEXT NOT NULL,
     created_ms BIGINT NOT NULL,
     state TEXT NOT NULL,
     next_row_key BIGINT NOT NULL DEFAULT 0,
     PRIMARY KEY (database_id, name)
   );`,
  perDialect(
    (dialect) => `ALTER TABLE accounts ADD COLUMN external_id TEXT;
   UPDATE accounts SET external_id = 'ext_' || ${RANDOM_HEX[dialect]} WHERE external_id IS NULL;
   CREATE TABLE written_tables (
     database_id TEXT NOT NULL,
     table_id TEXT NOT NULL,
     PRIMARY KEY (database_id, table_id)
   );
   INSERT INTO written_tables (database_id, table_id) SELECT database_id, table_id FROM tables;`,
  ),
  `CREATE TABLE idempotency (
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
   ALTER TABLE databases ADD COLUMN verifying_until_ms BIGINT;
   CREATE TABLE upkeep_leases (
     table_id TEXT PRIMARY KEY,
     holder TEXT NOT NULL,
     expires_ms BIGINT NOT NULL
   );`,
  // The upkeep leases of tables no longer in the catalog, which drops before leases ended with their table left
  // behind for good.
  'DELETE FROM upkeep_leases WHERE table_id NOT IN (SELECT table_id FROM tables);',
  // Every account has an external id (docs/api.md), as PostgreSQL always said. SQLite cannot add NOT NULL to a
  // column: the table is rebuilt, its references kept by name.
  {
    sqlite: `CREATE TABLE accounts_rebuilt (
       id TEXT PRIMARY KEY,
       name TEXT NOT NULL UNIQUE,
       created_ms BIGINT NOT NULL,
       external_id TEXT NOT NULL
     );
     INSERT INTO accounts_rebuilt (id, name, created_ms, external_id)
       SELECT id, name, created_ms, coalesce(external_id, 'ext_' || ${RANDOM_HEX.sqlite}) FROM accounts;
     DROP TABLE accounts;
     ALTER TABLE accounts_rebuilt RENAME TO accounts;`,
    postgres: `UPDATE accounts SET external_id = 'ext_' || ${RANDOM_HEX.postgres} WHERE external_id IS NULL;
     ALTER TABLE accounts ALTER COLUMN external_id SET NOT NULL;`,
  },
  // When upkeep last committed work on each table, whichever node did it (`list_tables`' last_upkeep_ms).
  'ALTER TABLE tables ADD COLUMN upkeep_ms BIGINT;',
  // The versions up to which upkeep (on any node) last folded every row into each kind of search index: where nodes
  // share a table, a node follows the rows outside the indexes from there (docs/architecture.md, fresh tier).
  `ALTER TABLE tables ADD COLUMN text_folded_version BIGINT;
   ALTER TABLE tables ADD COLUMN vector_folded_version BIGINT;`,
  // The latest version of a delete or replace, and the version upkeep last built the full-text indexes again from:
  // while the first is later, the indexes' statistics count rows no longer live, on whichever node asks.
  `ALTER TABLE tables ADD COLUMN text_removed_version BIGINT;
   ALTER TABLE tables ADD COLUMN text_rebuilt_version BIGINT;`,
];

/**
 * PostgreSQL stores made before both stores shared this list numbered their migrations apart: their 1 made what
 * 1 to 4 make here, their 2 is 5. Such a store is known by holding versions but none past 2, which no store
 * migrated by this list does: it applies every missing version in one transaction.
 */
const POSTGRES_BEFORE_ONE_LIST: ReadonlyMap<number, readonly number[]> = new Map([
  [1, [1, 2, 3, 4]],
  [2, [5]],
]);

/** Key of the lock under which one node at a time migrates a shared store. */
const MIGRATION_LOCK = 0x5354_5241; // "STRA"

/**
 * Brings the store's schema up to date, in one transaction that nodes starting together take one at a time;
 * refuses a schema newer than this build knows.
 */
export function migrate(db: Db): Promise<void> {
  return db.transaction(
    async (tx) => {
      await tx.lock(MIGRATION_LOCK);
      await tx.exec(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL)',
      );
      let applied = await appliedVersions(tx);
      if (db.dialect === 'postgres') applied = await renumbered(tx, applied);
      const newest = Math.max(0, ...applied);
      if (newest > MIGRATIONS.length) {
        throw new ConfigError(
          `the control store's schema is at version ${newest}, newer than this build knows (${MIGRATIONS.length}): upgrade strata before starting it`,
        );
      }
      for (const [index, migration] of MIGRATIONS.entries()) {
        const version = index + 1;
        if (applied.has(version)) continue;
        await tx.exec(typeof migration === 'string' ? migration : migration[db.dialect]);
        await tx.run(sql`INSERT INTO schema_migrations (version, applied_ms) VALUES (${version}, ${Date.now()})`);
      }
    },
    { schema: true },
  );
}

async function appliedVersions(tx: Tx): Promise<Set<number>> {
  const rows = await tx.all<{ version: number }>(sql`SELECT version FROM schema_migrations`);
  return new Set(rows.map((row) => Number(row.version)));
}

/** The versions a PostgreSQL store numbered apart would have under this list, recorded so from now on. */
async function renumbered(tx: Tx, applied: Set<number>): Promise<Set<number>> {
  if (applied.size === 0 || Math.max(...applied) > POSTGRES_BEFORE_ONE_LIST.size) return applied;
  await tx.run(sql`DELETE FROM schema_migrations`);
  const now = new Set<number>();
  for (const old of applied) {
    for (const version of POSTGRES_BEFORE_ONE_LIST.get(old) ?? []) {
      await tx.run(sql`INSERT INTO schema_migrations (version, applied_ms) VALUES (${version}, ${Date.now()})`);
      now.add(version);
    }
  }
  return now;
}
