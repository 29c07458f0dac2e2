import type { RecordBatch } from 'apache-arrow';
import type { Analyzer, FtsIndex } from '../indexes/registry.js';
import type { AsideObject, PositionedToken, Snapshot, TextChanges } from '../rows/source.js';
import type { Difference } from '../tables/changes.js';
import { TimeSlice } from '../time-slice.js';
import { analyze } from './analyzer.js';
import type { CollectionStatistics } from './bm25.js';
import { type ColumnCounts, decodeKept, encodeKept, MAX_KEPT_TERMS } from './kept-statistics.js';
import { tokenizeMany } from './tokenize-many.js';

/** Lance's tokens of a text under a column's analyzer, with their positions, for the texts `analyze` leaves to it. */
export type LanceTokens = (text: string, column: string) => Promise<PositionedToken[]>;

/** A text's tokens and the position of each (a word dropped for its length leaves a gap, as in Lance's index). */
export interface PositionedTokens {
  tokens: string[];
  positions: number[];
}

/** The texts of a write's rows, by full-text column (null for a null text). */
export type ColumnTexts = ReadonlyMap<string, readonly (string | null)[]>;

/** What BM25 needs of one column's live rows, kept up row by row. */
class ColumnStatistics implements CollectionStatistics {
  docs: number;
  tokens: number;
  private readonly rowsWith: Map<string, number>;

  constructor(from?: ColumnCounts) {
    this.docs = from?.docs ?? 0;
    this.tokens = from?.tokens ?? 0;
    this.rowsWith = new Map(from?.rowsWith);
  }

  /** The counts as they are now, apart from the live ones. */
  counts(): ColumnCounts {
    return { docs: this.docs, tokens: this.tokens, rowsWith: new Map(this.rowsWith) };
  }

  docsWith(term: string): number {
    return this.rowsWith.get(term) ?? 0;
  }

  /** How many terms live rows hold. */
  get termCount(): number {
    return this.rowsWith.size;
  }

  /** Every term some live row holds. */
  terms(): IterableIterator<string> {
    return this.rowsWith.keys();
  }

  /** Counts a row's tokens in (`sign` 1) or out (−1); a row without tokens is no document. */
  count(tokens: readonly string[], sign: 1 | -1): void {
    if (tokens.length === 0) return;
    this.docs += sign;
    this.tokens += sign * tokens.length;
    for (const term of new Set(tokens)) {
      const n = (this.rowsWith.get(term) ?? 0) + sign;
      if (n === 0) this.rowsWith.delete(term);
      else this.rowsWith.set(term, n);
    }
  }
}

interface Held {
  /** The version the counts are of. */
  version: number;
  columns: Map<string, ColumnStatistics>;
  /** This node's commits since, in order, counted in by the next reader rather than on the write's way. */
  queued: { version: number; texts: NonNullable<CommitTexts> }[];
}

/**
 * The texts a commit removed and added, and the version before the removed ones were read (absent when it removed
 * none): undefined when they were not read (no statistics were kept).
 */
export type CommitTexts = (TextChanges & { readAt?: number }) | undefined;

/** A commit of this node's, waiting for a build under way to take it in. */
interface Delta {
  version: number;
  texts: CommitTexts;
}

/**
 * How the table's rows differ between two versions (its change record); `explain`: with the versions nobody
 * recorded yet explained where they can be (`TableChanges.explained`).
 */
export type RowDifference = (from: number, to: number, explain: boolean) => Promise<Difference>;

/**
 * The texts of the full-text columns of the rows only `from` holds and only `to` holds (`RowSource.changedTexts`);
 * undefined when more than `maxRows` differ or a version is gone.
 */
export type ChangedTexts = (from: number, to: number, maxRows: number) => Promise<TextChanges | undefined>;

/**
 * Rows that may differ between two versions before the statistics are built again rather than followed: at least
 * this many, or half the rows. Following reads the rows that differ by id at both versions; a build reads every
 * row's texts.
 */
const BRIDGE_MIN_ROWS = 10_000;

/** Rows tokenized or counted between looks at the clock (`TimeSlice`): ~1–2 ms of work at a time. */
const SLICE_ROWS = 128;

