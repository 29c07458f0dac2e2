import { FRESH_KINDS, type FreshKind } from '../fresh/rows.js';
import type { IndexSpec } from '../indexes/kind.js';
import { behindOf, declaredIndexes, storedIndexOf, type TableIndexes } from '../indexes/registry.js';
import type { RowSource } from '../rows/source.js';
import type { TextIndexState } from './catalog.js';
import type { Difference } from './changes.js';

/** How the table's rows differ between two versions (its change record). */
type RowDifference = (from: number, to: number) => Difference;

/** The kind of fresh rows each type of store index stands for; a scalar index has one on the primary key alone. */
const FRESH_KIND: Readonly<Record<IndexSpec['type'], FreshKind | undefined>> = {
  text: 'text',
  ann: 'vector',
  scalar: 'key',
};

/** What searches of one table version read outside its indexes. */
export interface Unindexed {
  version: number;
  /**
   * Rows a search through each declaration (by its key, `fts:title`) reads outside any index: those its store index
   * does not cover yet, or every row while a trained index is not built (the column is scanned exactly).
   */
  rows: ReadonlyMap<string, number>;
  /** Declarations whose store index exists (a search may ask it alone: `consistency: "eventual"`). */
  indexed: ReadonlySet<string>;
  /** The most rows any built index is behind: what upkeep has to fold, what `strata_unindexed_rows` reports. */
  behind: number;
  /**
   * The kinds of index (full-text, vector, the primary key's) all of whose declared indexes exist and say, by their
   * statistics, that they cover every row.
   */
  covered: readonly FreshKind[];
  /**
   * Rows deleted (or replaced) whose deletion upkeep has not compacted away yet: full-text indexes still count
   * them in their statistics.
   */
  deletedRows: number;
  /** The latest delete or replace and full-text rebuild any node recorded (`TextIndexState`), read with the rest. */
  textIndex: TextIndexState;
}

/** Where every node records deletes and replaces, and full-text rebuilds, of a table (the control store). */
export interface TextIndexRecords {
  record(event: 'removed' | 'rebuilt', version: number): void;
  state(): Promise<TextIndexState>;
}

/**
 * How far a table's rows run ahead of its indexes, version by version. Read from the indexes' statistics once per
 * version, and moved along by this node's own appends without reading anything (Lance writes their rows to new
 * fragments, outside every index). A delete or replace (whose rows the statistics then count as they see fit), a
 * commit this node did not see (another node's), or upkeep's fold makes the next read go back to the statistics.
 */
export class UnindexedRows {
  private known: Unindexed | undefined;
  private reading: { version: number; done: Promise<Unindexed> } | undefined;
  /** Moves at every fold: a read that began before one does not keep what it read. */
  private generation = 0;
  /** The version upkeep last built the full-text indexes again from the live rows at (`rebuilt`). */
  private rebuiltAt: number | undefined;
  /**
   * The latest version at which this node knows rows may have been deleted or replaced: its own deletes and replaces,
   * and, where other nodes write, any version it did not see committed.
   */
  private removedAt: number | undefined;
  /** The latest version read (`at`), for telling where other nodes write whether a version came unseen. */
  private lastRead: number | undefined;
  /** Told of a version at which the indexes of some kinds cover every row (a read found none outside them). */
  onCovered: ((version: number, kinds: readonly FreshKind[]) => void) | undefined;
  /** Whether a read found the primary key's index built (a scalar index is never dropped). */
  keyIndexBuilt = false;

  constructor(
    private readonly source: RowSource,
    private readonly indexes: TableIndexes,
    /** The primary key column, whose scalar index stands for the fresh rows' keys. */
    private readonly primaryKey: string | undefined,
    private readonly difference: RowDifference,
    /** Whether other nodes write the table too (their versions come unseen). */
    private readonly othersWrite = false,
    private readonly records?: TextIndexRecords,
  ) {}

  /**
   * Whether the full-text indexes still count rows deleted or replaced at `unindexed`'s version, so that their BM25
   * statistics do not describe the live rows: a deletion is pending in the data files and they were not built again
   * since the last write that deleted or replaced rows (a version this node did not see counts as one); or, with
   * none pending, rows were deleted or replaced since they were last built again here. A delete of every row of a
   * fragment drops the fragment and leaves no deletion behind, and so does a compaction, while the indexes still
   * count the rows.
   */
  countsDeleted(unindexed: Unindexed): boolean {
    const rebuilt = this.rebuiltAt;
    if (unindexed.deletedRows > 0) {
      return (
        rebuilt === undefined ||
        unindexed.version < rebuilt ||
        this.difference(rebuilt, unindexed.version) === 'rewrite'
      );
    }
    if (this.removedAt !== undefined && (rebuilt === undefined || this.removedAt > rebuilt)) return true;
    // Deletes and replaces on any node, before this one started included.
    const { removed, rebuilt: rebuiltOnAny } = unindexed.textIndex;
    return removed !== undefined && (rebuiltOnAny === undefined || removed > rebuiltOnAny);
  }

