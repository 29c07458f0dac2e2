import type { RecordBatch, Table } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import type { DurableFolder } from '../../storage/durable.js';
import { type LanceLocation, TABLES_PREFIX } from '../../storage/lance.js';
import type { IndexSpec, TableIndexes } from '../indexes/registry.js';
import {
  CommitConflict,
  type History,
  type Hits,
  type IndexInfo,
  type IndexStats,
  type PositionedToken,
  type ReadOptions,
  type RowId,
  type RowReads,
  type RowSource,
  type Snapshot,
  type TextChanges,
  type TextLeg,
  type TextMatch,
  type VectorLeg,
  type VersionInfo,
} from '../rows/source.js';
import { ROW_KEY } from '../tables/schema.js';
import { DatasetCommits } from './commits.js';
import { annColumns, annIndex, indexType, LANCE_METRIC, warmIndexes } from './indexes.js';
import {
  ALL_ROWS,
  appendBatches,
  type Connection,
  committing,
  isCommitConflict,
  isMissingDataset,
  type LanceTable,
  LOAD_BATCH_ROWS,
  MatchQuery,
  PREDICATE_READ,
  READ_OPTIONS,
  readAll,
  streamOf,
} from './lance.js';
import { fullTextQuery, NPROBES, textLeg, vectorLeg } from './legs.js';
import { RowChanges } from './row-changes.js';
import { RowKeys, readByKeys } from './row-keys.js';
import type { UpkeepJob, UpkeepProcess } from './upkeep-process.js';

/** How often a table missing an ANN index looks whether another node's upkeep built it since. */
const ANN_RECHECK_MS = 1000;

/**
 * Rows a merge on the row key takes past which Lance joins it with every row's key rather than looking each key up
 * in the key's BTREE: faster from about a thousand rows at 1M, and more so once merges leave fragments the index
 * does not cover (docs/performance.md, Primary keys and upsert).
 */
const MERGE_BY_JOIN_ROWS = 1000;

/** Fragments whose coverage is looked up at once when a node reads the rows outside the indexes. */
const COVERAGE_LOOKUPS = 4;

/** Tries to close a handle again this long after a read still borrowing it refused the close. */
const CLOSE_RETRY_MS = 1000;

/**
 * Closes a Lance handle that reads may still be using. LanceDB refuses to close a handle while another call
 * borrows it ("cannot be borrowed mutably while another borrow is active"); that read is allowed to finish
 * and the close is tried again later. Never throws: the handle is being let go either way.
 */
export function closeHandle(lance: LanceTable, retries = 5): void {
  try {
    lance.close();
  } catch {
    if (retries > 0) setTimeout(() => closeHandle(lance, retries - 1), CLOSE_RETRY_MS).unref();
  }
}

/** Reads of one Lance handle, at whatever version it is checked out at. */
class LanceReads implements RowReads {
  constructor(protected readonly lance: LanceTable) {}

  count(where?: string): Promise<number> {
    return this.lance.countRows(where);
  }

  rowsWhere(where: string, columns: readonly string[], options: ReadOptions = {}): Promise<Table> {
    let q = this.lance
      .query()
      .where(where)
      .select([...columns]);
    if (options.limit !== undefined) q = q.limit(options.limit);
    if (options.indexedOnly === true) q = q.fastSearch();
    return readAll(q, options.userDriven === true ? PREDICATE_READ : READ_OPTIONS);
  }
}

/** Listings of a table's versions tried while pruning deletes the manifests they list, before one fails. */
const LISTING_ATTEMPTS = 8;

/**
 * The versions of a table as Lance lists them, with the row counts each manifest keeps. Lance lists the manifests
 * and then reads each, so a prune under way (upkeep's, or another node's) fails the listing with a manifest it
 * deleted in between; listed again, the prune's deletions are behind it.
 */
export async function versionsOf(lance: LanceTable): Promise<VersionInfo[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return (await lance.listVersions()).map((v) => ({
        version: v.version,
        timestamp: v.timestamp,
        rows: Number(v.metadata.total_rows),
        storedRows: Number(v.metadata.total_data_file_rows),
        deletedRows: Number(v.metadata.total_deletion_file_rows),
      }));
    } catch (err) {
      if (attempt >= LISTING_ATTEMPTS || !isMissingDataset(err)) throw err;
      await new Promise((resolve) => setTimeout(resolve, 5 * attempt));
    }
  }
}

/** What a table's rows need of the database's store: reopening the dataset, and running upkeep's jobs. */
export interface LanceTableEnv {
  connection: Connection;
  location: LanceLocation;
  jobs: UpkeepProcess;
  /** The dataset's folder when it is local, whose new files each commit makes durable (S3's PUT already is). */
  folder: DurableFolder | undefined;
}