/**
 * How often a node writes the statistics it holds to where they are kept, at most, while they move on. Upkeep prunes
 * versions older than `STRATA_VERSION_RETENTION_MS` (10 minutes by default), and kept statistics are followed from
 * their version only while the table keeps it.
 */
const KEEP_EVERY_MS = 60_000;

/** The tokens of a null text. */
const NO_TOKENS: PositionedTokens = { tokens: [], positions: [] };

/**
 * BM25's statistics of a table's full-text columns over its live rows (docs/api.md, Freshness): rows with tokens,
 * tokens, and rows per term. Built from one version of the rows on the first search that needs them, then kept
 * up by this node's commits (`committed`: the texts each removed and added). Versions that only moved rows (upkeep's,
 * as this node recorded them) carry them over; across commits it did not see (another node's, or upkeep's where
 * nodes share the table) the next search counts out and in the rows that differ between the two versions, and
 * builds them again only where too many did or the older version is gone.
 */
export class TextStatistics {
  /** Builds from every row so far; the rest of the time the statistics follow the table. */
  builds = 0;
  /** Starts from kept statistics so far, followed from their version. */
  loads = 0;
  /** The version last written to where statistics are kept, and when. */
  private written = { version: -1, atMs: 0 };
  /** A write of them under way. */
  private writing: Promise<void> | undefined;
  /** The table closed (dropped, or let go of): nothing more is written. */
  private closed = false;
  private held: Held | undefined;
  private building: { version: number; done: Promise<Held> } | undefined;
  /** Commits seen while a build runs, applied once it is done. */
  private pending: Delta[] = [];
  /** The counting in of queued commits under way (`drain`). */
  private draining: Promise<boolean> | undefined;
  /**
   * Versions up to which a write of this node's may have committed without being told (`unsettled`): gaps there
   * are not explained. Infinity until the next commit, whose version is past that write's.
   */
  private distrustUpTo: number | undefined;
  /** The tokens of lists of texts tokenized lately, by column (`tokens`). */
  private readonly tokenized = new WeakMap<readonly (string | null)[], Map<string, Promise<string[][]>>>();

  constructor(
    private readonly fts: readonly FtsIndex[],
    private readonly difference: RowDifference,
    private readonly changedTexts: ChangedTexts,
    private readonly snapshot: (version: number) => Promise<Snapshot>,
    private readonly lanceTokens: LanceTokens,
    private readonly place?: AsideObject,
  ) {}

  /** The statistics of `column` at `version`, built if need be, with the terms of its live rows. */
  async at(
    version: number,
    column: string,
  ): Promise<(CollectionStatistics & { terms(): Iterable<string> }) | undefined> {
    let held = this.held;
    if (held === undefined || !(await this.catchUp(held, version))) {
      held = await this.build(version);
      // Built of `version` itself: what its queue holds is this node's commits since.
      await this.catchUp(held, version);
    }
    this.keep(held);
    return held.columns.get(column);
  }

  /**
   * Writes the statistics held to where they are kept, in the background, when they moved on since the last write
   * and that was long enough ago. A failed write leaves the next build to read every row, as before any was kept.
   */
  private keep(held: Held): void {
    const { place, written } = this;
    if (place === undefined || this.closed || this.writing !== undefined) return;
    if (held !== this.held || held.queued.length > 0) return;
    if (held.version <= written.version || Date.now() - written.atMs < KEEP_EVERY_MS) return;
    let terms = 0;
    for (const stats of held.columns.values()) terms += stats.termCount;
    if (terms > MAX_KEPT_TERMS) return;
    // Taken now, at one version: the counts held move on while the copy is encoded.
    const version = held.version;
    const columns = new Map([...held.columns].map(([column, stats]) => [column, stats.counts()] as const));
    this.writing = encodeKept({ version, columns }, this.analyzers())
      .then((bytes) => (this.closed ? undefined : place.write(bytes)))
      .then(
        () => {
          if (version > this.written.version) this.written = { version, atMs: Date.now() };
        },
        () => {
          // Tried again a while later, not on the next search (a bucket that refuses these writes refuses them all).
          this.written = { version: this.written.version, atMs: Date.now() };
        },
      )
      .finally(() => {
        this.writing = undefined;
      });
  }

