import type { DatabaseWorker, Lease } from '../engine/workers.js';
import { Conflict, Unavailable } from '../errors.js';
import type { AppContext } from './context.js';

/**
 * The one gate of every data-plane route: the account's database (404 otherwise), in a state that serves
 * (409 naming the fix), with a worker placed and held for the request (503 + Retry-After while activating
 * or when no capacity is free). The caller releases the lease when the response is done.
 */
export async function openDatabase(ctx: AppContext, accountId: string, name: string): Promise<Lease> {
  const db = await ctx.databases.get(accountId, name);
  switch (db.state) {
    case 'unverified':
      throw new Conflict(
        `database "${name}" is not verified yet: call POST /v1/databases/${name}/storage/verify first`,
        undefined,
        'database_not_verified',
      );
    case 'verify_failed':
      throw new Conflict(
        `database "${name}" failed its last storage verification (${db.lastError ?? 'unknown error'}); fix the grant and verify again`,
        undefined,
        'database_verify_failed',
      );
    case 'activating': {
      // Placement was started by verification; until it lands the caller is asked to come back.
      const placed = ctx.workers.leaseIfPlaced(db.id);
      if (placed !== undefined) return placed;
      ctx.workers.activate(db);
      throw new Unavailable(`the workers of database "${name}" are activating`, 1, 'database_activating');
    }
    case 'active':
      // An idle worker may have been let go; placing it again is quick unless the node is full (503).
      return ctx.workers.acquire(db);
  }
}

/** Runs `work` with the database's worker held, releasing it however `work` ends. */
export async function withWorker<T>(
  ctx: AppContext,
  accountId: string,
  database: string,
  work: (worker: DatabaseWorker) => Promise<T>,
): Promise<T> {
  const lease = await openDatabase(ctx, accountId, database);
  try {
    return await work(lease.worker);
  } finally {
    lease.release();
  }
}
