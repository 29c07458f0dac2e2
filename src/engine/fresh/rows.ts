import type { RecordBatch, Table } from 'apache-arrow';
import type { FtsIndex, VectorIndex } from '../indexes/registry.js';
import type { TextOperator } from '../rows/source.js';
import type { CollectionStatistics } from '../text/bm25.js';
import { type ColumnTexts, textsOf } from '../text/statistics.js';
import { rowKeysOf } from '../writes/rows.js';
import { vectorsOf } from './batches.js';
import type { BudgetedTier, FreshBudget } from './budget.js';
import { FreshPostings } from './postings.js';
import { MatrixLost } from './vector-scans.js';
import { FreshVectors, type MatrixMaker } from './vectors.js';

/**
 * The indexes the fresh rows stand in for: a kind's boundary is the version up to which its indexes cover rows.
 * `key` is the primary key's scalar index, which a keyed write looks its keys up in.
 */
export type FreshKind = 'text' | 'vector' | 'key';
export const FRESH_KINDS: readonly FreshKind[] = ['text', 'vector', 'key'];

/** Each vector column's vectors of a commit's rows, in row order (null where a row has none). */
export type ColumnVectors = ReadonlyMap<string, readonly (Float32Array | null)[]>;

/**
 * What a commit wrote that the fresh rows hold: its full-text columns' texts, its vector columns' vectors, the
 * rows themselves as stored (with their row keys), and their primary key values as map keys spell them (a keyed
 * table's), in the order of the keys written.
 */
export interface FreshWrite {
  texts: ColumnTexts;
  vectors: ColumnVectors;
  rows: readonly RecordBatch[];
  primaryKeys?: readonly string[];
}

/** A commit of this node's, counted in by the next drain. */
interface Commit {
  version: number;
  removed: readonly bigint[];
  added: readonly bigint[];
  write: FreshWrite;
  /** Each added row's estimated bytes, charged to the budget when committed. */
  bytes: number[];
  /** The bytes of the batches the rows came in, charged with them and kept while any of their rows is held. */
  batchBytes: number;
}

/** What a search read of the fresh rows: the fold its index read covers, taken before that read began. */
export interface FreshRead {
  since: number;
  id: number;
  epoch: number;
}

/** A search's read of fresh rows the budget took away meanwhile: it reads Lance's way instead. */
export class FreshGone extends Error {
  constructor() {
    super('the fresh rows were let go of during the search');
  }
}

/**
 * Where nodes share a table: how its fresh rows follow it from version to version rather than being told of this
 * node's commits (`FreshRows.follow`).
 */
export interface FreshFollowing {
  /**
   * The rows only `from` holds and, of those only `to` holds, the ones some search index does not cover (as stored:
   * `RowSource.changedRows`); undefined when not to be had.
   */
  changes(from: number, to: number, maxRows: number): Promise<{ removed: Table; added: Table } | undefined>;
  /**
   * Whether following from `from` to `to` can remove no row: every commit between only added rows or moved them
   * unchanged (`RowSource.removedNone`); false where that is not known.
   */
  removedNone(from: number, to: number): Promise<boolean>;
  /**
   * The rows `version` holds that some search index does not cover (as stored: `RowSource.rowsOutsideIndexes`);
   * undefined when not to be had.
   */
  outside(version: number, maxRows: number): Promise<Table | undefined>;
  /** The versions up to which upkeep, on whichever node, last folded every row into each kind of index. */
  folds(): Promise<Partial<Record<'text' | 'vector', number>>>;
}

/**
 * Rows that may differ between two versions a following tier is brought across: past it (a large load, or a
 * compaction no manifest said was one), the rows outside the indexes at the newer version are read instead.
 */
const FOLLOW_MAX_ROWS = 100_000;

/**
 * How long a search waits for the step of following under way (`followWithin`) before it reads Lance's own way: a
 * bound for a step that stalls, not a shortcut. A 1k-row append is followed in 20–70 ms and a fold's compaction of a
 * 10k-row tail in 0.4–1 s, but while a fold runs Lance's own way over 7–12k rows took 0.6–1.6 s (200k rows, 384-d,
 * a slow day): a shorter wait made those searches slower, not faster.
 */
const FOLLOW_WAIT_MS = 500;

/** How long the recorded folds read for a version stand before they are read again. */
const FOLDS_REFRESH_MS = 1000;