/** One Lance table as a row source: its handle, which vector columns have ANN indexes, and its row ids' keys. */
export class LanceRows extends LanceReads implements RowSource {
  /** Vector columns whose ANN index exists: their searches set nprobes and refine. */
  private readonly ann: Set<string>;
  /** When `ann` was last read from the dataset, while some vector column has none (another node may build it). */
  private annCheckedMs = Date.now();
  /** Row keys by Lance row id, for search legs that read only row ids. */
  readonly rowKeys: RowKeys;
  private readonly changes: RowChanges;
  /** What made each version, from its manifest. */
  private readonly commits: DatasetCommits;

  constructor(
    lance: LanceTable,
    private readonly tableId: string,
    private readonly declared: TableIndexes,
    ann: Set<string>,
    private readonly env: LanceTableEnv,
  ) {
    super(lance);
    this.ann = ann;
    this.rowKeys = new RowKeys(lance);
    this.commits = new DatasetCommits((path) => env.location.objects.get(`${TABLES_PREFIX}/${tableId}.lance/${path}`));
    this.changes = new RowChanges(
      async (version) => {
        const reader = await env.connection.openTable(tableId);
        try {
          await reader.checkout(version);
          return reader;
        } catch (err) {
          closeHandle(reader);
          // Upkeep may have pruned the version: it tells nothing, like one pruned before it was asked for.
          if (isMissingDataset(err)) return undefined;
          throw err;
        }
      },
      closeHandle,
      this.commits,
    );
  }

  /** The Lance handle, for the store that closes it. */
  get handle(): LanceTable {
    return this.lance;
  }

  /** The dataset's folder when it is local (tests look at what it has left to sync). */
  get folder(): DurableFolder | undefined {
    return this.env.folder;
  }

  version(): Promise<number> {
    return this.lance.version();
  }

  textLeg(leg: TextLeg): Promise<Hits> {
    return textLeg(this.lance, leg);
  }

  async vectorLeg(leg: VectorLeg): Promise<Hits> {
    // A leg asked to read its index alone was told it has one: this handle looks at once rather than scan it all.
    await this.recheckAnn(leg.indexedOnly && !this.ann.has(leg.field));
    return vectorLeg(this.lance, leg, this.ann.has(leg.field));
  }

  /**
   * Looks again (at most every `ANN_RECHECK_MS`, unless `now`) whether vector columns without an ANN index have one
   * now: another node's upkeep may have built it.
   */
  private async recheckAnn(now = false): Promise<void> {
    const due = now || Date.now() - this.annCheckedMs > ANN_RECHECK_MS;
    if (this.ann.size < this.declared.vector.length && due) {
      this.annCheckedMs = Date.now();
      for (const column of annColumns(await this.lance.listIndices())) this.ann.add(column);
    }
  }

  async tokenize(text: string, column: string): Promise<PositionedToken[]> {
    return (await this.lance.tokenize(text, { column })).map((token) => ({
      text: token.text,
      position: token.position,
    }));
  }

  textMatches(match: TextMatch, columns: readonly string[]): Promise<Table> {
    return readAll(
      this.lance
        .query()
        .fullTextSearch(fullTextQuery(match))
        .select([...columns])
        .limit(ALL_ROWS),
    );
  }

  keysOf(ids: readonly RowId[]): Promise<(bigint | undefined)[]> {
    return this.rowKeys.of(ids);
  }

  rowsByKey(keys: readonly bigint[], columns: readonly string[], ids?: ReadonlyMap<bigint, RowId>): Promise<Table[]> {
    return readByKeys(this.lance, keys, columns, ids);
  }

  append(batches: RecordBatch[]): Promise<{ version: number }> {
    return committing(() => appendBatches(this.lance, batches));
  }

  async replaceByKey(
    batches: RecordBatch[],
    insertMissing = false,
  ): Promise<{ version: number; replaced: number; inserted: number }> {
    const rows = new arrow.Table(batches);
    const merged = await committing(() => {
      const merge = this.lance
        .mergeInsert(ROW_KEY)
        .whenMatchedUpdateAll()
        .useIndex(rows.numRows < MERGE_BY_JOIN_ROWS);
      return (insertMissing ? merge.whenNotMatchedInsertAll() : merge).execute(rows);
    });
    return { version: merged.version, replaced: merged.numUpdatedRows, inserted: merged.numInsertedRows };
  }

