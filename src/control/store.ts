import type { DatabaseState, DeletionState } from '../contract/databases.js';
import type { CatalogStore } from '../engine/tables/catalog.js';
import type { WriteLedger } from '../engine/writes/service.js';
import { Unavailable } from '../errors.js';
import type { Binding } from '../storage/binding.js';
import type { ControlEvents } from './events.js';

export interface Account {
  id: string;
  name: string;
  /** Passed as `ExternalId` when the service assumes a customer's role: the trust policy names it (docs/api.md). */
  externalId: string;
}

export interface ApiKeyRecord {
  id: string;
  accountId: string;
  /** Hex SHA-256 of the whole key; the key itself is never stored. */
  hash: string;
  createdMs: number;
  revokedMs: number | null;
}

export interface ApiKeyListing extends ApiKeyRecord {
  accountName: string;
}

export type { DeletionState };

/**
 * A deletion state is recorded before anything is deleted, seen by every node at once (each request reads the
 * state), and never left but by the record's deletion; the next DELETE resumes it.
 */
export type StoredDatabaseState = DatabaseState | DeletionState;

export const isBeingDeleted = (state: StoredDatabaseState): state is DeletionState =>
  state === 'deleting' || state === 'purging';

/** The deletion states as an SQL list, for statements that must not touch a database being deleted. */
export const DELETION_STATES_SQL = "('deleting', 'purging')";

/** What the store answers a write (or a table creation) that reaches a database whose deletion began. */
export const beingDeleted = (): Unavailable =>
  new Unavailable('the database is being deleted', { retryAfterS: 1, code: 'database_deleting' });

export interface DatabaseRecord {
  id: string;
  accountId: string;
  name: string;
  createdMs: number;
  state: StoredDatabaseState;
  binding: Binding;
  /** Why the last verification failed, for the 409 a data-plane call gets meanwhile. */
  lastError: string | null;
}

/**
 * Whether a node now holds a table's upkeep lease, whether it took it from another node whose lease ran out, and
 * whether the table left the catalog (dropped, on any node): its lease is never taken again.
 */
export interface LeaseResult {
  held: boolean;
  tookOver: boolean;
  dropped: boolean;
}

/**
 * The control store: accounts, keys, databases and (from the tables issue on) each database's catalog.
 * Async throughout so that the embedded SQLite store and a PostgreSQL store are interchangeable.
 */
export interface ControlStore extends CatalogStore, WriteLedger {
  /** What other nodes changed (and, for the embedded store, this process). */
  readonly events: ControlEvents;
  /** Throws when the store cannot answer; `/readyz` uses it. */
  ping(): Promise<void>;
  close(): Promise<void>;

  /** Returns the account of that name, creating it when missing. */
  ensureAccount(name: string): Promise<Account>;
  insertKey(key: ApiKeyRecord): Promise<void>;
  findKeyByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  listKeys(): Promise<ApiKeyListing[]>;
  /** True when a live key of that id was revoked now. */
  revokeKey(id: string, nowMs: number): Promise<boolean>;
  countKeys(): Promise<number>;
  /**
   * Stores the key only if the store holds no key at all, atomically across every node (nodes started together
   * on an empty store all try it): true for the one call that stored it.
   */
  insertFirstKey(key: ApiKeyRecord): Promise<boolean>;

  findAccount(id: string): Promise<Account | undefined>;

  /**
   * Registers a database, atomically with its checks: `Conflict` when the account already has a database of
   * that name, `Conflict` (`location_in_use`) when any database of any account binds the same or an
   * overlapping storage location, `LimitExceeded` when the account holds `maxPerAccount` databases already.
   */
  insertDatabase(db: DatabaseRecord, maxPerAccount: number): Promise<void>;
  findDatabase(accountId: string, name: string): Promise<DatabaseRecord | undefined>;
  listDatabases(accountId: string): Promise<DatabaseRecord[]>;
  databaseExists(id: string): Promise<boolean>;
  /** The database's state; undefined once it is gone. */
  databaseState(id: string): Promise<StoredDatabaseState | undefined>;
  /**
   * Marks a database whose worker was placed `active`, unless meanwhile it left `activating` (a verification that
   * failed on another node must not be undone by a placement that raced it).
   */
  markActive(id: string): Promise<void>;
  /** Sets the state of a database, unless its deletion began: that is never undone. */
  setDatabaseState(id: string, state: DatabaseState, lastError: string | null): Promise<void>;
  /**
   * Records that the database's deletion began (`purging` when `purge`, or when an earlier purge began), before
   * anything is deleted, and tells every node (`database_deleting`). From its commit, row keys are not reserved
   * and tables not created for it (503 `database_deleting`), and no upkeep lease is taken on its tables. Answers
   * the state now recorded; undefined when the database is gone already.
   */
  markDeleting(id: string, purge: boolean): Promise<DeletionState | undefined>;
  /** Whether several nodes may use this store at once (PostgreSQL), each admitting calls of its own. */
  readonly shared: boolean;
  /**
   * Upkeep leases held, and not run out, on the database's tables: upkeep that may still be writing to them. A
   * node hands its leases back when its upkeep stops, and a lease is not renewed once the deletion is recorded.
   */
  upkeepLeasesHeld(databaseId: string): Promise<number>;
  /**
   * Claims the database's verification for `forMs` (one at a time across every node): false while another
   * claim holds. The claim lapses by itself, so a node that died verifying does not block the next one.
   */
  claimVerification(id: string, forMs: number): Promise<boolean>;
  releaseVerification(id: string): Promise<void>;
  deleteDatabase(id: string): Promise<void>;
  /** The Lance datasets a database ever created, dropped ones included: what purge may delete. */
  writtenTables(databaseId: string): Promise<string[]>;

  /**
   * Takes or renews the upkeep lease of a table for `holder` for `forMs` (one node at a time): held when no one
   * holds it, `holder` already does, or the last holder's lease ran out (a takeover); never for a table the
   * catalog no longer holds. Dropping a table (`deleteTable`, `deleteDatabase`) ends its lease with it.
   */
  acquireLease(tableId: string, holder: string, forMs: number): Promise<LeaseResult>;
  /**
   * Extends a lease `holder` still holds, for the pass it is running: true if it did. Unlike `acquireLease` it
   * holds on through the database's deletion, so that a purge waits for the pass to end rather than delete under
   * it (`upkeepLeasesHeld`); a lease that lapsed or went with its table is not taken again.
   */
  renewLease(tableId: string, holder: string, forMs: number): Promise<boolean>;
  releaseLease(tableId: string, holder: string): Promise<void>;
  /** Upkeep committed work on the table at `atMs` (its catalog entry's `upkeepMs`). */
  recordUpkeep(tableId: string, atMs: number): Promise<void>;
}
