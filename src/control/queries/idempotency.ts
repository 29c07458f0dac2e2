import { type Db, unavailable } from '../dialect/db.js';
import { now, rowLock, sql } from '../dialect/sql.js';
import { decide, type IdempotencyBegin, type IdempotencyScope } from '../idempotency.js';

/**
 * Expired idempotency records one claim deletes at most. Each keyed write adds one record and sweeps up to this
 * many, so the sweep outpaces the growth while no claim pays for a backlog of any size at once.
 */
export const IDEMPOTENCY_SWEEP_BATCH = 100;

/** Milliseconds as a store answers them (PostgreSQL answers BIGINT as a string). */
type Ms = number | string;

interface IdempotencyRow {
  fingerprint: string;
  state: 'running' | 'done';
  running_until_ms: Ms;
  expires_ms: Ms;
  intent: string | null;
  response: string | null;
}

const key = (scope: IdempotencyScope) =>
  sql`account_id = ${scope.accountId} AND database_id = ${scope.databaseId} AND key = ${scope.key}`;

export const idempotency = (db: Db) => ({
  /**
   * Deletes up to `IDEMPOTENCY_SWEEP_BATCH` expired records, oldest first. An expired record would be started
   * afresh by the next request with its key anyway (`decide`), so deleting it changes no answer; unresolved ones
   * are the exception, as `decide` says: a request still running under its key (its intent and answer must find
   * the record) stays until its hold lapses, and one whose node died after recording its intent stays until a
   * retry finds out whether it landed. Nodes sweeping at once skip each other's rows (and a claim's) on
   * PostgreSQL, rather than wait.
   */
  sweep: (): Promise<unknown> =>
    db.run(
      sql`DELETE FROM idempotency WHERE (account_id, database_id, key) IN (
            SELECT account_id, database_id, key FROM idempotency
              WHERE expires_ms < ${now} AND (state = 'done' OR (running_until_ms < ${now} AND intent IS NULL))
              ORDER BY expires_ms LIMIT ${IDEMPOTENCY_SWEEP_BATCH} ${rowLock('FOR UPDATE SKIP LOCKED')})`,
    ),

  /** Claims the key, or says what its record decides; atomic across nodes. */
  begin: (
    scope: IdempotencyScope,
    fingerprint: string,
    holder: string,
    runForMs: number,
    keepForMs: number,
  ): Promise<IdempotencyBegin> =>
    db.transaction(async (tx): Promise<IdempotencyBegin> => {
      const clock = await tx.get<{ now: Ms }>(sql`SELECT ${now} AS now`);
      const at = Number(clock?.now ?? Date.now());
      let row: IdempotencyRow | undefined;
      // A second try when the record was swept (expired) by another node between the two statements: the key is
      // free again, and the insert (a new snapshot) now takes it.
      for (let attempt = 0; attempt < 2 && row === undefined; attempt++) {
        const inserted = await tx.run(
          sql`INSERT INTO idempotency
                (account_id, database_id, key, fingerprint, state, holder, running_until_ms, intent, response,
                 expires_ms)
                VALUES (${scope.accountId}, ${scope.databaseId}, ${scope.key}, ${fingerprint}, 'running', ${holder},
                        ${at + runForMs}, NULL, NULL, ${at + keepForMs})
                ON CONFLICT (account_id, database_id, key) DO NOTHING`,
        );
        if (inserted.changes === 1) return { kind: 'started' };
        row = await tx.get<IdempotencyRow>(sql`SELECT * FROM idempotency WHERE ${key(scope)} ${rowLock('FOR UPDATE')}`);
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
        at,
      );
      if (decision === 'resume') {
        await tx.run(
          sql`UPDATE idempotency SET holder = ${holder}, running_until_ms = ${at + runForMs} WHERE ${key(scope)}`,
        );
        return { kind: 'resumed', intent: row.intent };
      }
      if (decision !== 'restart') return decision;
      await tx.run(
        sql`UPDATE idempotency SET fingerprint = ${fingerprint}, state = 'running', holder = ${holder},
              running_until_ms = ${at + runForMs}, intent = NULL, response = NULL, expires_ms = ${at + keepForMs}
              WHERE ${key(scope)}`,
      );
      return { kind: 'started' };
    }),

  renew: async (scope: IdempotencyScope, holder: string, runForMs: number): Promise<void> => {
    await db.run(
      sql`UPDATE idempotency SET running_until_ms = ${now} + ${runForMs}
            WHERE ${key(scope)} AND holder = ${holder} AND state = 'running'`,
    );
  },

  async recordIntent(scope: IdempotencyScope, holder: string, intent: string): Promise<boolean> {
    const recorded = await db.run(
      sql`UPDATE idempotency SET intent = ${intent} WHERE ${key(scope)} AND holder = ${holder} AND state = 'running'`,
    );
    return recorded.changes === 1;
  },

  finish: async (scope: IdempotencyScope, holder: string, response: string): Promise<void> => {
    await db.run(
      sql`UPDATE idempotency SET state = 'done', response = ${response} WHERE ${key(scope)} AND holder = ${holder}`,
    );
  },

  drop: async (scope: IdempotencyScope, holder: string): Promise<void> => {
    await db.run(sql`DELETE FROM idempotency WHERE ${key(scope)} AND holder = ${holder} AND state = 'running'`);
  },
});