  async delete(predicate: string): Promise<{ version: number; deleted: number }> {
    const deleted = await committing(() => this.lance.delete(predicate));
    return { version: deleted.version, deleted: deleted.numDeletedRows };
  }

  async sync(): Promise<void> {
    await this.env.folder?.sync();
  }

  versions(): Promise<VersionInfo[]> {
    return versionsOf(this.lance);
  }

  changedTexts(
    from: number,
    to: number,
    columns: readonly string[],
    maxRows: number,
  ): Promise<TextChanges | undefined> {
    return this.changes.texts(from, to, columns, maxRows);
  }

  removedNone(from: number, to: number): Promise<boolean> {
    return this.commits.removedNone(from, to);
  }

  async changedRows(
    from: number,
    to: number,
    columns: readonly string[],
    maxRows: number,
  ): Promise<{ removed: Table; added: Table } | undefined> {
    // Of the rows gone, only their texts (the statistics then find the same step read) and no vectors: a
    // compaction read as rows removed would read every row it moved.
    const texts = this.declared.fts.map((f) => f.column);
    const rows = await this.changes.between(from, to, texts, columns, maxRows);
    if (rows === undefined) return undefined;
    const come = rows.come;
    const added = come === undefined ? [] : await this.outsideIndexes(come);
    return {
      removed: rows.gone ?? new arrow.Table(),
      added: new arrow.Table(added.map((batch) => batch.select([ROW_KEY, ...columns]))),
    };
  }

  async rowsOutsideIndexes(version: number, columns: readonly string[], maxRows: number): Promise<Table | undefined> {
    await this.recheckAnn(true);
    const rows = await this.changes.within(version, columns, maxRows, async (sample) => {
      const byFragment = rowsByFragment(sample);
      const rowsOf = [...byFragment.values()];
      const covered: boolean[] = [];
      // A few lookups at a time: a table of many small fragments would otherwise put hundreds of index reads in
      // flight at once on a node that is also answering searches.
      let next = 0;
      const lookUp = async () => {
        for (let f = next++; f < rowsOf.length; f = next++)
          covered[f] = await this.coveredAt(sample, rowsOf[f] ?? [], false);
      };
      await Promise.all(Array.from({ length: COVERAGE_LOOKUPS }, lookUp));
      return new Set([...byFragment.keys()].filter((_, f) => !covered[f]).map(Number));
    });
    return rows === undefined
      ? undefined
      : new arrow.Table(rows.batches.map((batch) => batch.select([ROW_KEY, ...columns])));
  }

  /**
   * The rows (read with their row ids) that some search index does not cover yet, as slices of the batches they came
   * in. Coverage is a fragment's: one row of each fragment is looked for through each index alone (a full-text
   * match of its own text, a vector search for its own vector, filtered to its row id), which finds it only where the
   * index covers its fragment. A compaction's fragments are covered as the fragments it replaced were; an append's
   * and a replace's are not until a fold. A vector column without an ANN index covers none.
   */
  private async outsideIndexes(rows: Table): Promise<RecordBatch[]> {
    // Another node may have built an ANN index since this one looked.
    await this.recheckAnn(true);
    const byFragment = rowsByFragment(rows);
    const out: RecordBatch[] = [];
    const covered: boolean[] = [];
    for (const at of byFragment.values()) covered.push(await this.coveredAt(rows, at, true));
    // All of them (an append): the batches whole, whose bytes the fresh budget charges once, not a slice's each.
    if (!covered.includes(true)) return rows.batches;
    for (const [f, at] of [...byFragment.values()].entries()) {
      if (covered[f]) continue;
      for (let r = 0; r < at.length; ) {
        let end = r + 1;
        while (end < at.length && at[end] === (at[end - 1] as number) + 1) end++;
        out.push(...rows.slice(at[r], (at[end - 1] as number) + 1).batches);
        r = end;
      }
    }
    return out;
  }