  /** Upkeep built the full-text indexes again from the rows at `version` (or a later one). */
  rebuilt(version: number): void {
    this.rebuiltAt = version;
    this.records?.record('rebuilt', version);
    this.folded();
  }

  /** The latest this node knows, without reading anything (undefined before the first read). */
  get last(): Unindexed | undefined {
    return this.known;
  }

  /** The rows outside the indexes at `version`: known, or read once from the statistics for every caller. */
  async at(version: number): Promise<Unindexed> {
    if (this.othersWrite && this.lastRead !== undefined && version > this.lastRead) {
      if (this.difference(this.lastRead, version) === 'rewrite')
        this.removedAt = Math.max(this.removedAt ?? version, version);
    }
    if (this.lastRead === undefined || version > this.lastRead) this.lastRead = version;
    if (this.known?.version === version) return this.known;
    if (this.reading?.version === version) return this.reading.done;
    const generation = this.generation;
    const done = this.read(version);
    const reading = { version, done };
    this.reading = reading;
    try {
      const read = await done;
      // Kept unless a commit seen meanwhile moved `known` past it, a fold made it stale, or the statistics read
      // were of a later version than asked (a commit landed while they were read).
      const newer = this.known !== undefined && this.known.version >= read.version;
      if (!newer && generation === this.generation && (await this.source.version()) === version) {
        this.known = read;
        if (read.covered.length > 0) this.onCovered?.(version, read.covered);
      }
      return read;
    } finally {
      if (this.reading === reading) this.reading = undefined;
    }
  }

  /**
   * This node committed `version` on top of the one before: an append of `rows` rows, outside every index (an
   * exactly scanned column gains them too), or, when `removed`, a delete or replace, after which the statistics
   * are read again. Unless the version before is the one known, something else committed in between, and the next
   * `at` reads again.
   */
  committed(version: number, rows: number, removed: boolean): void {
    if (removed) {
      this.removedAt = Math.max(this.removedAt ?? version, version);
      if (this.indexes.fts.length > 0) this.records?.record('removed', version);
    }
    const known = this.known;
    if (known === undefined || known.version !== version - 1 || removed) {
      this.known = undefined;
      return;
    }
    const added = new Map([...known.rows].map(([key, n]) => [key, n + rows] as const));
    // Every built index misses the new rows, the one furthest behind included.
    const behind = known.indexed.size > 0 ? known.behind + rows : 0;
    this.known = { ...known, version, rows: added, behind, covered: rows === 0 ? known.covered : [] };
  }

  /**
   * Upkeep folded (or trained) indexes, committing a new version: what they cover is read again at the next `at`
   * (`last` keeps the figure from before until then), and a read under way keeps nothing.
   */
  folded(): void {
    this.generation++;
  }

  private async read(version: number): Promise<Unindexed> {
    const present = await this.source.indexes();
    const rows = new Map<string, number>();
    const indexed = new Set<string>();
    let behind = 0;
    let all: Promise<number> | undefined;
    // Only statistics read say an index covers every row; a missing index or missing figures do not.
    const uncovered = new Set<FreshKind>();
    for (const declared of declaredIndexes(this.indexes)) {
      const index = storedIndexOf(declared, present);
      const type = declared.stored.type;
      const kind = type === 'scalar' && declared.column !== this.primaryKey ? undefined : FRESH_KIND[type];
      if (index === undefined) {
        if (kind !== undefined) uncovered.add(kind);
        all ??= this.source.count();
        rows.set(declared.key, await all);
        continue;
      }
      const stats = await this.source.indexStats(index.name);
      const unindexed = behindOf(stats);
      if (kind !== undefined && (stats === undefined || unindexed > 0)) uncovered.add(kind);
      rows.set(declared.key, unindexed);
      indexed.add(declared.key);
      if (kind === 'key') this.keyIndexBuilt = true;
      behind = Math.max(behind, unindexed);
    }
    // Only full-text statistics count deleted rows; reading them lists every version the table keeps, which a
    // table without full-text indexes need not pay on each write.
    const deletedRows =
      this.indexes.fts.length === 0 ? 0 : ((await this.source.versions()).at(-1)?.deletedRows ?? Number.NaN);
    const covered = FRESH_KINDS.filter((kind) => !uncovered.has(kind));
    const textIndex = this.indexes.fts.length === 0 || this.records === undefined ? {} : await this.records.state();
    return { version, rows, indexed, behind, deletedRows, covered, textIndex };
  }
}
