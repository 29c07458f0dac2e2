import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { ConfigError } from '../config.js';
import type { DatabaseState } from '../contract/databases.js';
import type { TableRecord } from '../engine/tables/catalog.js';
import { Conflict } from '../errors.js';
import type { Binding } from '../storage/binding.js';
import { fsyncPath, GroupSync } from '../storage/durable.js';
import { assertLocationFree, databaseLimit } from './claims.js';
import { ControlEvents } from './events.js';
import {
  decide,
  type IdempotencyBegin,
  type IdempotencyRecord,
  type IdempotencyScope,
  idempotencyTable,
} from './idempotency.js';
import { databaseFromRow, type KeyRow, keyFromRow, tableExists, tableFromRow } from './records.js';
import {
  type Account,
  type ApiKeyListing,
  type ApiKeyRecord,
  beingDeleted,
  type ControlStore,
  type DatabaseRecord,
  DELETION_STATES_SQL,
  type DeletionState,
  isBeingDeleted,
  type LeaseResult,
  type StoredDatabaseState,
} from './store.js';
import { DROP_ORPHANED_LEASES, sweepExpiredIdempotency } from './sweeps.js';

/** Numbered migrations; each runs once, in order, inside a transaction. Never edit one that has shipped. */
const MIGRATIONS: readonly string[] = [
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
  `${idempotencyTable('INTEGER')}
   ALTER TABLE databases ADD COLUMN verifying_until_ms INTEGER;
   CREATE TABLE upkeep_leases (
     table_id TEXT PRIMARY KEY,
     holder TEXT NOT NULL,
     expires_ms INTEGER NOT NULL
   );`,
  DROP_ORPHANED_LEASES,
];

const newExternalId = (): string => `ext_${randomBytes(16).toString('hex')}`;

/** The embedded control store: one SQLite file in WAL mode, shared safely with the CLI's processes. */
export class SqliteControlStore implements ControlStore {
  readonly events = new ControlEvents();
  readonly shared = false;
  private readonly db: Database.Database;
  /** Each statement is prepared once: preparing cost more than running the point lookups every request makes. */
  private readonly statements = new Map<string, Database.Statement>();
  /** Makes relaxed commits durable (`durable`): the WAL fsynced off the event loop, shared by whoever waits. */
  private readonly walSync: GroupSync;
  /** Relaxed commits made, and how many of them an fsync is known to cover. */
  private relaxedCommits = 0;
  private syncedCommits = 0;

  constructor(path: string) {
    mkdirSync(dirname(path), { recursive: true });
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('foreign_keys = ON');
    // The CLI may write while the server does; wait for the lock instead of failing at once.
    this.db.pragma('busy_timeout = 5000');
    // SQLite's fsync at each commit, but for `relaxed` ones. Stated: a database already in WAL mode opens with
    // better-sqlite3's build default, which is without it.
    this.db.pragma('synchronous = FULL');
    // SQLite keeps the log beside the file a symbolic link names, not beside the link.
    const wal = `${realpathSync(path)}-wal`;
    this.walSync = new GroupSync(async () => {
      // The log exists while relaxed commits wait for it: gone, they would be durable in name only.
      if (!(await fsyncPath(wal))) throw new Error(`the control store's log ${wal} is missing`);
    });
    this.migrate();
  }

  /**
   * Runs `commit` without the fsync SQLite makes at each commit, which blocks the event loop while the disk works
   * (docs/operations.md, Durability). It lasts a process crash at once and a power cut once `durable()` has
   * resolved; writes on every request's path commit so, and the rest keep SQLite's own fsync.
   */
  private relaxed<T>(commit: () => T): T {
    this.statement('PRAGMA synchronous = NORMAL').run();
    try {
      return commit();
    } finally {
      this.statement('PRAGMA synchronous = FULL').run();
      this.relaxedCommits++;
    }
  }

  async durable(): Promise<void> {
    const upTo = this.relaxedCommits;
    if (upTo === this.syncedCommits) return;
    // Fsyncing the WAL is what FULL would have done after the commit; a checkpoint since syncs the file it copied to.
    await this.walSync.sync();
    this.syncedCommits = Math.max(this.syncedCommits, upTo);
  }

  private statement(sql: string): Database.Statement {
    let prepared = this.statements.get(sql);
    if (prepared === undefined) {
      prepared = this.db.prepare(sql);
      this.statements.set(sql, prepared);
    }
    return prepared;
  }

