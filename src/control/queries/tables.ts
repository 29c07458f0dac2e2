import type { FoldedKind, Folds, TableRecord, TextIndexState } from '../../engine/tables/catalog.js';
import { type Db, isUniqueViolation } from '../dialect/db.js';
import { rowLock, sql } from '../dialect/sql.js';
import { type TableRow, tableExists, tableFromRow } from '../records.js';
import { beingDeleted, isBeingDeleted, type StoredDatabaseState } from '../store.js';
import { DELETION_STATES } from './databases.js';

/** Refuses a change to a database whose deletion began; its state is read in the change's own transaction. */
function assertNotBeingDeleted(state: StoredDatabaseState | undefined): void {
  if (state !== undefined && isBeingDeleted(state)) throw beingDeleted();
}

/** Each database's catalog of tables, and the row keys each table hands out. */
export const tables = (db: Db) => ({
  async insert(table: TableRecord): Promise<void> {
    try {
      await db.transaction(async (tx) => {
        // Held until the table is recorded: a deletion marked meanwhile waits, and then its purge finds the table.
        const owner = await tx.get<{ state: StoredDatabaseState }>(
          sql`SELECT state FROM databases WHERE id = ${table.databaseId} ${rowLock('FOR SHARE')}`,
        );
        assertNotBeingDeleted(owner?.state);
        await tx.run(
          sql`INSERT INTO tables (database_id, name, table_id, schema_ipc, indexes, created_ms, state)
                VALUES (${table.databaseId}, ${table.name}, ${table.tableId}, ${table.schemaIpc}, ${table.indexes},
                        ${table.createdMs}, ${table.state})`,
        );
        // Recorded before the dataset exists, so a purge finds whatever part of it was written.
        await tx.run(
          sql`INSERT INTO written_tables (database_id, table_id) VALUES (${table.databaseId}, ${table.tableId})`,
        );
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw tableExists(table.name);
      throw err;
    }
  },

  async find(databaseId: string, name: string): Promise<TableRecord | undefined> {
    const row = await db.get<TableRow>(sql`SELECT * FROM tables WHERE database_id = ${databaseId} AND name = ${name}`);
    return row === undefined ? undefined : tableFromRow(row);
  },

  async list(databaseId: string): Promise<TableRecord[]> {
    const rows = await db.all<TableRow>(sql`SELECT * FROM tables WHERE database_id = ${databaseId} ORDER BY name`);
    return rows.map(tableFromRow);
  },

  setState: async (tableId: string, state: TableRecord['state']): Promise<void> => {
    await db.run(sql`UPDATE tables SET state = ${state} WHERE table_id = ${tableId}`);
  },

  upkept: async (tableId: string, atMs: number): Promise<void> => {
    await db.run(sql`UPDATE tables SET upkeep_ms = ${atMs} WHERE table_id = ${tableId}`);
  },

  /** Each kind's version moves only forward: folds recorded late, out of order, leave the later one. */
  async folded(tableId: string, kinds: readonly FoldedKind[], version: number): Promise<void> {
    if (kinds.includes('text')) {
      await db.run(
        sql`UPDATE tables SET text_folded_version = ${version}
              WHERE table_id = ${tableId} AND (text_folded_version IS NULL OR text_folded_version < ${version})`,
      );
    }
    if (kinds.includes('vector')) {
      await db.run(
        sql`UPDATE tables SET vector_folded_version = ${version}
              WHERE table_id = ${tableId} AND (vector_folded_version IS NULL OR vector_folded_version < ${version})`,
      );
    }
  },

  /** Moves a table's `text_removed_version` or `text_rebuilt_version` forward to `version`. */
  async textIndex(tableId: string, event: 'removed' | 'rebuilt', version: number): Promise<void> {
    if (event === 'removed') {
      await db.run(
        sql`UPDATE tables SET text_removed_version = ${version}
              WHERE table_id = ${tableId} AND (text_removed_version IS NULL OR text_removed_version < ${version})`,
      );
    } else {
      await db.run(
        sql`UPDATE tables SET text_rebuilt_version = ${version}
              WHERE table_id = ${tableId} AND (text_rebuilt_version IS NULL OR text_rebuilt_version < ${version})`,
      );
    }
  },

  async textIndexState(tableId: string): Promise<TextIndexState> {
    const row = await db.get<{
      text_removed_version: number | string | null;
      text_rebuilt_version: number | string | null;
    }>(sql`SELECT text_removed_version, text_rebuilt_version FROM tables WHERE table_id = ${tableId}`);
    const version = (v: number | string | null | undefined) => (v === null || v === undefined ? undefined : Number(v));
    return { removed: version(row?.text_removed_version), rebuilt: version(row?.text_rebuilt_version) };
  },

  async folds(tableId: string): Promise<Folds> {
    const row = await db.get<{
      text_folded_version: number | string | null;
      vector_folded_version: number | string | null;
    }>(sql`SELECT text_folded_version, vector_folded_version FROM tables WHERE table_id = ${tableId}`);
    const version = (v: number | string | null | undefined) => (v === null || v === undefined ? undefined : Number(v));
    return { text: version(row?.text_folded_version), vector: version(row?.vector_folded_version) };
  },

  /**
   * Two statements: the second sees a lease that an `acquireLease` holding the table's row (which the first waited
   * for) committed meanwhile. Of drops racing on several nodes, the first waits for none and the others wait for
   * its commit and then delete nothing: the row count says which one removed the entry.
   */
  delete: (tableId: string): Promise<boolean> =>
    db.transaction(async (tx) => {
      const deleted = await tx.run(sql`DELETE FROM tables WHERE table_id = ${tableId}`);
      await tx.run(sql`DELETE FROM upkeep_leases WHERE table_id = ${tableId}`);
      return deleted.changes === 1;
    }),

  /**
   * One statement: the table's row lock orders every node's reservations of it, and the database's row is
   * shared-locked as its state is read, so each reservation is wholly before a deletion's mark (which waits for it)
   * or sees it: no write reserves keys once the deletion is recorded.
   */
  async reserveRowKeys(tableId: string, count: number): Promise<bigint> {
    // As text: a row key is an i64, past what a JavaScript number holds exactly.
    const [reserved] = await db.all<{ next: string }>(
      sql`UPDATE tables SET next_row_key = next_row_key + ${count}
            WHERE table_id = ${tableId}
              AND (SELECT d.state FROM databases d WHERE d.id = tables.database_id ${rowLock('FOR SHARE')})
                NOT IN ${DELETION_STATES}
            RETURNING CAST(next_row_key AS TEXT) AS next`,
    );
    if (reserved !== undefined) return BigInt(reserved.next) - BigInt(count);
    // Refused: the database's deletion began (a state it never leaves), or the table is not in the catalog.
    const owner = await db.get<{ state: StoredDatabaseState }>(
      sql`SELECT d.state FROM tables t JOIN databases d ON d.id = t.database_id WHERE t.table_id = ${tableId}`,
    );
    assertNotBeingDeleted(owner?.state);
    throw new Error(`table ${tableId} is not in the catalog`);
  },
});