  /** The table closed: nothing more is written once the write under way, if any, ends (awaited here). */
  async close(): Promise<void> {
    this.closed = true;
    await this.writing;
  }

  private analyzers(): Map<string, Analyzer> {
    return new Map(this.fts.map((f) => [f.column, f.analyzer] as const));
  }

  /**
   * A write of this node's may have committed without it being told (its commit failed or got no answer): the
   * statistics are built again, and versions up to the next commit are never taken for upkeep's.
   */
  unsettled(): void {
    this.held = undefined;
    this.distrustUpTo = Number.POSITIVE_INFINITY;
  }

  /** The columns' texts a commit would remove must be read before it only while statistics are held or built. */
  get kept(): boolean {
    return this.held !== undefined || this.building !== undefined;
  }

  /**
   * This node committed `version`, removing rows with the `removed` texts and adding the `added` ones, counted in
   * by the next reader. A commit whose texts were not read is left to that reader's catching up (`bridge`).
   */
  committed(version: number, texts: CommitTexts): void {
    if (this.distrustUpTo === Number.POSITIVE_INFINITY) this.distrustUpTo = version;
    if (this.building !== undefined) {
      this.pending.push({ version, texts });
      return;
    }
    const held = this.held;
    if (held === undefined) return;
    // Counted already: a reader caught up past it before it was told.
    if (version <= held.version) return;
    if (version <= this.latest(held)) {
      this.held = undefined;
      return;
    }
    if (texts !== undefined) held.queued.push({ version, texts });
  }

  /** The version `held` is of once its queued commits are counted in. */
  private latest(held: Held): number {
    return held.queued.at(-1)?.version ?? held.version;
  }

  /**
   * Counts in the commits queued (tokenizing their texts), in order, and then catches up to `version` if it is later;
   * readers wait for one another, so that none reads counts half way through a commit. A commit's texts count only
   * where nothing changed the rows between the version counted and the commit: the texts it removed were read before
   * it committed, and another node may have changed those rows in between. At the first such gap the rows that
   * differ are read instead, up to the last commit queued at once. False when the rows could not be followed
   * (`bridge`): the statistics are let go of.
   */
  private catchUp(held: Held, version: number): Promise<boolean> {
    const drained = (this.draining ?? Promise.resolve(true)).then(async () => {
      while (held.queued.length > 0) {
        const next = held.queued[0] as Held['queued'][number];
        if (next.version <= held.version) {
          held.queued.shift();
          continue;
        }
        if (!(await this.unchangedSince(held, next.texts, next.version))) {
          const last = (held.queued.at(-1) as Held['queued'][number]).version;
          held.queued = [];
          if (!(await this.bridge(held, Math.max(last, version)))) return this.letGo(held);
          break;
        }
        held.queued.shift();
        await this.apply(held, next.version, next.texts);
      }
      return version <= held.version || (await this.bridge(held, version)) || this.letGo(held);
    });
    this.draining = drained.catch(() => false);
    return drained;
  }

  private letGo(held: Held): false {
    held.queued = [];
    if (this.held === held) this.held = undefined;
    return false;
  }

  /**
   * Brings `held` to `version`: at once where the rows are the same (upkeep's versions), else by counting out the
   * rows only its version holds and in those only `version` holds (another node's commits, or ones this node was
   * not told the texts of), when the table still keeps its version and not too many rows changed.
   */
  private async bridge(held: Held, version: number, explain = true): Promise<boolean> {
    if (version <= held.version) return true;
    try {
      if (!(await this.unchanged(held.version, version, explain))) {
        let docs = 0;
        for (const stats of held.columns.values()) docs = Math.max(docs, stats.docs);
        const changes = await this.changedTexts(held.version, version, Math.max(BRIDGE_MIN_ROWS, docs / 2));
        if (changes === undefined) return false;
        await this.apply(held, version, changes);
      }
    } catch {
      // A read of either version failed (pruned meanwhile, a store error): building from every row answers instead.
      return false;
    }
    held.version = version;
    return true;
  }

