import type { Db } from '../dialect/db.js';
import { now, rowLock, sql } from '../dialect/sql.js';
import type { LeaseResult } from '../store.js';
import { DELETION_STATES } from './databases.js';

/** Upkeep leases: one node at a time runs a table's upkeep, under a lease that lapses when its holder dies. */
export const leases = (db: Db) => ({
  acquire: (tableId: string, holder: string, forMs: number): Promise<LeaseResult> =>
    db.transaction(async (tx): Promise<LeaseResult> => {
      // The table's catalog row is held (KEY SHARE, which no write of the table waits for) while the lease is
      // taken: a drop waits for this transaction, and then ends the lease it took (`deleteTable`).
      const live = await tx.get(
        sql`SELECT t.table_id FROM tables t JOIN databases d ON d.id = t.database_id
              WHERE t.table_id = ${tableId} AND d.state NOT IN ${DELETION_STATES} ${rowLock('FOR KEY SHARE OF t')}`,
      );
      if (live === undefined) return { held: false, tookOver: false, dropped: true };
      const prior = await tx.get<{ holder: string }>(sql`SELECT holder FROM upkeep_leases WHERE table_id = ${tableId}`);
      // Taken when free, held by `holder` already, or lapsed; the condition is judged on the row the insert meets.
      const taken = await tx.all(
        sql`INSERT INTO upkeep_leases (table_id, holder, expires_ms) VALUES (${tableId}, ${holder}, ${now} + ${forMs})
              ON CONFLICT (table_id) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms
                WHERE upkeep_leases.holder = excluded.holder OR upkeep_leases.expires_ms < ${now}
              RETURNING table_id`,
      );
      const held = taken.length === 1;
      return { held, tookOver: held && prior !== undefined && prior.holder !== holder, dropped: false };
    }),

  /** Unlike `acquire`, holds on through the database's deletion: a purge waits for the pass under way. */
  async renew(tableId: string, holder: string, forMs: number): Promise<boolean> {
    const renewed = await db.run(
      sql`UPDATE upkeep_leases SET expires_ms = ${now} + ${forMs}
            WHERE table_id = ${tableId} AND holder = ${holder} AND expires_ms >= ${now}`,
    );
    return renewed.changes === 1;
  },

  release: async (tableId: string, holder: string): Promise<void> => {
    await db.run(sql`DELETE FROM upkeep_leases WHERE table_id = ${tableId} AND holder = ${holder}`);
  },

  async heldOn(databaseId: string): Promise<number> {
    const row = await db.get<{ n: number | string }>(
      sql`SELECT count(*) AS n FROM upkeep_leases l JOIN tables t ON t.table_id = l.table_id
            WHERE t.database_id = ${databaseId} AND l.expires_ms >= ${now}`,
    );
    return Number(row?.n ?? 0);
  },
});