/** Estimated bytes of a held row, beyond its texts and vectors (map entries, postings, keys). */
const ROW_BYTES = 128;
/**
 * Estimated bytes per character of a held text: its terms with their frequencies and the postings they sit in
 * (67 MB of heap and buffers for 105k rows of bench:search's ~60-character texts, 11.2 bytes a character).
 */
const TEXT_BYTES_PER_CHAR = 12;
/**
 * Estimated bytes of a held row's primary key value beyond `ROW_BYTES`: its entry in the map by value and its
 * string (194 bytes a row in all for 200k rows of 9-digit keys, against 210 estimated).
 */
const KEY_BYTES = 64;
const KEY_BYTES_PER_CHAR = 2;

/**
 * The rows this node committed since upkeep last folded the table's search indexes, searched here beside them
 * (docs/performance.md, Fresh rows): Lance would otherwise read each of them again for every query, tokenizing
 * texts and scanning vectors. On a keyed table their primary key values too, which keyed writes look up here
 * beside the key's index (or only those, without a search index). Where this node is the table's one writer and
 * folder (one node on its own store), every row no index covers is one it wrote since the version its last fold
 * started from; where nodes share the store, the rows are followed from the table itself instead (`follow`), search
 * indexes only. Either way a search reads the indexes alone (`fastSearch`) and this. A row a fold covered after
 * all is in both, and is read once. Each kind of index (full-text, vector, the key's) has its own boundary: until
 * this node's first fold (or a read of the indexes' statistics that found them covering every row), and after a
 * write whose commit it could not follow (until a fold from the next commit's version on), a kind is not usable,
 * and searches through it read Lance's own way.
 */
export class FreshRows implements BudgetedTier {
  /** Per kind, the version its indexes cover every row up to (the last fold's); none while not usable. */
  private readonly foldedAt = new Map<FreshKind, number>();
  private readonly kinds: readonly FreshKind[];
  /** The batches held rows came in, with how many of their rows are held and the bytes charged for them. */
  private batches = new Map<RecordBatch, { rows: number; bytes: number }>();
  /**
   * Rows by key, with the version that wrote them, their estimated bytes, where in its batch each is (when rows are
   * held: a search reads its winners there), and its primary key value.
   */
  private rows = new Map<
    bigint,
    { version: number; bytes: number; batch: RecordBatch | undefined; at: number; primaryKey: string | undefined }
  >();
  /** The row key of each held row by its primary key value. */
  private keyed = new Map<string, bigint>();
  /** Held rows by the version that wrote them. */
  private byVersion = new Map<number, number>();
  private texts = new Map<string, FreshPostings>();
  private vectors = new Map<string, FreshVectors>();
  private queue: Commit[] = [];
  private draining: Promise<void> | undefined;
  /** Searches under way, by id, with the fold their index read covers: rows after it are kept for them. */
  private readonly readers = new Map<number, number>();
  private nextReader = 0;
  /** Moves when the budget takes the rows away: reads begun before find them gone. */
  private epoch = 0;
  /** The last version committed here; after the rows were let go of, no fold before it makes them usable. */
  private lastVersion = 0;
  private floor: number | undefined;
  /** The bound the rows were last swept below: rows added since are all past it, so only a higher one sweeps. */
  private sweptBelow = Number.NEGATIVE_INFINITY;
  /** The bound the held rows' vectors were last let go of below (`sweepVectors`). */
  private vectorsBelow = Number.NEGATIVE_INFINITY;
  /** Where the rows are followed: the version they were brought up to, and the folds last read (`follow`). */
  private followedAt: number | undefined;
  private followed: Promise<void> = Promise.resolve();
  /** When the step of following under way began; undefined while none is. */
  private stepSince: number | undefined;
  /** Steps of following that removed rows (`followedMark`). */
  private removals = 0;
  private foldsRead: { version: number; ms: number } | undefined;
  /** The folds recorded for the table, as last read (`takeFolds`). */
  private foldsKnown: Partial<Record<'text' | 'vector', number>> = {};
  /** The latest fold known when the budget let go of followed rows (`refollow`). */
  private overflowFold: number | undefined;
  /** Whether the rows were let go of and commits are not kept until a fold past `floor`. */
  private dropped = false;
  private disposed = false;
  /** Estimated bytes held, queued commits included. */
  bytes = 0;
  /**
   * Whether rows are held: this node writes the table alone (or follows it, where nodes share it) and it has a search
   * index or a primary key.
   */
  readonly tracking: boolean;
  /** Whether the rows themselves are held (for searches), not only their keys. */
  private readonly holdsRows: boolean;

