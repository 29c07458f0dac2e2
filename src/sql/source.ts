import type { RecordBatch, Schema } from 'apache-arrow';

// The port through which SQL reads the tables' engine; the engine implements it (engine/sql-source.ts).

/** A table of the database as SQL sees it: its name and the user's columns. */
export interface SqlTable {
  id: string;
  name: string;
  schema: Schema;
}

/** How the rows of a table changed between two versions (see engine/tables/changes.ts). */
export type SqlDifference = 'none' | 'append' | 'rewrite';

/** Rows read from a table, without the service's row key, and the largest key among them. */
export interface KeyedBatch {
  batch: RecordBatch;
  maxKey: bigint;
}

/** What SQL needs of the tables' engine: versions, what changed between them, and the rows. */
export interface SqlSource {
  /** The database's finished tables now. */
  tables(): Promise<SqlTable[]>;
  version(table: SqlTable): Promise<number>;
  changed(table: SqlTable, from: number, to: number): Promise<SqlDifference>;
  /** The `columns` of exactly that version of the table (only rows with a row key above `afterKey`). */
  scan(
    table: SqlTable,
    version: number,
    afterKey: bigint | undefined,
    columns: readonly string[],
  ): AsyncIterable<KeyedBatch>;
  /** Lets go of what the source holds open for loading. */
  close(): void;
}
