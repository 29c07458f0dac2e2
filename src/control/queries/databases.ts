import type { DatabaseState } from '../../contract/databases.js';
import { Conflict } from '../../errors.js';
import type { Binding } from '../../storage/binding.js';
import { assertLocationFree, databaseLimit } from '../claims.js';
import type { Db } from '../dialect/db.js';
import { now, raw, rowLock, sql } from '../dialect/sql.js';
import { type DatabaseRow, databaseFromRow } from '../records.js';
import { type DatabaseRecord, DELETION_STATES_SQL, type DeletionState, type StoredDatabaseState } from '../store.js';

/** Key of the lock under which databases are registered one at a time on every node: the check reads every binding. */
const REGISTRATION_LOCK = 0x5354_5242;

export const DELETION_STATES = raw(DELETION_STATES_SQL);

export const databases = (db: Db) => ({
  insert: (record: DatabaseRecord, maxPerAccount: number): Promise<void> =>
    db.transaction(async (tx) => {
      await tx.lock(REGISTRATION_LOCK);
      const named = await tx.get(
        sql`SELECT 1 AS one FROM databases WHERE account_id = ${record.accountId} AND name = ${record.name}`,
      );
      if (named !== undefined) {
        throw new Conflict(`database "${record.name}" is already registered`, { code: 'database_exists' });
      }
      const held = await tx.get<{ n: number | string }>(
        sql`SELECT count(*) AS n FROM databases WHERE account_id = ${record.accountId}`,
      );
      const count = Number(held?.n ?? 0);
      if (count >= maxPerAccount) throw databaseLimit(count);
      const others = await tx.all<{ binding: string }>(sql`SELECT binding FROM databases`);
      assertLocationFree(
        record.binding,
        others.map((row) => JSON.parse(row.binding) as Binding),
      );
      await tx.run(
        sql`INSERT INTO databases (id, account_id, name, created_ms, state, binding, last_error)
              VALUES (${record.id}, ${record.accountId}, ${record.name}, ${record.createdMs}, ${record.state},
                      ${JSON.stringify(record.binding)}, ${record.lastError})`,
      );
    }),

  async find(accountId: string, name: string): Promise<DatabaseRecord | undefined> {
    const row = await db.get<DatabaseRow>(
      sql`SELECT * FROM databases WHERE account_id = ${accountId} AND name = ${name}`,
    );
    return row === undefined ? undefined : databaseFromRow(row);
  },

  async list(accountId: string): Promise<DatabaseRecord[]> {
    const rows = await db.all<DatabaseRow>(sql`SELECT * FROM databases WHERE account_id = ${accountId} ORDER BY name`);
    return rows.map(databaseFromRow);
  },

  async exists(id: string): Promise<boolean> {
    return (await db.get(sql`SELECT 1 AS one FROM databases WHERE id = ${id}`)) !== undefined;
  },

  async state(id: string): Promise<StoredDatabaseState | undefined> {
    return (await db.get<{ state: StoredDatabaseState }>(sql`SELECT state FROM databases WHERE id = ${id}`))?.state;
  },

  /** Unless its deletion began; a database whose verification failed is let go by every node. */
  setState: (id: string, state: DatabaseState, lastError: string | null): Promise<void> =>
    db.transaction(async (tx) => {
      const set = await tx.run(
        sql`UPDATE databases SET state = ${state}, last_error = ${lastError}
              WHERE id = ${id} AND state NOT IN ${DELETION_STATES}`,
      );
      if (state === 'verify_failed' && set.changes === 1) await tx.notify({ kind: 'database_gone', databaseId: id });
    }),

  markActive: async (id: string): Promise<void> => {
    await db.run(
      sql`UPDATE databases SET state = 'active', last_error = NULL WHERE id = ${id} AND state IN ('activating', 'active')`,
    );
  },

  /** The notice goes with the commit: a node hears of the deletion only once the state says it. */
  markDeleting: (id: string, purge: boolean): Promise<DeletionState | undefined> =>
    db.transaction(async (tx) => {
      const [marked] = await tx.all<{ state: DeletionState }>(
        sql`UPDATE databases SET state = CASE WHEN ${purge} OR state = 'purging' THEN 'purging' ELSE 'deleting' END
              WHERE id = ${id} RETURNING state`,
      );
      if (marked !== undefined) await tx.notify({ kind: 'database_deleting', databaseId: id });
      return marked?.state;
    }),

  delete: (id: string): Promise<void> =>
    db.transaction(async (tx) => {
      // Locked first, so that a lease taken meanwhile (`acquireLease` holds its table's row) has committed, and
      // is seen, by the statement that ends the tables' leases.
      await tx.all(sql`SELECT 1 AS one FROM tables WHERE database_id = ${id} ${rowLock('FOR UPDATE')}`);
      await tx.run(
        sql`DELETE FROM upkeep_leases WHERE table_id IN (SELECT table_id FROM tables WHERE database_id = ${id})`,
      );
      await tx.run(sql`DELETE FROM written_tables WHERE database_id = ${id}`);
      await tx.run(sql`DELETE FROM databases WHERE id = ${id}`);
      await tx.notify({ kind: 'database_gone', databaseId: id });
    }),

  async writtenTables(databaseId: string): Promise<string[]> {
    const rows = await db.all<{ table_id: string }>(
      sql`SELECT table_id FROM written_tables WHERE database_id = ${databaseId} ORDER BY table_id`,
    );
    return rows.map((row) => row.table_id);
  },
});

/** One verification of a database at a time on every node, under a claim that lapses by itself. */
export const verifications = (db: Db) => ({
  async claim(id: string, forMs: number): Promise<boolean> {
    const claimed = await db.run(
      sql`UPDATE databases SET verifying_until_ms = ${now} + ${forMs}
            WHERE id = ${id} AND (verifying_until_ms IS NULL OR verifying_until_ms < ${now})`,
    );
    return claimed.changes === 1;
  },

  release: async (id: string): Promise<void> => {
    await db.run(sql`UPDATE databases SET verifying_until_ms = NULL WHERE id = ${id}`);
  },
});
