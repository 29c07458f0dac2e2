/**
 * A table as the catalog keeps it. The schema and index declarations are stored in their wire forms, the primary
 * key beside the index declarations.
 */
export interface TableRecord {
  databaseId: string;
  name: string;
  /** Unique per creation, so a dropped-but-kept table and a new one of the same name never collide. */
  tableId: string;
  /** Base64 schema-only Arrow IPC stream of the user's columns. */
  schemaIpc: string;
  /** JSON of the canonical index declarations, with `primary_key` when the table has one. */
  indexes: string;
  createdMs: number;
  /** `creating` until the dataset and its indexes exist; a crash leaves it so, and the name stays usable. */
  state: 'creating' | 'ready';
  /** When upkeep last committed work on the table (folded, compacted, trained), on any node; absent before. */
  upkeepMs?: number;
}

/** The kinds of search index whose folds are recorded for every node (`CatalogStore.recordFold`). */
export type FoldedKind = 'text' | 'vector';

/** Per kind of search index, the version up to which upkeep last folded every row into it; absent before any. */
export type Folds = Partial<Record<FoldedKind, number>>;

/**
 * What every node knows of a table's full-text indexes: the latest version that deleted or replaced rows, and the
 * version upkeep last built them again from (absent before either).
 */
export interface TextIndexState {
  removed?: number;
  rebuilt?: number;
}

/** What the engine needs of the control store to keep each database's catalog. */
export interface CatalogStore {
  /** Throws `Conflict` when the database already has a table of that name. */
  insertTable(table: TableRecord): Promise<void>;
  findTable(databaseId: string, name: string): Promise<TableRecord | undefined>;
  listTables(databaseId: string): Promise<TableRecord[]>;
  setTableState(tableId: string, state: TableRecord['state']): Promise<void>;
  /**
   * Removes a table's entry and ends its upkeep lease. True only for the call that removed the entry: when several
   * nodes drop one table at once, the others get false (their drop answers as if the table were not there).
   */
  deleteTable(tableId: string): Promise<boolean>;
  /** Reserves `count` consecutive row keys of a table; returns the first. It lasts a power cut once `durable`. */
  reserveRowKeys(tableId: string, count: number): Promise<bigint>;
  /** Makes every change committed so far last a power cut; a write calls it once, right before its own commit. */
  durable(): Promise<void>;
  /**
   * Holds the table's primary keys for one write on every node: every write to a keyed table looks its keys up and
   * commits under it, so that no other node's write adds the same value, or removes a row found, in between.
   * Answers the release.
   */
  holdKeys(tableId: string): Promise<() => Promise<void>>;
  /** Upkeep (on any node) folded every row committed up to `version` into the table's indexes of `kinds`. */
  recordFold(tableId: string, kinds: readonly FoldedKind[], version: number): Promise<void>;
  /** The versions of the table's last recorded folds. */
  foldsOf(tableId: string): Promise<Folds>;
  /** A commit at `version` deleted or replaced rows, or upkeep built the full-text indexes again from `version`. */
  recordTextIndex(tableId: string, event: 'removed' | 'rebuilt', version: number): Promise<void>;
  textIndexStateOf(tableId: string): Promise<TextIndexState>;
}
