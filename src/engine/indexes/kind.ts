import type { Field } from 'apache-arrow';
import type { Analyzer } from './fts.js';
import type { ScalarIndexType } from './scalar.js';
import type { Metric } from './vector.js';

/**
 * An index as the row store keeps it (engine/rows/source.ts): one store index per declaration, named by what it
 * is rather than by how one store builds it.
 */
export type IndexSpec =
  | { type: 'text'; column: string; analyzer: Analyzer; positions?: boolean }
  | { type: 'ann'; column: string; metric: Metric; dim: number }
  | { type: 'scalar'; column: string; index: ScalarIndexType };

/**
 * How upkeep keeps a kind's index. `fold`: built with the table, and every pass that folds new rows into the indexes
 * (`optimize`) keeps it whole. `train`: built by upkeep once the table holds enough rows for it to beat a scan
 * (`annMinRows`; searches scan exactly until then), and trained again from all rows once folds have split it into
 * too many segments or the table has outgrown what it was trained on.
 */
export type IndexUpkeep = 'fold' | 'train';

/**
 * One kind of index a table may declare on a column (docs/api.md, create_table `indexes`), all in its own file:
 * how a declaration is checked against the schema, what `/v1/schema` shows of it, which store index it is and
 * how upkeep keeps that, and (beside it in the file) how a search reads through it. The kinds are listed once, in
 * `registry.ts`, which also says how far behind each declaration's index is. Which store calls build an index is
 * the row store's business (`engine/lance/indexes.ts`).
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
  /** The store index that serves a declaration. */
  stored(declared: Declared): IndexSpec;
  upkeep: IndexUpkeep;
}
