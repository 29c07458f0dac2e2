import type { DatabaseState, DeletionState } from '../contract/databases.js';
import type { ControlEvents } from './events.js';
import { type ControlStore, type DatabaseRecord, isBeingDeleted } from './store.js';

/** What the lifecycle asks of whoever runs this node's workers. */
export interface WorkerPlacement {
  activate(db: DatabaseRecord): void;
  release(id: string): Promise<void>;
  /** Takes the database out of service before it is deleted; `end` says whether it was. */
  retire(id: string, drainMs: number): Promise<(deleted: boolean) => void>;
  /** The databases with a worker placed here. */
  placedIds(): string[];
}

/** Where the lifecycle reports what failed in the background. */
export interface LifecycleLog {
  error(details: Record<string, unknown>, message: string): void;
}

/** How long calls on a database being deleted get to finish before its worker closes under them. */
export const DRAIN_MS = 10_000;

/** A database as the API shows it: never one whose deletion began. */
export type ListedDatabase = DatabaseRecord & { state: DatabaseState };

/**
 * Every change of a database's state, one function each: what the control store records, and what this node's
 * workers do about it. The API's calls (`Databases`), the worker pool (a placement) and other nodes' notices
 * (`follow`) all come through here; nothing else changes a database's state.
 *
 * unverified → (verified) activating → (placed) active; any → (verification failed) verify_failed; any →
 * (deletion begun) deleting | purging → (deleted) gone.
 */
export class DatabaseLifecycle {
  constructor(
    private readonly store: ControlStore,
    private readonly workers: WorkerPlacement,
    private readonly log: LifecycleLog,
  ) {}

  /** Registered: unverified until its binding is verified (its data-plane calls are 409 until then). */
  registered(db: ListedDatabase, maxPerAccount: number): Promise<void> {
    return this.store.insertDatabase(db, maxPerAccount);
  }

  /** Its worker was placed on this node: active from now on. */
  placed(id: string): Promise<void> {
    return this.store.markActive(id);
  }

  /** Verification passed: a database that runs keeps its worker; any other one is placed (activating until then). */
  async verified(db: DatabaseRecord): Promise<ListedDatabase> {
    const state = db.state === 'active' ? 'active' : 'activating';
    await this.store.setDatabaseState(db.id, state, null);
    const verified = { ...db, state, lastError: null } satisfies ListedDatabase;
    if (state === 'activating') this.workers.activate(verified);
    return verified;
  }

  /** Verification failed: refused (409, with the reason) until verified again; its worker here goes. */
  async verificationFailed(db: DatabaseRecord, error: string): Promise<void> {
    await this.store.setDatabaseState(db.id, 'verify_failed', error);
    await this.workers.release(db.id);
  }

  /**
   * Its deletion begins: recorded first (from then every node refuses its calls, and hears of it), then this node's
   * calls on it get `DRAIN_MS` to finish and its worker goes. Undefined when the database was gone already;
   * `end` is told whether the deletion then finished.
   */
  async deletionBegun(
    db: DatabaseRecord,
    purge: boolean,
  ): Promise<{ state: DeletionState; end: Promise<(deleted: boolean) => void> } | undefined> {
    const state = await this.store.markDeleting(db.id, purge);
    if (state === undefined) return undefined;
    return { state, end: this.workers.retire(db.id, DRAIN_MS) };
  }

  /** Its deletion finished: the record goes, and with it the name (404 on every node). */
  deleted(db: DatabaseRecord): Promise<void> {
    return this.store.deleteDatabase(db.id);
  }

  /**
   * Follows other nodes' changes: a database deleted there, or whose verification failed there, lets its worker
   * here go at once; a deletion begun there retires it here (calls under way finish, the purge waits for them) and
   * it is never served here again, whatever the deletion's end. After a lost notice (the listener reconnected),
   * every placed worker is checked against the store. Returns the function that stops following.
   */
  follow(events: ControlEvents): () => void {
    const letGo = (id: string) =>
      this.workers
        .release(id)
        .catch((err: unknown) => this.log.error({ err, database: id }, 'letting a worker go failed'));
    const retire = (id: string) =>
      this.workers.retire(id, DRAIN_MS).then(
        (end) => end(true),
        (err: unknown) => this.log.error({ err, database: id }, 'retiring a worker failed'),
      );
    return events.on((event) => {
      if (event.kind === 'database_gone') void letGo(event.databaseId);
      else if (event.kind === 'database_deleting') void retire(event.databaseId);
      else if (event.kind === 'resync')
        for (const id of this.workers.placedIds()) {
          // A deletion begun while the notice was lost is retired here as if heard.
          this.store.databaseState(id).then(
            (state) => (state === undefined ? letGo(id) : isBeingDeleted(state) ? retire(id) : undefined),
            () => undefined,
          );
        }
    });
  }
}
