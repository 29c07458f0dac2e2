import { admit } from '../engine/workers/gate.js';
import type { DatabaseWorker } from '../engine/workers/worker.js';
import type { AppContext } from './context.js';

/**
 * Runs `work` with the account's database's worker held (404 for a database the account does not have; the
 * gate decides 409 and 503), releasing it however `work` ends.
 */
export async function withWorker<T>(
  ctx: AppContext,
  accountId: string,
  database: string,
  work: (worker: DatabaseWorker) => Promise<T>,
): Promise<T> {
  const lease = await admit(ctx.workers, await ctx.databases.get(accountId, database));
  try {
    return await work(lease.worker);
  } finally {
    lease.release();
  }
}
