import type { RecordBatch, Schema, Table } from 'apache-arrow';
import { Unavailable } from '../../errors.js';
import type { IndexSpec, Metric, StoredIndex, TableIndexes } from '../indexes/registry.js';

// The row-source port: what search, writes, intents, upkeep, tables and SQL need of a table's stored rows.
// Lance is one implementation (engine/lance/); a tier of fresh rows searched beside the indexes is meant to be
// another, or a decorator over two, wired in where the worker opens its store, with nothing above this port
// changed. Filters and predicates are checked SQL (predicate/) over the user's columns and the row key.

declare const rowIdentity: unique symbol;

/**
 * A row's identity inside the source whose leg handed it out, valid for that source only: a caller passes it back
 * (`keysOf`, `rowsByKey`) to reach the row faster than by its key, never reads meaning into it. It names the same
 * row or none (a deleted or moved row is found by key instead).
 */
export type RowId = bigint & { readonly [rowIdentity]: true };

/** How a full-text query's terms combine (the API's `operator`). */
export type TextOperator = 'AND' | 'OR';

/** A full-text query over one indexed column. */
export interface TextMatch {
  /** The query's words outside its phrases. */
  query: string;
  field: string;
  operator: TextOperator;
  /** Phrases the rows must hold, their words in order (`or`: any clause matches; `and`: all). */
  phrases?: readonly string[];
  /** Clauses of terms of which a row must hold any one (a query word widened by `prefix` or `fuzziness`). */
  anyOf?: readonly (readonly string[])[];
}

/** A token and its position in its text. */
export interface PositionedToken {
  text: string;
  position: number;
}

/** What both legs of a search ask of a source. */
interface LegRead {
  /** A checked filter, or undefined for every row. */
  filter: string | undefined;
  /** Hits to read at most. */
  limit: number;
  /** Columns read with each hit (the row key among them when the caller wants it); none when only ids are read. */
  columns: readonly string[];
  /** Whether each hit's `RowId` is wanted. */
  ids: boolean;
  /** Only rows the leg's index covers (none it would scan outside it): `consistency: "eventual"`. */
  indexedOnly: boolean;
}

export interface TextLeg extends TextMatch, LegRead {}

export interface VectorLeg extends LegRead {
  field: string;
  vector: number[];
  metric: Metric;
  /**
   * Hits the caller needs if the table has them: an approximate index that found fewer within `limit` searches
   * wider, as far as it takes.
   */
  wanted: number;
}

/**
 * A leg's candidates as read, best first: their columns, each one's measure (BM25 score, higher first; or the API's
 * canonical distance, lower first) and, when asked for, each one's identity. A decorator over two sources merges
 * these by measure; `ids` are then its own to hand out.
 */
export interface Hits {
  rows: Table;
  values: number[];
  ids: RowId[];
}

/** How a read runs: `limit` rows at most (all when undefined); `userDriven` when a user's predicate or filter drives it. */
export interface ReadOptions {
  limit?: number;
  /** A read driven by a user's predicate runs under a time limit (`PREDICATE_TIMEOUT_MS` of the implementation). */
  userDriven?: boolean;
  /** Only rows the indexes cover (deletions since applied): the caller holds the others (`FreshRows`). */
  indexedOnly?: boolean;
}

/** Reads of the rows at one version. */
export interface RowReads {
  /** Rows matching `where` (every row when undefined). */
  count(where?: string): Promise<number>;
  /** The rows `where` matches, with `columns`, in no particular order. */
  rowsWhere(where: string, columns: readonly string[], options?: ReadOptions): Promise<Table>;
}

/** A version as the source lists it, with the row counts its commit left (NaN where unknown). */
export interface VersionInfo {
  version: number;
  timestamp: Date;
  /** Live rows. */
  rows: number;
  /** Rows in data files, deleted or not. */
  storedRows: number;
  /** Rows marked deleted in data files. */
  deletedRows: number;
}