  constructor(
    private readonly indexes: { fts: readonly FtsIndex[]; vector: readonly VectorIndex[]; keyed?: boolean },
    soleWriter: boolean,
    private readonly tokens: (texts: readonly (string | null)[], column: string) => Promise<string[][]>,
    private readonly budget?: FreshBudget,
    private readonly matrices?: MatrixMaker,
    /** Where other nodes write the table too: the rows are followed (search indexes only: keys are looked up in Lance). */
    private readonly following?: FreshFollowing,
  ) {
    const has: Record<FreshKind, boolean> = {
      text: indexes.fts.length > 0,
      vector: indexes.vector.length > 0,
      key: indexes.keyed === true && following === undefined,
    };
    this.kinds = FRESH_KINDS.filter((kind) => has[kind]);
    this.holdsRows = has.text || has.vector;
    // A budget of nothing (`STRATA_FRESH_TIER_MB=0`) turns the tier off.
    this.tracking =
      (soleWriter || following !== undefined) &&
      this.kinds.length > 0 &&
      (budget === undefined || budget.limitBytes > 0);
    this.clear();
    // Followed rows are usable only once the first `follow` knows from where they were followed.
    if (following !== undefined) this.floor = Number.POSITIVE_INFINITY;
    if (this.tracking) budget?.join(this);
  }

  /** Whether this holds the rows a search through `kind`'s indexes misses. */
  tracks(kind: FreshKind): boolean {
    return this.tracking && this.kinds.includes(kind);
  }

  /** Whether a search through `kind`'s indexes may read them alone and this beside them. */
  usable(kind: FreshKind): boolean {
    return this.tracks(kind) && this.foldedAt.has(kind);
  }

  /** Whether the budget let go of the rows, and searches read Lance's way until a fold covers them. */
  get overflowed(): boolean {
    return this.dropped;
  }

  /**
   * Whether every row a search through the table's indexes misses is held here: each kind usable, nothing let go
   * of. Upkeep may then let a tail grow before it folds it.
   */
  get holdsTail(): boolean {
    // Followed rows are this node's alone: the others read the tail Lance's way, and upkeep folds it for them.
    return (
      this.following === undefined &&
      this.tracking &&
      this.holdsRows &&
      !this.dropped &&
      this.kinds.every((kind) => this.foldedAt.has(kind))
    );
  }

  /** Rows held. */
  get size(): number {
    return this.rows.size;
  }

  /** This node committed `version`: it removed the rows of `removed` and wrote those of `added`, with `write`. */
  committed(version: number, removed: readonly bigint[], added: readonly bigint[], write: FreshWrite): void {
    // Followed rows come from the table itself, this node's commits among them.
    if (this.following === undefined) this.hold(version, removed, added, write);
  }

  /**
   * Where nodes share the table: brings the rows held up to `version` by the rows that differ from the version
   * followed last (every node's commits, folds and compactions alike), and takes the folds upkeep recorded. The first call starts from the oldest recorded fold while the table keeps its version,
   * reading the rows written since from the bucket; otherwise (and after too large a change) the rows are usable
   * once a fold from then on is recorded. Rows are marked with the version they were followed to, never an earlier
   * one than their commit's, so that a fold lets go only of rows it covered.
   */
  async follow(version: number): Promise<void> {
    const following = this.following;
    if (following === undefined || !this.tracking || this.disposed) return;
    const next = this.followed.then(async () => {
      this.stepSince = Date.now();
      try {
        await this.followTo(following, version);
      } finally {
        this.stepSince = undefined;
      }
    });
    this.followed = next.catch(() => this.restart());
    await this.followed;
  }

