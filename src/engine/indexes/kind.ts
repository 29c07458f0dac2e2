import type { Field } from 'apache-arrow';

/**
 * One kind of index a table may declare on a column (docs/api.md, create_table `indexes`): how a declaration is
 * checked against the schema and what `/v1/schema` shows of it. The kinds are listed once, in `registry.ts`; how a
 * search uses one is its own file's business (`fts.ts`, `vector.ts`); how one is built and kept up is the row
 * store's (`engine/lance/indexes.ts`: full-text indexes with the table, ANN indexes by upkeep).
 */
export interface IndexKind<Entry, Declared extends { column: string }, Shown extends { kind: string }> {
  /** The column an entry of a create_table body names. */
  columnOf(entry: Entry): string;
  /**
   * Checks one entry against the column it names (undefined: no such column) and gives its canonical form;
   * `where` names the entry in a 400 (`indexes.fts[2]`).
   */
  declare(entry: Entry, field: Field | undefined, where: string): Declared;
  /** What `/v1/schema` shows beside the column. */
  shown(declared: Declared): Shown;
  /** Its name in a 400 that refuses a second one on a column. */
  noun: string;
}