/** The texts of some columns of the rows only one version holds, and of those only another holds (null for null). */
export interface TextChanges {
  removed: ReadonlyMap<string, readonly (string | null)[]>;
  added: ReadonlyMap<string, readonly (string | null)[]>;
}

/** A read-only view moved from version to version; closed by whoever asked for it. */
export interface History {
  /** The rows at `version`; undefined when that version is no longer kept (pruned, or the table deleted). */
  at(version: number): Promise<RowReads | undefined>;
  close(): void;
}

/** An index as the source lists it (the row key's is `scalar`). */
export interface IndexInfo extends StoredIndex {
  columns: string[];
}

/** How far an index lags its table. */
export interface IndexStats {
  indexedRows: number;
  unindexedRows: number;
  /** Pieces every query searches (folds add one each). */
  segments: number;
}

/** A commit of upkeep's lost to another that landed first: nothing changed, and it may be tried again. */
export class CommitConflict extends Error {}

/**
 * A write's commit the bucket answered with a refusal (access denied, no such bucket): nothing was committed.
 * Unlike a commit that got no answer (a timeout), which may still land, it needs no looking for afterwards.
 */
export class CommitRefused extends Unavailable {
  constructor(message: string) {
    super(message, { retryAfterS: 5, code: 'storage_unavailable' });
  }
}

/** A write's commit the bucket did not answer: it may or may not have landed (a retry looks for it). */
export class CommitUnanswered extends Unavailable {
  constructor(message: string) {
    super(message, { retryAfterS: 5, code: 'storage_unavailable' });
  }
}

/** The process doing upkeep's work ended (or could not start) before it answered: no verdict on the work itself. */
export class UpkeepProcessGone extends Error {}

/** The stored rows of one table, at its latest version. */
export interface RowSource extends RowReads {
  /** The version reads see now. */
  version(): Promise<number>;

  // Search.
  textLeg(leg: TextLeg): Promise<Hits>;
  vectorLeg(leg: VectorLeg): Promise<Hits>;
  /**
   * The tokens a full-text column's analyzer makes of `text` (for texts the service cannot tokenize itself), with
   * the position of each (a dropped stop word leaves a gap that phrases honour).
   */
  tokenize(text: string, column: string): Promise<PositionedToken[]>;
  /** Every row matching a full-text query, with `columns` (none: the rows are only counted). */
  textMatches(match: TextMatch, columns: readonly string[]): Promise<Table>;
  /** The row key of each identity a leg handed out, in order; undefined for a row deleted since. */
  keysOf(ids: readonly RowId[]): Promise<(bigint | undefined)[]>;
  /**
   * The rows of `keys` that exist, with `columns` (which must include the row key), in no particular order;
   * `ids` are the identities legs saw for some of the keys.
   */
  rowsByKey(keys: readonly bigint[], columns: readonly string[], ids?: ReadonlyMap<bigint, RowId>): Promise<Table[]>;

  // Writes: each one commit; the batches carry the row key column. A commit another write beat fails as 409.
  append(batches: RecordBatch[]): Promise<{ version: number }>;
  /**
   * Replaces the rows whose row keys the batches carry; keys no longer there update nothing, or with
   * `insertMissing` are inserted.
   */
  replaceByKey(
    batches: RecordBatch[],
    insertMissing?: boolean,
  ): Promise<{ version: number; replaced: number; inserted: number }>;
  delete(predicate: string): Promise<{ version: number; deleted: number }>;
  /** Makes what was committed durable where the store does not do so itself. */
  sync(): Promise<void>;

