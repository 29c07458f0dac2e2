import type { DatabaseState, DeletionState } from '../../contract/databases.js';
import { Conflict, Unavailable } from '../../errors.js';
import type { WorkerPool } from './pool.js';
import type { DatabaseRef, Lease } from './worker.js';

/** A database as the gate needs it: what the worker serves, and the state the control store holds. */
export interface GatedDatabase extends DatabaseRef {
  state: DatabaseState | DeletionState;
  /** Why the last verification failed, for the 409 a data-plane call gets meanwhile. */
  lastError: string | null;
}

/** The answer to a call on a database while it is being deleted. */
export const deleting = (name: string): Unavailable =>
  new Unavailable(`database "${name}" is being deleted`, { retryAfterS: 1, code: 'database_deleting' });

/**
 * The one gate of every data-plane call: a database in a state that serves (409 naming the fix otherwise), with
 * a worker placed and held for the call (503 + Retry-After while activating or when no capacity is free). The
 * caller releases the lease when its response is done.
 */
export async function admit(workers: WorkerPool, db: GatedDatabase): Promise<Lease> {
  if (workers.isRetiring(db.id)) throw deleting(db.name);
  switch (db.state) {
    case 'unverified':
      throw new Conflict(
        `database "${db.name}" is not verified yet: call POST /v1/databases/${db.name}/storage/verify first`,
        { code: 'database_not_verified' },
      );
    case 'verify_failed':
      throw new Conflict(
        `database "${db.name}" failed its last storage verification (${db.lastError ?? 'unknown error'}); fix the grant and verify again`,
        { code: 'database_verify_failed' },
      );
    case 'activating': {
      // Placement was started by verification; until it lands the caller is asked to come back.
      const placed = workers.leaseIfPlaced(db.id);
      if (placed !== undefined) return placed;
      workers.activate(db);
      throw new Unavailable(`the workers of database "${db.name}" are activating`, {
        retryAfterS: 1,
        code: 'database_activating',
      });
    }
    case 'active':
      // An idle worker may have been let go; placing it again is quick unless the node is full (503).
      return workers.acquire(db);
    case 'deleting':
    case 'purging':
      // Read from the store on every call: a deletion begun on any node refuses calls on every node at once.
      throw deleting(db.name);
  }
}