  /**
   * Whether every search index covers the fragment of the rows `at` of `rows` (see `outsideIndexes`); `unprobed`
   * answers for an index none of those rows has a value for (when they are all the fragment's rows, none of them
   * can be found through it either way).
   */
  private async coveredAt(rows: Table, at: readonly number[], unprobed: boolean): Promise<boolean> {
    const ids = rows.getChild('_rowid');
    for (const { column } of this.declared.fts) {
      const texts = rows.getChild(column);
      const i = at.find((row) => ((texts?.get(row) as string | null) ?? '').trim() !== '');
      if (i === undefined) {
        if (unprobed) continue;
        return false;
      }
      const found = await readAll(
        this.lance
          .query()
          .fullTextSearch(new MatchQuery(texts?.get(i) as string, column))
          .fastSearch()
          .where(`_rowid = ${ids?.get(i) as bigint}`)
          .select([ROW_KEY])
          .limit(1),
      );
      if (found.numRows === 0) return false;
    }
    for (const { column, metric } of this.declared.vector) {
      const vectors = rows.getChild(column);
      const i = at.find((row) => vectors?.get(row) !== null);
      if (vectors === null || i === undefined) {
        if (unprobed) continue;
        return false;
      }
      // Not built yet: the training that builds it covers only the rows before it began.
      if (!this.ann.has(column)) return false;
      const vector = Array.from((vectors.get(i) as { toArray(): Float32Array }).toArray());
      const found = await readAll(
        this.lance
          .vectorSearch(vector)
          .column(column)
          .distanceType(LANCE_METRIC[metric])
          .fastSearch()
          .where(`_rowid = ${ids?.get(i) as bigint}`)
          .select([ROW_KEY])
          .nprobes(NPROBES)
          .limit(1),
      );
      if (found.numRows === 0) return false;
    }
    return true;
  }

  history(): History {
    let reader: LanceTable | undefined;
    return {
      at: async (version) => {
        try {
          // Opened at the latest version, which pruning never removes, so that a failed checkout leaves it to close.
          if (reader === undefined) {
            const latest = await this.lance.version();
            reader = await this.env.connection.openTable(this.tableId);
            await reader.checkout(latest);
          }
          await reader.checkout(version);
          return new LanceReads(reader);
        } catch (err) {
          // Upkeep may prune a version between a listing and its reading: it then tells nothing, like one pruned before.
          if (isMissingDataset(err)) return undefined;
          throw err;
        }
      },
      close: () => {
        if (reader !== undefined) closeHandle(reader);
      },
    };
  }

  async indexes(): Promise<IndexInfo[]> {
    return (await this.lance.listIndices()).map((i) => ({ name: i.name, columns: i.columns, type: indexType(i) }));
  }

  async indexStats(name: string): Promise<IndexStats | undefined> {
    const stats = await this.lance.indexStats(name);
    if (stats === undefined || stats === null) return undefined;
    return {
      indexedRows: stats.numIndexedRows,
      unindexedRows: stats.numUnindexedRows,
      segments: stats.numIndices ?? 1,
    };
  }

  async smallFragments(): Promise<number> {
    return (await this.lance.stats()).fragmentStats.numSmallFragments;
  }

  optimize(olderThan: Date): Promise<void> {
    return this.job({ kind: 'optimize', cleanupOlderThan: olderThan });
  }

  async train(index: IndexSpec, replace: boolean): Promise<void> {
    if (index.type === 'ann') {
      await this.job(annIndex(index, replace));
      this.ann.add(index.column);
    } else {
      await this.job({ kind: 'index', index, replace });
    }
  }

  async compacted(): Promise<void> {
    this.rowKeys.trim(await this.lance.countRows());
    await this.rowKeys.warm();
  }

  warm(): Promise<void> {
    return warmIndexes(this.lance);
  }

  /** Runs upkeep's heavy work in the upkeep process; a commit another beat is a `CommitConflict`. */
  private async job(job: UpkeepJob): Promise<void> {
    try {
      await this.env.jobs.run(this.env.location, this.tableId, job);
    } catch (err) {
      if (isCommitConflict(err)) throw new CommitConflict(err instanceof Error ? err.message : String(err));
      throw err;
    }
  }
}

/** A handle of SQL's own on one table, moved to each version it loads. */
export class LanceSnapshot implements Snapshot {
  constructor(private readonly lance: LanceTable) {}

  checkout(version: number): Promise<void> {
    return this.lance.checkout(version);
  }

  async *scan(columns: readonly string[], afterKey: bigint | undefined): AsyncIterable<RecordBatch> {
    let query = this.lance.query().select([...columns, ROW_KEY]);
    if (afterKey !== undefined) query = query.where(`${ROW_KEY} > ${afterKey}`);
    yield* streamOf(query, LOAD_BATCH_ROWS);
  }

  close(): void {
    closeHandle(this.lance);
  }
}

/** The rows of a read made with row ids, by fragment (Lance's row addresses: the fragment in the upper 32 bits). */
function rowsByFragment(rows: Table): Map<bigint, number[]> {
  const ids = rows.getChild('_rowid');
  const byFragment = new Map<bigint, number[]>();
  for (let i = 0; i < rows.numRows; i++) {
    const fragment = (ids?.get(i) as bigint) >> 32n;
    const at = byFragment.get(fragment);
    if (at === undefined) byFragment.set(fragment, [i]);
    else at.push(i);
  }
  return byFragment;
}
