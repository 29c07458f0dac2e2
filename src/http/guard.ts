import { admit, deleting, type GatedDatabase } from '../engine/workers/gate.js';
import type { DatabaseWorker } from '../engine/workers/worker.js';
import { NotFound, StrataError } from '../errors.js';
import type { AppContext } from './context.js';

/** Codes of errors that a database deleted under a call can cause (its files gone), besides faults of the engines. */
const GONE_CODES = new Set(['unknown_table', 'sql_engine_closing', 'storage_unavailable']);

/**
 * Runs `work` with the account's database's worker held (404 for a database the account does not have; the
 * gate decides 409 and 503), releasing it however `work` ends. A call that raced the database's deletion is
 * answered as the deletion: 503 `database_deleting` while it runs here, 404 once it is gone, never the error of
 * an engine whose tables went away underneath.
 */
export async function withWorker<T>(
  ctx: AppContext,
  accountId: string,
  database: string,
  work: (worker: DatabaseWorker) => Promise<T>,
): Promise<T> {
  const db = await ctx.databases.get(accountId, database);
  const lease = await admit(ctx.workers, db);
  try {
    return await work(lease.worker);
  } catch (err) {
    return await answeredAsDeletion(ctx, accountId, database, db, err);
  } finally {
    lease.release();
  }
}

/**
 * `withWorker` for a write: its answer is given only if the database was still there once it committed. A purge
 * deletes a database's files once every node has had its drain time; a commit that the bucket delayed beyond
 * that lands in files already deleted, and is answered as the deletion (503 or 404), never acknowledged. When the
 * control store cannot be asked, this node's own notice of a deletion decides: a write that committed is not
 * refused for an outage (its client would send it again).
 */
export function withWriter<T>(
  ctx: AppContext,
  accountId: string,
  database: string,
  work: (worker: DatabaseWorker) => Promise<T>,
): Promise<T> {
  return withWorker(ctx, accountId, database, async (worker) => {
    const result = await work(worker);
    const now = await ctx.databases.get(accountId, database).catch((err: unknown) => {
      if (err instanceof NotFound) throw err;
      return undefined;
    });
    if (now === undefined) {
      if (ctx.workers.isRetiring(worker.ref.id)) throw deleting(worker.ref.name);
      return result;
    }
    if (now.id !== worker.ref.id) throw new NotFound(`database "${database}"`, { code: 'unknown_database' });
    if (now.state === 'deleting' || now.state === 'purging') throw deleting(now.name);
    return result;
  });
}

/** The error a failed call answers: its own, or the database's deletion when that is what failed it. */
async function answeredAsDeletion(
  ctx: AppContext,
  accountId: string,
  database: string,
  db: { id: string; name: string },
  err: unknown,
): Promise<never> {
  if (err instanceof StrataError && !GONE_CODES.has(err.code)) throw err;
  if (ctx.workers.isRetiring(db.id)) throw deleting(db.name);
  let now: { id: string; state: GatedDatabase['state'] };
  try {
    now = await ctx.databases.get(accountId, database);
  } catch (lookup) {
    throw lookup instanceof NotFound ? lookup : err;
  }
  // Deleted and made again under its name: the call's database is gone all the same.
  if (now.id !== db.id) throw new NotFound(`database "${database}"`, { code: 'unknown_database' });
  // Its deletion began on another node, whose purge may have taken the files this call was reading.
  if (now.state === 'deleting' || now.state === 'purging') throw deleting(db.name);
  throw err;
}
