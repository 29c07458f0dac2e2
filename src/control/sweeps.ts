// What both control stores delete because nothing will ask for it again, written once for both dialects.

/**
 * Expired idempotency records one claim deletes at most. Each keyed write adds one record and sweeps up to this
 * many, so the sweep outpaces the growth while no claim pays for a backlog of any size at once.
 */
export const IDEMPOTENCY_SWEEP_BATCH = 100;

/**
 * Deletes up to `IDEMPOTENCY_SWEEP_BATCH` expired idempotency records, at `now` (a placeholder or a clock
 * expression of the dialect), oldest first. An expired record would be started afresh by the next request with
 * its key anyway (`decide`), so deleting it changes no answer; unresolved ones are the exception, as `decide`
 * says: a request still running under its key (its intent and answer must find the record) stays until its hold
 * lapses, and one whose node died after recording its intent stays until a retry finds out whether it landed. `lock` is PostgreSQL's `FOR UPDATE SKIP LOCKED`: nodes sweeping at once never wait for each
 * other, nor for a claim that holds a record.
 */
export const sweepExpiredIdempotency = (now: string, lock: '' | 'FOR UPDATE SKIP LOCKED'): string =>
  `DELETE FROM idempotency WHERE (account_id, database_id, key) IN (
     SELECT account_id, database_id, key FROM idempotency
       WHERE expires_ms < ${now} AND (state = 'done' OR (running_until_ms < ${now} AND intent IS NULL))
       ORDER BY expires_ms LIMIT ${IDEMPOTENCY_SWEEP_BATCH} ${lock})`;

/**
 * A migration: the upkeep leases of tables no longer in the catalog, which drops before leases ended with their
 * table left behind for good.
 */
export const DROP_ORPHANED_LEASES = 'DELETE FROM upkeep_leases WHERE table_id NOT IN (SELECT table_id FROM tables);';
