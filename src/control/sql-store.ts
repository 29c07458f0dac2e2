import type { DatabaseState } from '../contract/databases.js';
import type { FoldedKind, Folds, TableRecord, TextIndexState } from '../engine/tables/catalog.js';
import type { Db } from './dialect/db.js';
import { sql } from './dialect/sql.js';
import type { ControlEvents } from './events.js';
import type { IdempotencyBegin, IdempotencyScope } from './idempotency.js';
import { accounts } from './queries/accounts.js';
import { databases, verifications } from './queries/databases.js';
import { idempotency } from './queries/idempotency.js';
import { keys } from './queries/keys.js';
import { leases } from './queries/leases.js';
import { tables } from './queries/tables.js';
import type {
  Account,
  ApiKeyListing,
  ApiKeyRecord,
  ControlStore,
  DatabaseRecord,
  DeletionState,
  LeaseResult,
  StoredDatabaseState,
} from './store.js';

/** The queries of every table group over one database. */
const queries = (db: Db) => ({
  accounts: accounts(db),
  keys: keys(db),
  databases: databases(db),
  verifications: verifications(db),
  tables: tables(db),
  leases: leases(db),
  idempotency: idempotency(db),
});

/**
 * The control store, written once over either database. What differs between the two stores sits around it:
 * PostgreSQL's listener and key cache (`postgres.ts`), SQLite's relaxed commits and their fsync (`sqlite.ts`).
 */
export abstract class SqlControlStore implements ControlStore {
  abstract readonly events: ControlEvents;
  abstract readonly shared: boolean;
  private readonly q: ReturnType<typeof queries>;
  /**
   * The writes every keyed write, lease and row-key reservation makes. On SQLite they commit without an fsync of
   * their own, and last a power cut once `durable` resolved; on PostgreSQL they are the same as the others.
   */
  private readonly onRequestPath: ReturnType<typeof queries>;

  protected constructor(
    private readonly db: Db,
    requestPath: Db = db,
  ) {
    this.q = queries(db);
    this.onRequestPath = requestPath === db ? this.q : queries(requestPath);
  }

  abstract close(): Promise<void>;
  abstract durable(): Promise<void>;

  async ping(): Promise<void> {
    await this.db.get(sql`SELECT 1 AS one`);
  }

  ensureAccount(name: string): Promise<Account> {
    return this.q.accounts.ensure(name);
  }

  findAccount(id: string): Promise<Account | undefined> {
    return this.q.accounts.find(id);
  }

  insertKey(key: ApiKeyRecord): Promise<void> {
    return this.q.keys.insert(key);
  }

  findKeyByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    return this.q.keys.findByHash(hash);
  }

  listKeys(): Promise<ApiKeyListing[]> {
    return this.q.keys.list();
  }

  revokeKey(id: string, nowMs: number): Promise<boolean> {
    return this.q.keys.revoke(id, nowMs);
  }

  countKeys(): Promise<number> {
    return this.q.keys.count();
  }

  insertFirstKey(key: ApiKeyRecord): Promise<boolean> {
    return this.q.keys.insertFirst(key);
  }

  insertDatabase(db: DatabaseRecord, maxPerAccount: number): Promise<void> {
    return this.q.databases.insert(db, maxPerAccount);
  }

  findDatabase(accountId: string, name: string): Promise<DatabaseRecord | undefined> {
    return this.q.databases.find(accountId, name);
  }

  listDatabases(accountId: string): Promise<DatabaseRecord[]> {
    return this.q.databases.list(accountId);
  }

  databaseExists(id: string): Promise<boolean> {
    return this.q.databases.exists(id);
  }

  databaseState(id: string): Promise<StoredDatabaseState | undefined> {
    return this.q.databases.state(id);
  }

  markActive(id: string): Promise<void> {
    return this.q.databases.markActive(id);
  }

  setDatabaseState(id: string, state: DatabaseState, lastError: string | null): Promise<void> {
    return this.q.databases.setState(id, state, lastError);
  }

  markDeleting(id: string, purge: boolean): Promise<DeletionState | undefined> {
    return this.q.databases.markDeleting(id, purge);
  }

  upkeepLeasesHeld(databaseId: string): Promise<number> {
    return this.q.leases.heldOn(databaseId);
  }

  claimVerification(id: string, forMs: number): Promise<boolean> {
    return this.q.verifications.claim(id, forMs);
  }

  releaseVerification(id: string): Promise<void> {
    return this.q.verifications.release(id);
  }

  deleteDatabase(id: string): Promise<void> {
    return this.q.databases.delete(id);
  }

  writtenTables(databaseId: string): Promise<string[]> {
    return this.q.databases.writtenTables(databaseId);
  }

  insertTable(table: TableRecord): Promise<void> {
    return this.q.tables.insert(table);
  }

  findTable(databaseId: string, name: string): Promise<TableRecord | undefined> {
    return this.q.tables.find(databaseId, name);
  }

  listTables(databaseId: string): Promise<TableRecord[]> {
    return this.q.tables.list(databaseId);
  }

  setTableState(tableId: string, state: TableRecord['state']): Promise<void> {
    return this.q.tables.setState(tableId, state);
  }

  deleteTable(tableId: string): Promise<boolean> {
    return this.q.tables.delete(tableId);
  }

  /** One node uses this store alone (the embedded default): its table's write queue already orders the writes. */
  async holdKeys(_tableId: string): Promise<() => Promise<void>> {
    return async () => undefined;
  }

  reserveRowKeys(tableId: string, count: number): Promise<bigint> {
    return this.onRequestPath.tables.reserveRowKeys(tableId, count);
  }

  acquireLease(tableId: string, holder: string, forMs: number): Promise<LeaseResult> {
    // A lease a power cut loses has lapsed by the restart anyway.
    return this.onRequestPath.leases.acquire(tableId, holder, forMs);
  }

  renewLease(tableId: string, holder: string, forMs: number): Promise<boolean> {
    return this.onRequestPath.leases.renew(tableId, holder, forMs);
  }

  releaseLease(tableId: string, holder: string): Promise<void> {
    return this.onRequestPath.leases.release(tableId, holder);
  }

  recordUpkeep(tableId: string, atMs: number): Promise<void> {
    return this.q.tables.upkept(tableId, atMs);
  }

  recordFold(tableId: string, kinds: readonly FoldedKind[], version: number): Promise<void> {
    // Lost in a power cut, a fold only leaves other nodes following more rows than they need.
    return this.onRequestPath.tables.folded(tableId, kinds, version);
  }

  foldsOf(tableId: string): Promise<Folds> {
    return this.onRequestPath.tables.folds(tableId);
  }

  recordTextIndex(tableId: string, event: 'removed' | 'rebuilt', version: number): Promise<void> {
    return this.onRequestPath.tables.textIndex(tableId, event, version);
  }

  textIndexStateOf(tableId: string): Promise<TextIndexState> {
    return this.onRequestPath.tables.textIndexState(tableId);
  }

  async beginIdempotent(
    scope: IdempotencyScope,
    fingerprint: string,
    holder: string,
    runForMs: number,
    keepForMs: number,
  ): Promise<IdempotencyBegin> {
    // Its own statement, before the claim's transaction: the records it deletes are not held while the claim runs.
    // A claim lost to a power cut recorded no intent (that would have been made durable), so nothing was written.
    await this.onRequestPath.idempotency.sweep();
    return this.onRequestPath.idempotency.begin(scope, fingerprint, holder, runForMs, keepForMs);
  }

  renewIdempotent(scope: IdempotencyScope, holder: string, runForMs: number): Promise<void> {
    return this.onRequestPath.idempotency.renew(scope, holder, runForMs);
  }

  recordIntent(scope: IdempotencyScope, holder: string, intent: string): Promise<boolean> {
    return this.onRequestPath.idempotency.recordIntent(scope, holder, intent);
  }

  finishIdempotent(scope: IdempotencyScope, holder: string, response: string): Promise<void> {
    // An answer lost to a power cut is found again from the intent, which was durable before the commit.
    return this.onRequestPath.idempotency.finish(scope, holder, response);
  }

  dropIdempotent(scope: IdempotencyScope, holder: string): Promise<void> {
    // A claim left without an intent is taken over by a retry once its hold lapses.
    return this.onRequestPath.idempotency.drop(scope, holder);
  }
}