  // History, for crash recovery and SQL's reloads.
  versions(): Promise<VersionInfo[]>;
  history(): History;
  /**
   * The texts of `columns` of the rows only `from` holds (removed) and of those only `to` holds (added), less rows on
   * both sides with the same row key and texts (moved, not changed): how the rows changed between two versions
   * whatever committed them. Undefined when a version is no longer kept, or more than `maxRows` rows differ.
   */
  changedTexts(from: number, to: number, columns: readonly string[], maxRows: number): Promise<TextChanges | undefined>;
  /**
   * The rows only `from` holds (removed: the row key and the full-text columns) and, of those only `to` holds, the
   * ones some search index does not cover yet (added: the row key and `columns`): what rows outside the indexes a
   * commit made or took away, whoever made it (a row a compaction moved is in neither where the compaction's manifest
   * says what it was; otherwise it is removed, and added again only where its new place is not covered). Undefined
   * when a version is no longer kept, or more than `maxRows` rows differ.
   */
  /**
   * Whether every commit after `from` up to `to` only added rows, moved them unchanged (a compaction) or changed
   * none (an index), as the store can tell without reading rows; false where it cannot tell.
   */
  removedNone(from: number, to: number): Promise<boolean>;
  changedRows(
    from: number,
    to: number,
    columns: readonly string[],
    maxRows: number,
  ): Promise<{ removed: Table; added: Table } | undefined>;
  /**
   * The rows `version` holds that some search index does not cover yet (whole fragments: one row of each is looked
   * up through each index), with the row key and `columns`: where a table's rows stand outside its indexes without
   * following it there. Undefined when the version is no longer kept, or those rows number more than `maxRows`.
   */
  rowsOutsideIndexes(version: number, columns: readonly string[], maxRows: number): Promise<Table | undefined>;

  // Upkeep.
  indexes(): Promise<IndexInfo[]>;
  indexStats(name: string): Promise<IndexStats | undefined>;
  /** Data fragments under the store's compaction target. */
  smallFragments(): Promise<number>;
  /** Folds new rows into the indexes, compacts and prunes versions older than `olderThan`; `CommitConflict` if beaten. */
  optimize(olderThan: Date): Promise<void>;
  /** Builds (or, with `replace`, builds again from all rows) an index upkeep trains; `CommitConflict` if beaten. */
  train(index: IndexSpec, replace: boolean): Promise<void>;
  /** Lets caches of where rows lie catch up after an `optimize` that committed. */
  compacted(): Promise<void>;
  /** Loads the indexes into memory, ahead of the queries that would. */
  warm(): Promise<void>;
}

/** A read-only view of one table for SQL's loads, moved to each version loaded (it keeps its caches between). */
export interface Snapshot {
  checkout(version: number): Promise<void>;
  /** Every row whose key is above `afterKey` (all when undefined), with `columns` and the row key, in batches. */
  scan(columns: readonly string[], afterKey: bigint | undefined): AsyncIterable<RecordBatch>;
  close(): void;
}

/** The stored tables of one database. */
/**
 * An object the service keeps beside a table in its bucket (its BM25 statistics). The bucket is the customer's: what
 * is read back is bounded and checked like any input. `read` answers undefined where there is none, or none whole.
 */
export interface AsideObject {
  read(): Promise<Uint8Array | undefined>;
  write(bytes: Uint8Array): Promise<void>;
}

export interface RowStore {
  /**
   * Creates a table's empty rows of `schema` (the stored one, row key included) with `indexes` (those its kinds
   * build with the table) and whatever the store needs to find rows by key.
   */
  create(tableId: string, schema: Schema, indexes: readonly IndexSpec[]): Promise<void>;
  /** Opens a table's rows; `indexes` are those its catalog entry declares. */
  open(tableId: string, indexes: TableIndexes): Promise<RowSource>;
  snapshot(tableId: string, version: number): Promise<Snapshot>;
  /** The object named `name` kept beside a table, read back up to `maxBytes`. */
  aside(tableId: string, name: string, maxBytes: number): AsideObject;
  /** Deletes a table's rows for good; a table already gone is no error. */
  drop(tableId: string): Promise<void>;
  /** Where a table's rows live, as the API names it. */
  locationOf(tableId: string): string;
  /** Lets go of an open table, once reads still using it end. */
  release(source: RowSource): void;
  /** Lets go of what the store keeps of a table that left the catalog. */
  forget(tableId: string): void;
}
