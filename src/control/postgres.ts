import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { ConfigError } from '../config.js';
import type { DatabaseState } from '../contract/databases.js';
import type { TableRecord } from '../engine/tables/catalog.js';
import { Conflict, StrataError, Unavailable } from '../errors.js';
import type { Binding } from '../storage/binding.js';
import { assertLocationFree, databaseLimit } from './claims.js';
import { type ControlEvent, ControlEvents } from './events.js';
import { decide, type IdempotencyBegin, type IdempotencyScope, idempotencyTable } from './idempotency.js';
import {
  type DatabaseRow,
  databaseFromRow,
  type KeyRow,
  keyFromRow,
  type TableRow,
  tableExists,
  tableFromRow,
} from './records.js';
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

/** Numbered migrations; each runs once, in order, in a transaction, under the migration lock. Never edit one that shipped. */
const MIGRATIONS: readonly string[] = [
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
   ${idempotencyTable('BIGINT')}
   CREATE TABLE upkeep_leases (
     table_id TEXT PRIMARY KEY,
     holder TEXT NOT NULL,
     expires_ms BIGINT NOT NULL
   );`,
  DROP_ORPHANED_LEASES,
];

/** Keys of PostgreSQL advisory locks the service takes: migrations, the registration of a database, the first key. */
const MIGRATION_LOCK = 0x5354_5241; // "STRA"
const REGISTRATION_LOCK = 0x5354_5242;
const BOOTSTRAP_LOCK = 0x5354_5243;

/** The channel on which nodes tell each other what changed (LISTEN/NOTIFY). */
const CHANNEL = 'strata_control';

/** Waits of the store: connecting, and any one statement. Past them a request answers 503, not a hang. */
const CONNECT_TIMEOUT_MS = 2000;
const STATEMENT_TIMEOUT_MS = 5000;
/** API keys a node remembers (only while it hears every revocation: see `findKeyByHash`). */
const KEYS_CACHED = 10_000;

/** How often the listener proves its connection alive. */
const HEARTBEAT_MS = 2000;
/** How soon the listener connects again after its connection broke. */
const RELISTEN_MS = 500;

/** The database's clock in ms: leases are judged by one clock, whichever node asks. */
const NOW_MS = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

/**
 * Whether an error means PostgreSQL could not be reached or went away, rather than that it refused the
 * statement: no SQLSTATE at all (a socket error, a timeout), or a class that names the connection or the
 * server's state (08 connection, 57P shutdown, 53 resources).
 */
function isUnreachable(err: unknown): boolean {
  if (err instanceof StrataError) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return code.startsWith('08') || code.startsWith('57P') || code.startsWith('53');
}

const unavailable = () =>
  new Unavailable('the control store is not answering; retry', { retryAfterS: 1, code: 'control_store_unavailable' });

/** Ways for a test to hold the store at a point where a race can happen; a served node sets none. */
export interface PostgresTestHooks {
  /** Awaited by a key lookup after PostgreSQL answered it, before the key may be remembered. */
  testHoldKeyLookup?: () => Promise<void>;
}

/** The control store on PostgreSQL, shared by every node of a deployment (docs/deploy.md). */
export class PostgresControlStore implements ControlStore {
  readonly events = new ControlEvents();
  readonly shared = true;
  private listener: pg.Client | undefined;
  /** Whether the listener is connected and listening: only then can a cached key be trusted. */
  private listening = false;
  /** Live keys by hash, dropped when a revocation is heard (`key_revoked`) and all at once when not listening. */
  private readonly keys = new Map<string, ApiKeyRecord>();
  /**
   * Moves on with every revocation heard and every start or break of the listener. A lookup remembers its key
   * only if it did not move while the lookup ran: a read that began before a revocation can answer after the
   * notice was handled, and would otherwise put the revoked key back.
   */
  private keyGeneration = 0;
  private closed = false;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly url: string,
    private readonly hooks: PostgresTestHooks,
  ) {}

  /** Connects, brings the schema up to date under the migration lock, and starts listening for other nodes. */
  static async open(url: string, hooks: PostgresTestHooks = {}): Promise<PostgresControlStore> {
    const pool = new pg.Pool({
      connectionString: url,
      max: 10,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      query_timeout: STATEMENT_TIMEOUT_MS,
      statement_timeout: STATEMENT_TIMEOUT_MS,
      idleTimeoutMillis: 30_000,
      keepAlive: true,
    });
    // An idle connection that breaks (the server restarted) is dropped by the pool; without a listener the
    // error would end the process.
    pool.on('error', () => undefined);
    const store = new PostgresControlStore(pool, url, hooks);
    try {
      await store.migrate();
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err;
    }
    store.listen();
    return store;
  }

  private async query<Row extends object>(sql: string, params: unknown[] = []): Promise<Row[]> {
    try {
      return (await this.pool.query<Row>(sql, params)).rows;
    } catch (err) {
      if (isUnreachable(err)) throw unavailable();
      throw err;
    }
  }

  /** Runs `work` in one transaction on one connection. */
  private async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch {
      throw unavailable();
    }
    let broken = false;
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      broken = isUnreachable(err);
      await client.query('ROLLBACK').catch(() => undefined);
      if (broken) throw unavailable();
      throw err;
    } finally {
      client.release(broken);
    }
  }

  private async migrate(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    try {
      await client.connect();
    } catch (err) {
      throw new ConfigError(`cannot reach the control store at STRATA_CONTROL_URL: ${(err as Error).message}`);
    }
    try {
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      await client.query(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL)',
      );
      const applied = new Set(
        (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version),
      );
      const newest = Math.max(0, ...applied);
      if (newest > MIGRATIONS.length) {
        throw new ConfigError(
          `the control store's schema is at version ${newest}, newer than this build knows (${MIGRATIONS.length}): upgrade this node before starting it`,
        );
      }
      for (const [index, sql] of MIGRATIONS.entries()) {
        const version = index + 1;
        if (applied.has(version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(sql);
          await client.query('INSERT INTO schema_migrations (version, applied_ms) VALUES ($1, $2)', [
            version,
            Date.now(),
          ]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
      await client.end().catch(() => undefined);
    }
  }

  /**
   * Listens for other nodes' changes on a connection of its own, connecting again whenever it breaks. After a
   * break, listeners are told to check what they hold (`resync`): a notice sent meanwhile was lost.
   */
  private listen(): void {
    if (this.closed) return;
    const client = new pg.Client({
      connectionString: this.url,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      query_timeout: CONNECT_TIMEOUT_MS,
      keepAlive: true,
    });
    this.listener = client;
    let again = false;
    // A connection that went silent (no reset ever arrives) would leave remembered keys unrevoked: a heartbeat
    // that gets no answer counts as a break.
    const heartbeat = setInterval(() => void client.query('SELECT 1').catch(() => reconnect()), HEARTBEAT_MS);
    heartbeat.unref();
    const reconnect = () => {
      this.listening = false;
      this.keyGeneration++;
      this.keys.clear();
      clearInterval(heartbeat);
      if (again) return;
      again = true;
      client.end().catch(() => undefined);
      if (!this.closed) setTimeout(() => this.listen(), RELISTEN_MS).unref();
    };
    client.on('error', reconnect);
    client.on('end', reconnect);
    client.on('notification', (message) => {
      if (message.channel !== CHANNEL || message.payload === undefined) return;
      try {
        const event = JSON.parse(message.payload) as ControlEvent;
        if (event.kind === 'key_revoked') {
          this.keyGeneration++;
          this.keys.delete(event.hash);
        }
        this.events.emit(event);
      } catch {
        // A notice this build cannot read is ignored.
      }
    });
    client
      .connect()
      .then(() => client.query(`LISTEN ${CHANNEL}`))
      .then(() => {
        if (again) return;
        this.listening = true;
        this.keyGeneration++;
        this.events.emit({ kind: 'resync' });
      })
      .catch(reconnect);
  }

  private notify(event: ControlEvent, client?: pg.PoolClient): Promise<unknown> {
    const sql = 'SELECT pg_notify($1, $2)';
    const params = [CHANNEL, JSON.stringify(event)];
    return client === undefined ? this.query(sql, params) : client.query(sql, params);
  }

  async ping(): Promise<void> {
    await this.query('SELECT 1');
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.listener?.end().catch(() => undefined);
    await this.pool.end().catch(() => undefined);
  }

  async ensureAccount(name: string): Promise<Account> {
    const created: Account = { id: `acct_${randomUUID()}`, name, externalId: `ext_${randomBytes(16).toString('hex')}` };
    await this.query(
      'INSERT INTO accounts (id, name, created_ms, external_id) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING',
      [created.id, name, Date.now(), created.externalId],
    );
    const [row] = await this.query<Account>(
      'SELECT id, name, external_id AS "externalId" FROM accounts WHERE name = $1',
      [name],
    );
    if (row === undefined) throw new Error(`account "${name}" vanished as it was created`);
    return row;
  }

  async findAccount(id: string): Promise<Account | undefined> {
    const [row] = await this.query<Account>(
      'SELECT id, name, external_id AS "externalId" FROM accounts WHERE id = $1',
      [id],
    );
    return row;
  }

  async insertKey(key: ApiKeyRecord): Promise<void> {
    await this.query(
      'INSERT INTO api_keys (id, account_id, hash, created_ms, revoked_ms) VALUES ($1, $2, $3, $4, $5)',
      [key.id, key.accountId, key.hash, key.createdMs, key.revokedMs],
    );
  }

  /**
   * A key by its hash. Live keys are remembered while this node listens: every revocation is announced in the
   * statement that makes it (`revokeKey`), so a remembered key is dropped as soon as the notice arrives, and
   * all of them whenever the listener is not connected (a notice may have been missed). Unknown and revoked
   * keys are always looked up.
   */
  async findKeyByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const cached = this.listening ? this.keys.get(hash) : undefined;
    if (cached !== undefined) return cached;
    const generation = this.keyGeneration;
    const [row] = await this.query<KeyRow>('SELECT * FROM api_keys WHERE hash = $1', [hash]);
    if (row === undefined) return undefined;
    await this.hooks.testHoldKeyLookup?.();
    const key = keyFromRow(row);
    // Remembered only if the listener ran throughout the read and heard no revocation meanwhile: the row may
    // predate a revocation whose notice was handled while it travelled.
    if (key.revokedMs === null && this.listening && generation === this.keyGeneration) {
      if (this.keys.size >= KEYS_CACHED) this.keys.delete(this.keys.keys().next().value as string);
      this.keys.set(hash, key);
    }
    return key;
  }

  async listKeys(): Promise<ApiKeyListing[]> {
    const rows = await this.query<KeyRow & { account_name: string }>(
      'SELECT k.*, a.name AS account_name FROM api_keys k JOIN accounts a ON a.id = k.account_id ORDER BY k.created_ms, k.id',
    );
    return rows.map((row) => ({ ...keyFromRow(row), accountName: row.account_name }));
  }

  async revokeKey(id: string, nowMs: number): Promise<boolean> {
    // The notice is sent by the statement that revokes: every node hears it when the revocation commits.
    const rows = await this.query(
      `WITH revoked AS (UPDATE api_keys SET revoked_ms = $1 WHERE id = $2 AND revoked_ms IS NULL RETURNING hash)
       SELECT pg_notify($3, json_build_object('kind', 'key_revoked', 'hash', hash)::text) FROM revoked`,
      [nowMs, id, CHANNEL],
    );
    return rows.length === 1;
  }

  async countKeys(): Promise<number> {
    const [row] = await this.query<{ n: string }>('SELECT count(*) AS n FROM api_keys');
    return Number(row?.n ?? 0);
  }

  async insertFirstKey(key: ApiKeyRecord): Promise<boolean> {
    return this.transaction(async (client) => {
      // Nodes starting together each find no key; the lock makes them look one after another, and a count read
      // after taking it sees the key an earlier holder committed.
      await client.query('SELECT pg_advisory_xact_lock($1)', [BOOTSTRAP_LOCK]);
      const held = await client.query('SELECT 1 FROM api_keys LIMIT 1');
      if (held.rows.length > 0) return false;
      await client.query(
        'INSERT INTO api_keys (id, account_id, hash, created_ms, revoked_ms) VALUES ($1, $2, $3, $4, $5)',
        [key.id, key.accountId, key.hash, key.createdMs, key.revokedMs],
      );
      return true;
    });
  }

  async insertDatabase(db: DatabaseRecord, maxPerAccount: number): Promise<void> {
    await this.transaction(async (client) => {
      // One registration at a time across every node: the location check reads every binding.
      await client.query('SELECT pg_advisory_xact_lock($1)', [REGISTRATION_LOCK]);
      const named = await client.query('SELECT 1 FROM databases WHERE account_id = $1 AND name = $2', [
        db.accountId,
        db.name,
      ]);
      if (named.rows.length > 0) {
        throw new Conflict(`database "${db.name}" is already registered`, { code: 'database_exists' });
      }
      const held = await client.query<{ n: string }>('SELECT count(*) AS n FROM databases WHERE account_id = $1', [
        db.accountId,
      ]);
      const count = Number(held.rows[0]?.n ?? 0);
      if (count >= maxPerAccount) throw databaseLimit(count);
      const others = await client.query<{ binding: string }>('SELECT binding FROM databases');
      assertLocationFree(
        db.binding,
        others.rows.map((row) => JSON.parse(row.binding) as Binding),
      );
      await client.query(
        'INSERT INTO databases (id, account_id, name, created_ms, state, binding, last_error) VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [db.id, db.accountId, db.name, db.createdMs, db.state, JSON.stringify(db.binding), db.lastError],
      );
    });
  }

  async findDatabase(accountId: string, name: string): Promise<DatabaseRecord | undefined> {
    const [row] = await this.query<DatabaseRow>('SELECT * FROM databases WHERE account_id = $1 AND name = $2', [
      accountId,
      name,
    ]);
    return row === undefined ? undefined : databaseFromRow(row);
  }

  async databaseState(id: string): Promise<StoredDatabaseState | undefined> {
    const [row] = await this.query<{ state: StoredDatabaseState }>('SELECT state FROM databases WHERE id = $1', [id]);
    return row?.state;
  }

  async databaseExists(id: string): Promise<boolean> {
    return (await this.query('SELECT 1 FROM databases WHERE id = $1', [id])).length > 0;
  }

  async listDatabases(accountId: string): Promise<DatabaseRecord[]> {
    const rows = await this.query<DatabaseRow>('SELECT * FROM databases WHERE account_id = $1 ORDER BY name', [
      accountId,
    ]);
    return rows.map(databaseFromRow);
  }

  async setDatabaseState(id: string, state: DatabaseState, lastError: string | null): Promise<void> {
    await this.transaction(async (client) => {
      const set = await client.query(
        `UPDATE databases SET state = $1, last_error = $2 WHERE id = $3 AND state NOT IN ${DELETION_STATES_SQL}`,
        [state, lastError, id],
      );
      if (state === 'verify_failed' && set.rowCount === 1) {
        await this.notify({ kind: 'database_gone', databaseId: id }, client);
      }
    });
  }

  async upkeepLeasesHeld(databaseId: string): Promise<number> {
    const [row] = await this.query<{ n: string }>(
      `SELECT count(*) AS n FROM upkeep_leases l JOIN tables t ON t.table_id = l.table_id
         WHERE t.database_id = $1 AND l.expires_ms >= ${NOW_MS}`,
      [databaseId],
    );
    return Number(row?.n ?? 0);
  }

  async markDeleting(id: string, purge: boolean): Promise<DeletionState | undefined> {
    // The notice is sent with the commit: a node hears of the deletion only once the state says it.
    return this.transaction(async (client) => {
      const marked = await client.query<{ state: DeletionState }>(
        `UPDATE databases SET state = CASE WHEN $2 OR state = 'purging' THEN 'purging' ELSE 'deleting' END
           WHERE id = $1 RETURNING state`,
        [id, purge],
      );
      const state = marked.rows[0]?.state;
      if (state !== undefined) await this.notify({ kind: 'database_deleting', databaseId: id }, client);
      return state;
    });
  }

  async markActive(id: string): Promise<void> {
    await this.query(
      "UPDATE databases SET state = 'active', last_error = NULL WHERE id = $1 AND state IN ('activating', 'active')",
      [id],
    );
  }

  async claimVerification(id: string, forMs: number): Promise<boolean> {
    const rows = await this.query(
      `UPDATE databases SET verifying_until_ms = ${NOW_MS} + $2
         WHERE id = $1 AND (verifying_until_ms IS NULL OR verifying_until_ms < ${NOW_MS}) RETURNING id`,
      [id, forMs],
    );
    return rows.length === 1;
  }

  async releaseVerification(id: string): Promise<void> {
    await this.query('UPDATE databases SET verifying_until_ms = NULL WHERE id = $1', [id]);
  }

  async deleteDatabase(id: string): Promise<void> {
    await this.transaction(async (client) => {
      // Locked first, so that a lease taken meanwhile (`acquireLease` holds its table's row) has committed, and
      // is seen, by the statement that ends the tables' leases.
      await client.query('SELECT 1 FROM tables WHERE database_id = $1 FOR UPDATE', [id]);
      await client.query(
        'DELETE FROM upkeep_leases WHERE table_id IN (SELECT table_id FROM tables WHERE database_id = $1)',
        [id],
      );
      await client.query('DELETE FROM written_tables WHERE database_id = $1', [id]);
      await client.query('DELETE FROM databases WHERE id = $1', [id]);
      await this.notify({ kind: 'database_gone', databaseId: id }, client);
    });
  }

  async writtenTables(databaseId: string): Promise<string[]> {
    const rows = await this.query<{ table_id: string }>(
      'SELECT table_id FROM written_tables WHERE database_id = $1 ORDER BY table_id',
      [databaseId],
    );
    return rows.map((row) => row.table_id);
  }

  async insertTable(table: TableRecord): Promise<void> {
    try {
      await this.transaction(async (client) => {
        // Held until the table is recorded: a deletion marked meanwhile waits, and then its purge finds the table.
        const owner = await client.query<{ state: StoredDatabaseState }>(
          'SELECT state FROM databases WHERE id = $1 FOR SHARE',
          [table.databaseId],
        );
        const state = owner.rows[0]?.state;
        if (state !== undefined && isBeingDeleted(state)) throw beingDeleted();
        await client.query(
          'INSERT INTO tables (database_id, name, table_id, schema_ipc, indexes, created_ms, state) VALUES ($1, $2, $3, $4, $5, $6, $7)',
          [table.databaseId, table.name, table.tableId, table.schemaIpc, table.indexes, table.createdMs, table.state],
        );
        // Recorded before the dataset exists, so a purge finds whatever part of it was written.
        await client.query('INSERT INTO written_tables (database_id, table_id) VALUES ($1, $2)', [
          table.databaseId,
          table.tableId,
        ]);
      });
    } catch (err) {
      if ((err as { code?: string }).code === '23505') {
        throw tableExists(table.name);
      }
      throw err;
    }
  }

  async findTable(databaseId: string, name: string): Promise<TableRecord | undefined> {
    const [row] = await this.query<TableRow>('SELECT * FROM tables WHERE database_id = $1 AND name = $2', [
      databaseId,
      name,
    ]);
    return row === undefined ? undefined : tableFromRow(row);
  }

  async listTables(databaseId: string): Promise<TableRecord[]> {
    const rows = await this.query<TableRow>('SELECT * FROM tables WHERE database_id = $1 ORDER BY name', [databaseId]);
    return rows.map(tableFromRow);
  }

  async setTableState(tableId: string, state: TableRecord['state']): Promise<void> {
    await this.query('UPDATE tables SET state = $1 WHERE table_id = $2', [state, tableId]);
  }

  async deleteTable(tableId: string): Promise<boolean> {
    // Two statements: the second's snapshot sees a lease that an `acquireLease` holding the table's row (which
    // the first waited for) committed meanwhile. Of drops racing on several nodes, the first waits for none and
    // the others wait for its commit and then delete nothing: the row count says which one removed the entry.
    return this.transaction(async (client) => {
      const deleted = await client.query('DELETE FROM tables WHERE table_id = $1', [tableId]);
      await client.query('DELETE FROM upkeep_leases WHERE table_id = $1', [tableId]);
      return deleted.rowCount === 1;
    });
  }

  async reserveRowKeys(tableId: string, count: number): Promise<bigint> {
    // One statement: the row lock it takes orders every node's reservations of the table. The database's row is
    // shared-locked as its state is read, so each reservation is wholly before a deletion's mark (which waits for
    // it) or sees it: no write reserves keys once the deletion is recorded.
    const [row] = await this.query<{ state: StoredDatabaseState | null; next_row_key: string | null }>(
      `WITH owner AS (
         SELECT d.state FROM tables t JOIN databases d ON d.id = t.database_id WHERE t.table_id = $2 FOR SHARE OF d),
       reserved AS (
         UPDATE tables SET next_row_key = next_row_key + $1
           WHERE table_id = $2 AND EXISTS (SELECT 1 FROM owner WHERE state NOT IN ${DELETION_STATES_SQL})
           RETURNING next_row_key)
       SELECT (SELECT state FROM owner) AS state, (SELECT next_row_key FROM reserved) AS next_row_key`,
      [count, tableId],
    );
    if (row?.state != null && isBeingDeleted(row.state)) throw beingDeleted();
    if (row?.next_row_key == null) throw new Error(`table ${tableId} is not in the catalog`);
    return BigInt(row.next_row_key) - BigInt(count);
  }

  /** Every commit is durable when PostgreSQL answers it (`synchronous_commit`, on by default). */
  async durable(): Promise<void> {}

  async acquireLease(tableId: string, holder: string, forMs: number): Promise<LeaseResult> {
    // The table's catalog row is held (KEY SHARE, which no write of the table waits for) while the lease is
    // taken: a drop waits for this statement, and then ends the lease it took (`deleteTable`).
    const [row] = await this.query<{ held: boolean; took_over: boolean; dropped: boolean }>(
      `WITH live AS (
         SELECT t.table_id FROM tables t JOIN databases d ON d.id = t.database_id
           WHERE t.table_id = $1 AND d.state NOT IN ${DELETION_STATES_SQL} FOR KEY SHARE OF t),
            prior AS (SELECT holder FROM upkeep_leases WHERE table_id = $1),
            taken AS (
              INSERT INTO upkeep_leases (table_id, holder, expires_ms) SELECT table_id, $2, ${NOW_MS} + $3 FROM live
              ON CONFLICT (table_id) DO UPDATE SET holder = $2, expires_ms = ${NOW_MS} + $3
                WHERE upkeep_leases.holder = $2 OR upkeep_leases.expires_ms < ${NOW_MS}
              RETURNING table_id)
       SELECT EXISTS (SELECT 1 FROM taken) AS held,
              EXISTS (SELECT 1 FROM taken) AND coalesce((SELECT holder FROM prior) <> $2, false) AS took_over,
              NOT EXISTS (SELECT 1 FROM live) AS dropped`,
      [tableId, holder, forMs],
    );
    return { held: row?.held ?? false, tookOver: row?.took_over ?? false, dropped: row?.dropped ?? false };
  }

  async renewLease(tableId: string, holder: string, forMs: number): Promise<boolean> {
    const renewed = await this.query(
      `UPDATE upkeep_leases SET expires_ms = ${NOW_MS} + $3
         WHERE table_id = $1 AND holder = $2 AND expires_ms >= ${NOW_MS} RETURNING table_id`,
      [tableId, holder, forMs],
    );
    return renewed.length === 1;
  }

  async releaseLease(tableId: string, holder: string): Promise<void> {
    await this.query('DELETE FROM upkeep_leases WHERE table_id = $1 AND holder = $2', [tableId, holder]);
  }

  async beginIdempotent(
    scope: IdempotencyScope,
    fingerprint: string,
    holder: string,
    runForMs: number,
    keepForMs: number,
  ): Promise<IdempotencyBegin> {
    const where = [scope.accountId, scope.databaseId, scope.key];
    // Its own statement, before the claim's transaction: the records it deletes are not held while the claim runs.
    await this.query(sweepExpiredIdempotency(NOW_MS, 'FOR UPDATE SKIP LOCKED'));
    return this.transaction(async (client) => {
      const clock = await client.query<{ now: string }>(`SELECT ${NOW_MS} AS now`);
      const now = Number(clock.rows[0]?.now ?? Date.now());
      type Row = {
        fingerprint: string;
        state: 'running' | 'done';
        running_until_ms: string;
        expires_ms: string;
        intent: string | null;
        response: string | null;
      };
      let row: Row | undefined;
      // A second try when the record was swept (expired) by another node between the two statements: the key is
      // free again, and the insert (a new snapshot) now takes it.
      for (let attempt = 0; attempt < 2 && row === undefined; attempt++) {
        const inserted = await client.query(
          `INSERT INTO idempotency
             (account_id, database_id, key, fingerprint, state, holder, running_until_ms, intent, response, expires_ms)
             VALUES ($1, $2, $3, $4, 'running', $5, $6, NULL, NULL, $7)
             ON CONFLICT (account_id, database_id, key) DO NOTHING`,
          [...where, fingerprint, holder, now + runForMs, now + keepForMs],
        );
        if (inserted.rowCount === 1) return { kind: 'started' };
        const found = await client.query<Row>(
          'SELECT * FROM idempotency WHERE account_id = $1 AND database_id = $2 AND key = $3 FOR UPDATE',
          where,
        );
        row = found.rows[0];
      }
      if (row === undefined) throw unavailable();
      const decision = decide(
        {
          fingerprint: row.fingerprint,
          state: row.state,
          runningUntilMs: Number(row.running_until_ms),
          expiresMs: Number(row.expires_ms),
          intent: row.intent,
          response: row.response,
        },
        fingerprint,
        now,
      );
      if (decision === 'resume') {
        await client.query(
          'UPDATE idempotency SET holder = $4, running_until_ms = $5 WHERE account_id = $1 AND database_id = $2 AND key = $3',
          [...where, holder, now + runForMs],
        );
        return { kind: 'resumed', intent: row.intent };
      }
      if (decision !== 'restart') return decision;
      await client.query(
        `UPDATE idempotency SET fingerprint = $4, state = 'running', holder = $5, running_until_ms = $6, intent = NULL,
           response = NULL, expires_ms = $7 WHERE account_id = $1 AND database_id = $2 AND key = $3`,
        [...where, fingerprint, holder, now + runForMs, now + keepForMs],
      );
      return { kind: 'started' };
    });
  }

  async renewIdempotent(scope: IdempotencyScope, holder: string, runForMs: number): Promise<void> {
    await this.query(
      `UPDATE idempotency SET running_until_ms = ${NOW_MS} + $5
         WHERE account_id = $1 AND database_id = $2 AND key = $3 AND holder = $4 AND state = 'running'`,
      [scope.accountId, scope.databaseId, scope.key, holder, runForMs],
    );
  }

  async recordIntent(scope: IdempotencyScope, holder: string, intent: string): Promise<boolean> {
    const rows = await this.query(
      `UPDATE idempotency SET intent = $5
         WHERE account_id = $1 AND database_id = $2 AND key = $3 AND holder = $4 AND state = 'running' RETURNING key`,
      [scope.accountId, scope.databaseId, scope.key, holder, intent],
    );
    return rows.length === 1;
  }

  async finishIdempotent(scope: IdempotencyScope, holder: string, response: string): Promise<void> {
    await this.query(
      `UPDATE idempotency SET state = 'done', response = $5
         WHERE account_id = $1 AND database_id = $2 AND key = $3 AND holder = $4`,
      [scope.accountId, scope.databaseId, scope.key, holder, response],
    );
  }

  async dropIdempotent(scope: IdempotencyScope, holder: string): Promise<void> {
    await this.query(
      `DELETE FROM idempotency WHERE account_id = $1 AND database_id = $2 AND key = $3 AND holder = $4 AND state = 'running'`,
      [scope.accountId, scope.databaseId, scope.key, holder],
    );
  }
}