  /**
   * Whether a commit of this node's at `version` may be counted in by its texts: nothing changed the rows since
   * `held`'s version, nor since its removed texts were read.
   */
  private unchangedSince(held: Held, texts: NonNullable<CommitTexts>, version: number): Promise<boolean> {
    return this.unchanged(Math.min(held.version, texts.readAt ?? held.version), version - 1);
  }

  /** Whether the rows at `to` are those at `from`; versions a lost write may have made are not explained. */
  private async unchanged(from: number, to: number, mayExplain = true): Promise<boolean> {
    const explain = mayExplain && (this.distrustUpTo === undefined || from >= this.distrustUpTo);
    return (await this.difference(from, to, explain)) === 'none';
  }

  private build(version: number): Promise<Held> {
    if (this.building?.version === version) return this.building.done;
    const started = this.fromKept(version).then((held) => held ?? this.scan(version));
    const done = started.then(async (held) => {
      const deltas = this.pending.filter((d) => d.version > held.version).sort((a, b) => a.version - b.version);
      // Those the build's version already holds are passed over.
      // A commit whose texts were not read, or one after a change between, ends it: the search's catching up reads
      // the rows that differ.
      for (const { version: at, texts } of deltas) {
        if (at <= held.version) continue;
        if (texts === undefined || !(await this.unchangedSince(held, texts, at))) break;
        await this.apply(held, at, texts);
      }
      return held;
    });
    const building = { version, done };
    this.building = building;
    done.then(
      (held) => {
        if (this.building !== building) return;
        this.building = undefined;
        this.pending = [];
        this.held = held;
      },
      () => {
        if (this.building === building) this.building = undefined;
      },
    );
    return done;
  }

  /**
   * The kept statistics followed to `version`, when some are kept of an earlier version the table still keeps and
   * not too many rows changed since; undefined otherwise.
   */
  private async fromKept(version: number): Promise<Held | undefined> {
    const bytes = await this.place?.read().catch(() => undefined);
    if (bytes === undefined) return undefined;
    const kept = await decodeKept(bytes, this.analyzers()).catch(() => undefined);
    if (kept === undefined || kept.version > version) return undefined;
    const columns = new Map(
      [...kept.columns].map(([column, counts]) => [column, new ColumnStatistics(counts)] as const),
    );
    const held: Held = { version: kept.version, columns, queued: [] };
    // Kept versions may be another process's (this one before a restart): only this process's own commits may be told
    // from upkeep's by their row counts, so the rows that differ are read.
    if (!(await this.bridge(held, version, false))) return undefined;
    this.loads++;
    // What is kept is as new as what was read, whatever this node writes next.
    if (kept.version > this.written.version) this.written = { version: kept.version, atMs: this.written.atMs };
    return held;
  }

  /** Every live row's texts at `version`, counted. */
  private async scan(version: number): Promise<Held> {
    this.builds++;
    const columns = new Map(this.fts.map((f) => [f.column, new ColumnStatistics()] as const));
    const view = await this.snapshot(version);
    // A build holds nothing a reader sees until it ends: it may hand the event loop back between any two rows.
    const slice = new TimeSlice();
    try {
      for await (const batch of view.scan(
        this.fts.map((f) => f.column),
        undefined,
      )) {
        for (const fts of this.fts) {
          const stats = columns.get(fts.column) as ColumnStatistics;
          const rows = await this.plainTokens(textsOf(batch, fts.column), fts, slice);
          for (let i = 0; i < rows.length; i++) {
            if (i % SLICE_ROWS === 0) await slice.pause();
            stats.count(rows[i] as string[], 1);
          }
        }
      }
    } finally {
      view.close();
    }
    return { version, columns, queued: [] };
  }

  /** Counts a change in: every text tokenized first, so that a tokenizer's failure leaves the counts as they were. */
  private async apply(held: Held, version: number, texts: TextChanges): Promise<void> {
    const tokens = await Promise.all(
      this.fts.map(async (fts) => ({
        stats: held.columns.get(fts.column) as ColumnStatistics,
        removed: await this.tokens(texts.removed.get(fts.column) ?? [], fts),
        added: await this.tokens(texts.added.get(fts.column) ?? [], fts),
      })),
    );
    for (const { stats, removed, added } of tokens) {
      for (const row of removed) stats.count(row, -1);
      for (const row of added) stats.count(row, 1);
    }
    held.version = version;
  }