  /** The row a query finds, as a record, or undefined. */
  private one<Row, T>(sql: string, record: (row: Row) => T, ...args: unknown[]): T | undefined {
    const row = this.statement(sql).get(...args) as Row | undefined;
    return row === undefined ? undefined : record(row);
  }

  /** Every row a query finds, as records. */
  private all<Row, T>(sql: string, record: (row: Row) => T, ...args: unknown[]): T[] {
    return (this.statement(sql).all(...args) as Row[]).map(record);
  }

  private migrate(): void {
    this.db.exec(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_ms INTEGER NOT NULL)',
    );
    const applied = new Set(
      this.statement('SELECT version FROM schema_migrations')
        .all()
        .map((row) => (row as { version: number }).version),
    );
    const newest = Math.max(0, ...applied);
    if (newest > MIGRATIONS.length) {
      throw new ConfigError(
        `the control store's schema is at version ${newest}, newer than this build knows (${MIGRATIONS.length}): upgrade strata before starting it`,
      );
    }
    MIGRATIONS.forEach((sql, index) => {
      const version = index + 1;
      if (applied.has(version)) return;
      this.db
        .transaction(() => {
          this.db.exec(sql);
          this.statement('INSERT INTO schema_migrations (version, applied_ms) VALUES (?, ?)').run(version, Date.now());
        })
        .immediate();
    });
  }

  async ping(): Promise<void> {
    this.statement('SELECT 1').get();
  }

  async close(): Promise<void> {
    this.db.close();
  }

  async ensureAccount(name: string): Promise<Account> {
    return this.db
      .transaction(() => {
        const found = this.statement('SELECT id, name, external_id AS externalId FROM accounts WHERE name = ?').get(
          name,
        ) as Account | undefined;
        if (found !== undefined) return found;
        const account: Account = { id: `acct_${randomUUID()}`, name, externalId: newExternalId() };
        this.statement('INSERT INTO accounts (id, name, created_ms, external_id) VALUES (?, ?, ?, ?)').run(
          account.id,
          name,
          Date.now(),
          account.externalId,
        );
        return account;
      })
      .immediate();
  }

  async findAccount(id: string): Promise<Account | undefined> {
    return this.statement('SELECT id, name, external_id AS externalId FROM accounts WHERE id = ?').get(id) as
      | Account
      | undefined;
  }

  async insertKey(key: ApiKeyRecord): Promise<void> {
    this.statement('INSERT INTO api_keys (id, account_id, hash, created_ms, revoked_ms) VALUES (?, ?, ?, ?, ?)').run(
      key.id,
      key.accountId,
      key.hash,
      key.createdMs,
      key.revokedMs,
    );
  }

  async findKeyByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    return this.one('SELECT * FROM api_keys WHERE hash = ?', keyFromRow, hash);
  }

  async listKeys(): Promise<ApiKeyListing[]> {
    const rows = this.statement(
      'SELECT k.*, a.name AS account_name FROM api_keys k JOIN accounts a ON a.id = k.account_id ORDER BY k.created_ms, k.id',
    ).all() as (KeyRow & { account_name: string })[];
    return rows.map((row) => ({ ...keyFromRow(row), accountName: row.account_name }));
  }

  async revokeKey(id: string, nowMs: number): Promise<boolean> {
    const result = this.statement('UPDATE api_keys SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL').run(
      nowMs,
      id,
    );
    return result.changes === 1;
  }

  async countKeys(): Promise<number> {
    return (this.statement('SELECT count(*) AS n FROM api_keys').get() as { n: number }).n;
  }

  async insertFirstKey(key: ApiKeyRecord): Promise<boolean> {
    // Immediate: the write lock is taken before the check, so another process on the same file (the CLI) waits.
    return this.db
      .transaction(() => {
        if (this.statement('SELECT 1 FROM api_keys LIMIT 1').get() !== undefined) return false;
        this.statement(
          'INSERT INTO api_keys (id, account_id, hash, created_ms, revoked_ms) VALUES (?, ?, ?, ?, ?)',
        ).run(key.id, key.accountId, key.hash, key.createdMs, key.revokedMs);
        return true;
      })
      .immediate();
  }

  async insertDatabase(db: DatabaseRecord, maxPerAccount: number): Promise<void> {
    // IMMEDIATE: the checks and the insert hold the write lock together, so two registrations cannot both pass.
    this.db
      .transaction(() => {
        const named = this.statement('SELECT 1 FROM databases WHERE account_id = ? AND name = ?').get(
          db.accountId,
          db.name,
        );
        if (named !== undefined) {
          throw new Conflict(`database "${db.name}" is already registered`, { code: 'database_exists' });
        }
        const held = (
          this.statement('SELECT count(*) AS n FROM databases WHERE account_id = ?').get(db.accountId) as { n: number }
        ).n;
        if (held >= maxPerAccount) throw databaseLimit(held);
        const others = this.statement('SELECT binding FROM databases').all() as { binding: string }[];
        assertLocationFree(
          db.binding,
          others.map((row) => JSON.parse(row.binding) as Binding),
        );
        this.statement(
          'INSERT INTO databases (id, account_id, name, created_ms, state, binding, last_error) VALUES (?, ?, ?, ?, ?, ?, ?)',
        ).run(db.id, db.accountId, db.name, db.createdMs, db.state, JSON.stringify(db.binding), db.lastError);
      })
      .immediate();
  }

  async findDatabase(accountId: string, name: string): Promise<DatabaseRecord | undefined> {
    return this.one('SELECT * FROM databases WHERE account_id = ? AND name = ?', databaseFromRow, accountId, name);
  }

  async listDatabases(accountId: string): Promise<DatabaseRecord[]> {
    return this.all('SELECT * FROM databases WHERE account_id = ? ORDER BY name', databaseFromRow, accountId);
  }

  async databaseState(id: string): Promise<StoredDatabaseState | undefined> {
    const row = this.statement('SELECT state FROM databases WHERE id = ?').get(id) as
      | { state: StoredDatabaseState }
      | undefined;
    return row?.state;
  }

  async databaseExists(id: string): Promise<boolean> {
    return this.statement('SELECT 1 FROM databases WHERE id = ?').get(id) !== undefined;
  }

  async setDatabaseState(id: string, state: DatabaseState, lastError: string | null): Promise<void> {
    const set = this.statement(
      `UPDATE databases SET state = ?, last_error = ? WHERE id = ? AND state NOT IN ${DELETION_STATES_SQL}`,
    ).run(state, lastError, id);
    if (state === 'verify_failed' && set.changes === 1) this.events.emit({ kind: 'database_gone', databaseId: id });
  }

  async upkeepLeasesHeld(databaseId: string): Promise<number> {
    const row = this.statement(
      `SELECT count(*) AS n FROM upkeep_leases l JOIN tables t ON t.table_id = l.table_id
         WHERE t.database_id = ? AND l.expires_ms >= ?`,
    ).get(databaseId, Date.now()) as { n: number };
    return row.n;
  }

  async markDeleting(id: string, purge: boolean): Promise<DeletionState | undefined> {
    const marked = this.statement(
      `UPDATE databases SET state = CASE WHEN ? OR state = 'purging' THEN 'purging' ELSE 'deleting' END
         WHERE id = ? RETURNING state`,
    ).get(purge ? 1 : 0, id) as { state: DeletionState } | undefined;
    if (marked !== undefined) this.events.emit({ kind: 'database_deleting', databaseId: id });
    return marked?.state;
  }

  /** Refuses a write to a database whose deletion began; run inside the write's own transaction. */
  private assertNotBeingDeleted(databaseId: string): void {
    const owner = this.statement('SELECT state FROM databases WHERE id = ?').get(databaseId) as
      | { state: StoredDatabaseState }
      | undefined;
    if (owner !== undefined && isBeingDeleted(owner.state)) throw beingDeleted();
  }

  async markActive(id: string): Promise<void> {
    this.statement(
      "UPDATE databases SET state = 'active', last_error = NULL WHERE id = ? AND state IN ('activating', 'active')",
    ).run(id);
  }

  async claimVerification(id: string, forMs: number): Promise<boolean> {
    const now = Date.now();
    const claimed = this.statement(
      'UPDATE databases SET verifying_until_ms = ? WHERE id = ? AND (verifying_until_ms IS NULL OR verifying_until_ms < ?)',
    ).run(now + forMs, id, now);
    return claimed.changes === 1;
  }

  async releaseVerification(id: string): Promise<void> {
    this.statement('UPDATE databases SET verifying_until_ms = NULL WHERE id = ?').run(id);
  }

  async deleteDatabase(id: string): Promise<void> {
    this.db.transaction(() => {
      this.statement(
        'DELETE FROM upkeep_leases WHERE table_id IN (SELECT table_id FROM tables WHERE database_id = ?)',
      ).run(id);
      this.statement('DELETE FROM written_tables WHERE database_id = ?').run(id);
      this.statement('DELETE FROM databases WHERE id = ?').run(id);
    })();
    this.events.emit({ kind: 'database_gone', databaseId: id });
  }

  async writtenTables(databaseId: string): Promise<string[]> {
    return (
      this.statement('SELECT table_id FROM written_tables WHERE database_id = ? ORDER BY table_id').all(databaseId) as {
        table_id: string;
      }[]
    ).map((row) => row.table_id);
  }

  async insertTable(table: TableRecord): Promise<void> {
    try {
      this.db.transaction(() => {
        this.assertNotBeingDeleted(table.databaseId);
        this.statement(
          'INSERT INTO tables (database_id, name, table_id, schema_ipc, indexes, created_ms, state) VALUES (?, ?, ?, ?, ?, ?, ?)',
        ).run(
          table.databaseId,
          table.name,
          table.tableId,
          table.schemaIpc,
          table.indexes,
          table.createdMs,
          table.state,
        );
        // Recorded before the dataset exists, so a purge finds whatever part of it was written.
        this.statement('INSERT INTO written_tables (database_id, table_id) VALUES (?, ?)').run(
          table.databaseId,
          table.tableId,
        );
      })();
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
        throw tableExists(table.name);
      }
      throw err;
    }
  }

  async findTable(databaseId: string, name: string): Promise<TableRecord | undefined> {
    return this.one('SELECT * FROM tables WHERE database_id = ? AND name = ?', tableFromRow, databaseId, name);
  }

  async listTables(databaseId: string): Promise<TableRecord[]> {
    return this.all('SELECT * FROM tables WHERE database_id = ? ORDER BY name', tableFromRow, databaseId);
  }

  async setTableState(tableId: string, state: TableRecord['state']): Promise<void> {
    this.statement('UPDATE tables SET state = ? WHERE table_id = ?').run(state, tableId);
  }

  async deleteTable(tableId: string): Promise<boolean> {
    return this.db.transaction(() => {
      const deleted = this.statement('DELETE FROM tables WHERE table_id = ?').run(tableId);
      this.statement('DELETE FROM upkeep_leases WHERE table_id = ?').run(tableId);
      return deleted.changes === 1;
    })();
  }

  async reserveRowKeys(tableId: string, count: number): Promise<bigint> {
    const row = this.relaxed(() =>
      this.db.transaction(() => {
        const owner = this.statement('SELECT database_id FROM tables WHERE table_id = ?').get(tableId) as
          | { database_id: string }
          | undefined;
        if (owner !== undefined) this.assertNotBeingDeleted(owner.database_id);
        return this.statement(
          'UPDATE tables SET next_row_key = next_row_key + ? WHERE table_id = ? RETURNING next_row_key',
        )
          .safeIntegers(true)
          .get(count, tableId) as { next_row_key: bigint } | undefined;
      })(),
    );
    if (row === undefined) throw new Error(`table ${tableId} is not in the catalog`);
    return row.next_row_key - BigInt(count);
  }

  async acquireLease(tableId: string, holder: string, forMs: number): Promise<LeaseResult> {
    const now = Date.now();
    // Relaxed, taken every pass for every open table: a lease a power cut loses has lapsed by the restart anyway.
    return this.relaxed(() =>
      this.db
        .transaction((): LeaseResult => {
          const live = this.statement(
            `SELECT 1 FROM tables t JOIN databases d ON d.id = t.database_id
               WHERE t.table_id = ? AND d.state NOT IN ${DELETION_STATES_SQL}`,
          ).get(tableId);
          if (live === undefined) {
            return { held: false, tookOver: false, dropped: true };
          }
          const prior = this.statement('SELECT holder, expires_ms FROM upkeep_leases WHERE table_id = ?').get(
            tableId,
          ) as { holder: string; expires_ms: number } | undefined;
          if (prior !== undefined && prior.holder !== holder && prior.expires_ms >= now) {
            return { held: false, tookOver: false, dropped: false };
          }
          this.statement(
            'INSERT INTO upkeep_leases (table_id, holder, expires_ms) VALUES (?, ?, ?) ON CONFLICT (table_id) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms',
          ).run(tableId, holder, now + forMs);
          return { held: true, tookOver: prior !== undefined && prior.holder !== holder, dropped: false };
        })
        .immediate(),
    );
  }

  async renewLease(tableId: string, holder: string, forMs: number): Promise<boolean> {
    const now = Date.now();
    return this.relaxed(
      () =>
        this.statement(
          'UPDATE upkeep_leases SET expires_ms = ? WHERE table_id = ? AND holder = ? AND expires_ms >= ?',
        ).run(now + forMs, tableId, holder, now).changes === 1,
    );
  }

  async releaseLease(tableId: string, holder: string): Promise<void> {
    this.relaxed(() =>
      this.statement('DELETE FROM upkeep_leases WHERE table_id = ? AND holder = ?').run(tableId, holder),
    );
  }

  async beginIdempotent(
    scope: IdempotencyScope,
    fingerprint: string,
    holder: string,
    runForMs: number,
    keepForMs: number,
  ): Promise<IdempotencyBegin> {
    const now = Date.now();
    const where = [scope.accountId, scope.databaseId, scope.key];
    // Relaxed: a claim lost to a power cut recorded no intent (that would have synced it), so nothing was written.
    return this.relaxed(() =>
      this.db
        .transaction((): IdempotencyBegin => {
          this.statement(sweepExpiredIdempotency('@now', '')).run({ now });
          const record = this.statement(
            `SELECT fingerprint, state, running_until_ms AS runningUntilMs, expires_ms AS expiresMs, intent, response
               FROM idempotency WHERE account_id = ? AND database_id = ? AND key = ?`,
          ).get(...where) as IdempotencyRecord | undefined;
          const decision = record === undefined ? 'restart' : decide(record, fingerprint, now);
          if (decision === 'resume') {
            this.statement(
              'UPDATE idempotency SET holder = ?, running_until_ms = ? WHERE account_id = ? AND database_id = ? AND key = ?',
            ).run(holder, now + runForMs, ...where);
            return { kind: 'resumed', intent: record?.intent ?? null };
          }
          if (decision !== 'restart') return decision;
          this.statement(
            `INSERT OR REPLACE INTO idempotency
               (account_id, database_id, key, fingerprint, state, holder, running_until_ms, intent, response, expires_ms)
               VALUES (?, ?, ?, ?, 'running', ?, ?, NULL, NULL, ?)`,
          ).run(...where, fingerprint, holder, now + runForMs, now + keepForMs);
          return { kind: 'started' };
        })
        .immediate(),
    );
  }

  async renewIdempotent(scope: IdempotencyScope, holder: string, runForMs: number): Promise<void> {
    this.relaxed(() =>
      this.statement(
        "UPDATE idempotency SET running_until_ms = ? WHERE account_id = ? AND database_id = ? AND key = ? AND holder = ? AND state = 'running'",
      ).run(Date.now() + runForMs, scope.accountId, scope.databaseId, scope.key, holder),
    );
  }

  async recordIntent(scope: IdempotencyScope, holder: string, intent: string): Promise<boolean> {
    const recorded = this.relaxed(() =>
      this.statement(
        "UPDATE idempotency SET intent = ? WHERE account_id = ? AND database_id = ? AND key = ? AND holder = ? AND state = 'running'",
      ).run(intent, scope.accountId, scope.databaseId, scope.key, holder),
    );
    return recorded.changes === 1;
  }

  async finishIdempotent(scope: IdempotencyScope, holder: string, response: string): Promise<void> {
    // Relaxed: an answer lost to a power cut is found again from the intent, which was durable before the commit.
    this.relaxed(() =>
      this.statement(
        "UPDATE idempotency SET state = 'done', response = ? WHERE account_id = ? AND database_id = ? AND key = ? AND holder = ?",
      ).run(response, scope.accountId, scope.databaseId, scope.key, holder),
    );
  }

  async dropIdempotent(scope: IdempotencyScope, holder: string): Promise<void> {
    // Relaxed: a claim left without an intent is taken over by a retry once its hold lapses.
    this.relaxed(() =>
      this.statement(
        "DELETE FROM idempotency WHERE account_id = ? AND database_id = ? AND key = ? AND holder = ? AND state = 'running'",
      ).run(scope.accountId, scope.databaseId, scope.key, holder),
    );
  }
}