  /**
   * `follow`, waited for at most `ms` from when the step under way began: false if it is not done by then. It goes
   * on, and the search that asked reads Lance's own way: a step that stalls (a bucket that stops answering) would
   * otherwise hold up every search of the table behind it.
   */
  async followWithin(version: number, ms = FOLLOW_WAIT_MS): Promise<boolean> {
    const running = this.stepSince;
    const following = this.follow(version).then(() => true);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), Math.max(0, ms - (running === undefined ? 0 : Date.now() - running)));
    });
    try {
      return await Promise.race([following, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Whether following the table up to `version` would leave `followedMark` as it is, without following it: every
   * commit after the version followed last (a step under way included) up to it only added rows or moved them
   * unchanged. A search leg that read its index need not wait for such commits: rows written after its read began
   * need not be found.
   */
  async removesNoneTo(version: number): Promise<boolean> {
    const at = this.followedAt;
    if (this.following === undefined || at === undefined) return false;
    return version <= at || this.following.removedNone(at, version);
  }

  /** Whether the rows are followed (`follow`) rather than told of this node's commits. */
  get follows(): boolean {
    return this.following !== undefined && this.tracking;
  }

  /**
   * Moves when following removed rows (another node's replace or delete, or a compaction its manifest did not say
   * was one: its rows read as removed, some perhaps into an index) or let go of them all: a search that read an
   * index beside the rows compares it before and after. Steps that only added rows leave it: an index read that
   * missed them missed rows written after it began.
   */
  get followedMark(): string {
    return `${this.removals}:${this.epoch}`;
  }

  private async followTo(following: FreshFollowing, version: number): Promise<void> {
    const epoch = this.epoch;
    const at = this.followedAt;
    if (at === undefined) {
      const folds = await following.folds();
      let from: number | undefined;
      for (const kind of this.kinds) {
        const fold = folds[kind as 'text' | 'vector'];
        from = fold === undefined || from === undefined ? fold : Math.min(from, fold);
        if (fold === undefined) break;
      }
      const changes =
        from !== undefined && from < version ? await following.changes(from, version, FOLLOW_MAX_ROWS) : undefined;
      if (epoch !== this.epoch) return;
      // A fold found meanwhile started the following: it goes on from there.
      if (this.followedAt !== undefined) return this.followTo(following, version);
      this.followedAt = version;
      this.lastVersion = Math.max(this.lastVersion, version);
      this.floor = changes !== undefined || from === version ? from : version;
      if (changes !== undefined) this.holdChanges(version, Array.from(rowKeysOf(changes.removed)), changes.added);
      this.takeFolds(folds, version);
      return;
    }
    if (version > at) {
      const changes = await following.changes(at, version, FOLLOW_MAX_ROWS);
      // Too many rows differ (a load, or a compaction read as rows removed and added): the rows outside the indexes
      // at `version` are read instead, and held in place of all held before (where the budget let go of the rows,
      // `refollow` reads them once a fold allows).
      const outside =
        changes === undefined && !this.dropped ? await following.outside(version, FOLLOW_MAX_ROWS) : undefined;
      if (epoch !== this.epoch) return;
      this.followedAt = version;
      this.lastVersion = Math.max(this.lastVersion, version);
      if (changes !== undefined) this.holdChanges(version, Array.from(rowKeysOf(changes.removed)), changes.added);
      else if (outside !== undefined) {
        this.removals++;
        this.holdChanges(version, [...this.rows.keys(), ...this.queue.flatMap((c) => c.added)], outside);
      } else {
        // What is held no longer stands for the rows outside the indexes: none are, until a fold from here.
        this.letGo();
        this.floor = version;
      }
    }
    const read = this.foldsRead;
    if (read === undefined || read.version !== version || Date.now() - read.ms > FOLDS_REFRESH_MS) {
      this.takeFolds(await following.folds(), version);
    }
    await this.refollow(following, version);
  }

  private takeFolds(folds: Partial<Record<'text' | 'vector', number>>, version: number): void {
    this.foldsRead = { version, ms: Date.now() };
    this.foldsKnown = folds;
    for (const kind of this.kinds) {
      const fold = folds[kind as 'text' | 'vector'];
      if (fold !== undefined) this.folded(fold, [kind]);
    }
  }

  /** The latest fold recorded for any kind of this table's indexes, as last read. */
  private get latestFold(): number {
    return Math.max(Number.NEGATIVE_INFINITY, ...Object.values(this.foldsKnown));
  }

  /**
   * Where the budget let go of followed rows: once upkeep recorded a fold since (it folds the largest tails first),
   * the rows outside the indexes at `version` are read and held again, which makes them usable with the folds
   * recorded (they hold every row those do not cover). Commits are not kept meanwhile, and writes going on keep
   * every later fold short of them, so waiting for one that covers them would wait for writes to pause.
   */
  private async refollow(following: FreshFollowing, version: number): Promise<void> {
    if (!this.dropped || this.latestFold <= (this.overflowFold ?? Number.NEGATIVE_INFINITY)) return;
    const epoch = this.epoch;
    const outside = await following.outside(version, FOLLOW_MAX_ROWS);
    if (epoch !== this.epoch || !this.dropped || this.followedAt !== version) return;
    if (outside === undefined) {
      this.overflowFold = this.latestFold;
      return;
    }
    this.dropped = false;
    this.floor = undefined;
    for (const kind of this.kinds) {
      const fold = this.foldsKnown[kind as 'text' | 'vector'];
      if (fold !== undefined) this.foldedAt.set(kind, Math.min(fold, version));
    }
    this.holdChanges(version, [], outside);
  }

  /**
   * The rows a step of following removed and added, held as a commit of them would be: every row it removed goes, and
   * every row it added that some index does not cover is held from this step's version (`FreshFollowing.changes`);
   * a row a compaction moved into covered fragments is no longer held (where the step read it as removed and added;
   * a compaction its manifest said was one moves no held row).
   */
  private holdChanges(version: number, removed: readonly bigint[], added: Table): void {
    if (removed.length > 0) this.removals++;
    const batches = added.batches;
    const write: FreshWrite = {
      texts: new Map(this.indexes.fts.map((f) => [f.column, batches.flatMap((b) => textsOf(b, f.column))] as const)),
      vectors: new Map(
        this.indexes.vector.map((v) => [v.column, batches.flatMap((b) => vectorsOf(b, v.column))] as const),
      ),
      rows: batches,
    };
    this.hold(version, removed, Array.from(rowKeysOf(added)), write);
  }

  /**
   * Following failed (a read of the table, or of the folds): it starts again with the next search, and no fold counts
   * until then.
   */
  private restart(): void {
    this.letGo();
    this.followedAt = undefined;
    this.floor = Number.POSITIVE_INFINITY;
  }

  private hold(version: number, removed: readonly bigint[], added: readonly bigint[], write: FreshWrite): void {
    // A write that commits after its table closed counts in nothing: its rows would hold a matrix nobody frees.
    if (!this.tracking || this.disposed) return;
    this.lastVersion = Math.max(this.lastVersion, version);
    // The write that may have landed unseen came before this one (a table's writes commit one at a time here).
    if (this.floor === Number.POSITIVE_INFINITY) this.floor = version;
    if (this.dropped) {
      this.floor = this.lastVersion;
      return;
    }
    const bytes = added.map((_, i) => this.estimate(write, i));
    const batchBytes = this.holdsRows ? write.rows.reduce((n, batch) => n + batch.data.byteLength, 0) : 0;
    this.queue.push({ version, removed, added, write, bytes, batchBytes });
    this.charge(bytes.reduce((n, b) => n + b, 0) + batchBytes);
    // Counted in at once rather than by the next search, so that the commit's batches are let go of.
    if (!this.dropped) this.drain().catch(() => undefined);
  }

  /**
   * A write of this node's may have committed without it being told (its commit failed or got no answer, or it
   * removed other rows than it said): a row outside the indexes may be missing here, and a row it removed may still
   * be held. Every held row goes (reads under way find them gone) and, until the next fold, searches and key
   * lookups read Lance's own way; the rows of later commits are held again meanwhile.
   */
  unsettled(): void {
    if (this.following !== undefined) {
      this.restart();
      return;
    }
    this.letGo();
    // A fold counts only from the next commit's version on: one that began before the lost write may not cover it.
    this.floor = Number.POSITIVE_INFINITY;
  }

  /**
   * Every row committed up to `version` is in the indexes of `kinds`: upkeep folded them, or a read of the
   * indexes' statistics at that version found none outside them.
   */
  folded(version: number, kinds: readonly FreshKind[] = FRESH_KINDS): void {
    if (this.following !== undefined && this.followedAt === undefined && this.tracking) {
      // Not followed yet: where every kind's indexes cover every row up to `version`, the rows are followed from it.
      if (!this.kinds.every((kind) => kinds.includes(kind))) return;
      this.followedAt = version;
      this.lastVersion = Math.max(this.lastVersion, version);
      this.floor = version;
    }
    if (!this.tracking || (this.floor !== undefined && version < this.floor)) return;
    this.dropped = false;
    for (const kind of kinds) {
      if (!this.tracks(kind)) continue;
      const at = this.foldedAt.get(kind);
      if (at === undefined || version > at) this.foldedAt.set(kind, version);
    }
    if (this.draining === undefined) this.sweep();
  }

  /**
   * Starts a search's read through `kind`'s indexes: taken before its index read begins, so that the rows it
   * needs here (those after the fold that index covers) stay until it ends (`end`).
   */
  begin(kind: FreshKind): FreshRead | undefined {
    const since = this.usable(kind) ? this.foldedAt.get(kind) : undefined;
    if (since === undefined) return undefined;
    const read = { since, id: this.nextReader++, epoch: this.epoch };
    this.readers.set(read.id, since);
    return read;
  }

  end(read: FreshRead): void {
    this.readers.delete(read.id);
    // A fold that landed while this read ran could not let go of the rows it still read: they go now, or every
    // later search would scan them beside the indexes that cover them, until the next write or fold.
    if (this.draining === undefined) this.sweep();
  }

  /**
   * The rows written after the read's fold that match a query's tokens over `column` (any of them, or all under
   * AND), each with its BM25 score under `stats`; the best `limit`, and every row tied with the last.
   */
  async searchText(
    read: FreshRead,
    column: string,
    query: readonly string[],
    operator: TextOperator,
    stats: CollectionStatistics,
    limit: number,
  ): Promise<{ keys: bigint[]; values: number[] }> {
    await this.drain();
    this.check(read);
    const postings = this.texts.get(column);
    if (postings === undefined) return { keys: [], values: [] };
    return postings.search(query, operator, stats, limit, read.since);
  }

  /**
   * BM25's statistics over `column` of the rows written after the read's fold, for the terms of `query`, when they
   * are exactly the rows outside the index at the search's version: as many as the index counts there (`at`), and
   * no commit of this node's since (whose rows the live statistics may count or not). Undefined otherwise (rows a
   * fold covered after all are still held here, or a write committed meanwhile).
   */
  async statisticsOutside(
    read: FreshRead,
    column: string,
    query: readonly string[],
    at: { version: number; rows: number },
  ): Promise<CollectionStatistics | undefined> {
    await this.drain();
    this.check(read);
    if (this.lastVersion > at.version) return undefined;
    if (this.rowsAfter(read.since) !== at.rows) return undefined;
    return this.texts.get(column)?.statisticsAfter(read.since, query);
  }

  /** The rows written after the read's fold nearest `query` in `column`; the best `limit` and their ties. */
  async searchVector(
    read: FreshRead,
    column: string,
    query: Float32Array,
    limit: number,
  ): Promise<{ keys: bigint[]; values: number[] }> {
    await this.drain();
    this.check(read);
    const vectors = this.vectors.get(column);
    if (vectors === undefined) return { keys: [], values: [] };
    let found: { keys: bigint[]; values: number[] } | undefined;
    try {
      found = await vectors.search(query, limit, this.after(read), this.rowsAfter(read.since));
    } catch (err) {
      if (!(err instanceof MatrixLost)) throw err;
      // The scan thread died with every table's vectors: these rows are let go of, as the budget would.
      if (read.epoch === this.epoch) this.overflow();
      throw new FreshGone();
    }
    // The scan ran on its thread: the rows may have been let go of meanwhile.
    this.check(read);
    if (found === undefined) throw new FreshGone();
    return found;
  }

  /**
   * The held rows holding each of `values` as their primary key (map keys as `FreshWrite.primaryKeys` spells them):
   * every row this node wrote since the read's fold that is still live, and perhaps some a later fold covered.
   */
  async holdingKeys(read: FreshRead, values: readonly string[]): Promise<Map<string, bigint>> {
    await this.drain();
    this.check(read);
    const found = new Map<string, bigint>();
    for (const value of values) {
      const key = this.keyed.get(value);
      if (key !== undefined) found.set(value, key);
    }
    return found;
  }

  /**
   * The rows of `keys` this holds, each a one-row slice of the batch it came in (a search reads its winners'
   * columns from them rather than by key from the store, where a row outside the indexes is found by a scan of
   * them all; indexing whole batches for a few winners cost as much).
   */
  rowsOf(keys: readonly bigint[]): RecordBatch[] {
    return keys.flatMap((key) => {
      const row = this.rows.get(key);
      return row?.batch === undefined ? [] : [row.batch.slice(row.at, row.at + 1)];
    });
  }

  /** Lets go of every row (the budget's call): reads under way find them gone, and no fold before now counts. */
  overflow(): void {
    this.letGo();
    this.dropped = true;
    this.overflowFold = this.latestFold;
    // A write lost before (`unsettled`) still waits for the next commit's version: no fold before that counts.
    if (this.floor !== Number.POSITIVE_INFINITY) this.floor = this.lastVersion;
  }

  /** Lets go of every row and every kind's fold; reads under way find them gone. */
  private letGo(): void {
    this.epoch++;
    this.foldedAt.clear();
    this.readers.clear();
    this.clear();
  }

  /** The table closed: its rows leave the budget. */
  dispose(): void {
    this.disposed = true;
    // A drain waiting on tokens must not count its commit into the rows let go of.
    this.epoch++;
    this.clear();
    this.budget?.leave(this);
  }

  /** A vector matrix was lost with the scan thread: every row goes, as when the budget lets them go. */
  private matrixLost(): void {
    if (this.tracking && !this.disposed) this.overflow();
  }

  private check(read: FreshRead): void {
    if (read.epoch !== this.epoch) throw new FreshGone();
  }

  /** Held rows written after version `since`. */
  private rowsAfter(since: number): number {
    let rows = 0;
    for (const [version, count] of this.byVersion) if (version > since) rows += count;
    return rows;
  }

  private after(read: FreshRead): (key: bigint) => boolean {
    return (key) => (this.rows.get(key)?.version ?? Number.NEGATIVE_INFINITY) > read.since;
  }

  private charge(delta: number): void {
    this.bytes += delta;
    this.budget?.charged(delta);
  }

  private clear(): void {
    this.sweptBelow = Number.NEGATIVE_INFINITY;
    this.vectorsBelow = Number.NEGATIVE_INFINITY;
    this.rows = new Map();
    this.byVersion = new Map();
    this.keyed = new Map();
    this.batches = new Map();
    this.texts = new Map(this.indexes.fts.map((f) => [f.column, new FreshPostings()] as const));
    for (const vectors of this.vectors.values()) vectors.close();
    this.vectors = new Map(
      this.indexes.vector.map(
        (v) => [v.column, new FreshVectors(v.dim, v.metric, this.matrices, () => this.matrixLost())] as const,
      ),
    );
    this.queue = [];
    this.charge(-this.bytes);
  }

  /** A written row's estimated bytes here beside its batch's: its tokens and its vectors' copies. */
  private estimate(write: FreshWrite, row: number): number {
    const primaryKey = write.primaryKeys?.[row];
    let bytes = ROW_BYTES + (primaryKey === undefined ? 0 : KEY_BYTES + KEY_BYTES_PER_CHAR * primaryKey.length);
    for (const texts of write.texts.values()) bytes += (texts[row]?.length ?? 0) * TEXT_BYTES_PER_CHAR;
    // Each vector's f32 copy and, in a large matrix, its 8-bit code (a quarter more).
    for (const vectors of write.vectors.values()) bytes += 1.25 * (vectors[row]?.byteLength ?? 0);
    return bytes;
  }

  /** The version up to which rows may go: covered by every kind's last fold and by every search under way's. */
  private get sweepable(): number | undefined {
    let below = Number.POSITIVE_INFINITY;
    for (const kind of this.kinds) below = Math.min(below, this.foldedAt.get(kind) ?? Number.NaN);
    if (Number.isNaN(below)) return undefined;
    return Math.min(below, ...this.readers.values());
  }

  /** Counts in the commits queued, in order; one drain at a time. A commit that cannot be tokenized stays queued. */
  private drain(): Promise<void> {
    const drained = (this.draining ?? Promise.resolve()).then(async () => {
      const epoch = this.epoch;
      while (this.queue.length > 0) {
        const commit = this.queue[0] as Commit;
        const below = this.sweepable;
        const docs = below !== undefined && commit.version <= below ? undefined : await this.documents(commit);
        // The budget let go of everything meanwhile, this commit included.
        if (epoch !== this.epoch) return;
        this.queue.shift();
        for (const key of commit.removed) this.remove(key);
        if (docs !== undefined) this.add(commit, docs);
        else this.charge(-commit.bytes.reduce((n, b) => n + b, commit.batchBytes));
      }
      this.sweep();
    });
    const settled = drained.catch(() => undefined);
    this.draining = settled;
    settled.then(() => {
      if (this.draining === settled) this.draining = undefined;
    });
    return drained;
  }

  /**
   * Lets go of what no search needs: rows a fold covered (unless a search under way still reads them here), and
   * queued commits that wrote only such rows (their removals still apply). Not while a drain runs (it sweeps last).
   */
  private sweep(): void {
    this.sweepVectors();
    const below = this.sweepable;
    if (below === undefined) return;
    while (this.queue.length > 0 && (this.queue[0] as Commit).version <= below) {
      const commit = this.queue.shift() as Commit;
      for (const key of commit.removed) this.remove(key);
      this.charge(-commit.bytes.reduce((n, b) => n + b, commit.batchBytes));
    }
    if (below <= this.sweptBelow) return;
    for (const [key, row] of this.rows) if (row.version <= below) this.remove(key);
    this.sweptBelow = below;
  }

  /**
   * Lets go of the vectors of rows the vector index's last fold covered, once no search under way reads them: rows a
   * fold covered stay held until every kind of index covers them (a key lookup reads them until the row key's does),
   * and every vector scan went over them too. Under 2,000 rows/s of appends at 1M rows, a scan went over ~70k rows
   * for ~3k it could answer.
   */
  private sweepVectors(): void {
    const fold = this.foldedAt.get('vector');
    if (fold === undefined || this.vectors.size === 0) return;
    const below = Math.min(fold, ...this.readers.values());
    if (below <= this.vectorsBelow) return;
    for (const [key, row] of this.rows) {
      if (row.version <= below) for (const vectors of this.vectors.values()) vectors.remove(key);
    }
    this.vectorsBelow = below;
  }

  /** A commit's rows' tokens by column, tokenized before anything here changes. */
  private async documents(commit: Commit): Promise<Map<string, string[]>[]> {
    const docs = commit.added.map(() => new Map<string, string[]>());
    for (const { column } of this.indexes.fts) {
      const tokens = await this.tokens(commit.write.texts.get(column) ?? [], column);
      tokens.forEach((row, i) => {
        if (row.length > 0) docs[i]?.set(column, row);
      });
    }
    return docs;
  }

  private add(commit: Commit, docs: Map<string, string[]>[]): void {
    const places = this.holdsRows
      ? commit.write.rows.flatMap((batch) => Array.from({ length: batch.numRows }, (_, at) => ({ batch, at })))
      : [];
    // The batches' bytes, charged with the commit, stay charged while any of their rows is held here.
    let unheld = commit.batchBytes;
    if (this.holdsRows) {
      for (const batch of commit.write.rows) {
        this.batches.set(batch, { rows: batch.numRows, bytes: batch.data.byteLength });
        unheld -= batch.data.byteLength;
      }
    }
    if (unheld !== 0) this.charge(-unheld);
    commit.added.forEach((key, i) => {
      // A replaced row's earlier version leaves first.
      this.remove(key);
      const place = places[i];
      const primaryKey = commit.write.primaryKeys?.[i];
      this.byVersion.set(commit.version, (this.byVersion.get(commit.version) ?? 0) + 1);
      this.rows.set(key, {
        version: commit.version,
        bytes: commit.bytes[i] ?? 0,
        batch: place?.batch,
        at: place?.at ?? 0,
        primaryKey,
      });
      if (primaryKey !== undefined) this.keyed.set(primaryKey, key);
      for (const [column, doc] of docs[i] ?? []) this.texts.get(column)?.add(key, doc, commit.version);
      if (commit.version > this.vectorsBelow) {
        for (const [column, vectors] of commit.write.vectors) this.vectors.get(column)?.add(key, vectors[i] ?? null);
      }
    });
  }

  private remove(key: bigint): void {
    const row = this.rows.get(key);
    if (row === undefined) return;
    this.rows.delete(key);
    const left = (this.byVersion.get(row.version) ?? 1) - 1;
    if (left === 0) this.byVersion.delete(row.version);
    else this.byVersion.set(row.version, left);
    if (row.primaryKey !== undefined && this.keyed.get(row.primaryKey) === key) this.keyed.delete(row.primaryKey);
    for (const postings of this.texts.values()) postings.remove(key);
    for (const vectors of this.vectors.values()) vectors.remove(key);
    this.charge(-row.bytes);
    const batch = row.batch === undefined ? undefined : this.batches.get(row.batch);
    if (batch !== undefined && --batch.rows === 0) {
      this.batches.delete(row.batch as RecordBatch);
      this.charge(-batch.bytes);
    }
  }
}