  /** Each text's tokens under a full-text column's analyzer (none for a null text). */
  tokensOf(texts: readonly (string | null)[], column: string): Promise<string[][]> {
    const fts = this.fts.find((f) => f.column === column);
    if (fts === undefined) throw new Error(`column "${column}" has no full-text index`);
    return this.tokens(texts, fts);
  }

  /** Each text's tokens under a full-text column's analyzer, with their positions (phrases need them). */
  positionedTokensOf(texts: readonly (string | null)[], column: string): Promise<PositionedTokens[]> {
    const fts = this.fts.find((f) => f.column === column);
    if (fts === undefined) throw new Error(`column "${column}" has no full-text index`);
    return this.analyzed(
      texts,
      fts,
      (text) => {
        const positions: number[] = [];
        const tokens = analyze(text, fts.analyzer, positions);
        return tokens === undefined ? undefined : { tokens, positions };
      },
      (lance) => lance,
    );
  }

  /**
   * Each text's tokens here where the service's own analyzer can make them, the rest from Lance, many texts a call
   * (`tokenizeMany`): one call per text cost ~0.35 ms, and a stemmed column's statistics of 12k rows took 8.6 s.
   * `here` (undefined where only Lance can) and `fromLance` shape each text's tokens, so that a statistics build makes
   * no positions it never reads.
   */
  private async analyzed<T>(
    texts: readonly (string | null)[],
    fts: { column: string; analyzer: Analyzer },
    here: (text: string) => T | undefined,
    fromLance: (tokens: PositionedTokens) => T,
    slice = new TimeSlice(),
  ): Promise<T[]> {
    const out: T[] = new Array(texts.length);
    const left: number[] = [];
    for (let i = 0; i < texts.length; i++) {
      if (i % SLICE_ROWS === 0) await slice.pause();
      const text = texts[i] as string | null;
      // A null text has no tokens (under a stemming analyzer `here` leaves even '' to Lance).
      const made = text === null ? fromLance(NO_TOKENS) : here(text);
      if (made === undefined) left.push(i);
      else out[i] = made;
    }
    if (left.length > 0) {
      const lance = await tokenizeMany(
        left.map((i) => texts[i] as string),
        (text) => this.lanceTokens(text, fts.column),
      );
      left.forEach((i, j) => {
        out[i] = fromLance(lance[j] as PositionedTokens);
      });
    }
    return out;
  }

  /** Each text's tokens without their positions. */
  private plainTokens(
    texts: readonly (string | null)[],
    fts: { column: string; analyzer: Analyzer },
    slice?: TimeSlice,
  ): Promise<string[][]> {
    return this.analyzed(
      texts,
      fts,
      (text) => analyze(text, fts.analyzer),
      (lance) => lance.tokens,
      slice,
    );
  }

  /**
   * Each text's tokens, once per list of texts: a commit hands the same list of a column's texts to these statistics
   * and to the fresh rows, which tokenized every appended row twice (tokenizing was 8% of the server's busy
   * JavaScript time under steady ingest, profiled). Readers never change the tokens.
   */
  private tokens(texts: readonly (string | null)[], fts: { column: string; analyzer: Analyzer }): Promise<string[][]> {
    let byColumn = this.tokenized.get(texts);
    if (byColumn === undefined) {
      byColumn = new Map();
      this.tokenized.set(texts, byColumn);
    }
    let tokens = byColumn.get(fts.column);
    if (tokens === undefined) {
      tokens = this.plainTokens(texts, fts);
      byColumn.set(fts.column, tokens);
      // A failure is not remembered: the next reader tokenizes again.
      const cached = byColumn;
      tokens.catch(() => cached.delete(fts.column));
    }
    return tokens;
  }
}

/** A text column of a batch as strings (null for null). */
export function textsOf(batch: RecordBatch, column: string): (string | null)[] {
  const vector = batch.getChild(column);
  if (vector === null) return [];
  return Array.from({ length: batch.numRows }, (_, i) => (vector.get(i) as string | null) ?? null);
}
