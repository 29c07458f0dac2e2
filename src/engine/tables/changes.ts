import type { VersionInfo } from '../rows/source.js';

/** What a table version did to the rows: added new ones only, or changed or removed existing ones. */
export type ChangeKind = 'append' | 'rewrite';

/** How the rows of a table differ between two of its versions. */
export type Difference = 'none' | ChangeKind;

/**
 * Whether a commit kept the rows as they were, by the row counts it left and those the one before left: the same
 * live rows, and no more rows in data files. Compaction and index commits only move or drop rows; an append or a
 * delete breaks one of the two, and so does a replace of some rows of a fragment (it adds data-file rows), but
 * not a replace of every row of whole fragments (the old fragments go as the new ones come).
 */
function keptRows(before: VersionInfo | undefined, after: VersionInfo | undefined): boolean {
  if (before === undefined || after === undefined) return false;
  return after.rows === before.rows && after.storedRows <= before.storedRows;
}

/** Where a worker's rewrites stood when a read began: how many had begun, and whether one was under way. */
export interface RewriteMark {
  begun: number;
  underWay: boolean;
}

/** How long `explained` waits for the writes under way to say their versions. */
const EXPLAIN_WAIT_MS = 2_000;

/** Versions remembered per table; older ones are forgotten and read as unknown (a full reload). */
const REMEMBERED = 4096;

/**
 * What each version of a table did to its rows, as far as this worker saw it commit: writes say whether
 * they only appended, upkeep says its versions (compaction, index folding) left the rows as they were. A
 * version nobody accounted for — another node's commit, or a write whose entry is not recorded yet — reads
 * as a rewrite, so a reader relying on this can only do more work than needed, never see stale rows.
 */
export class TableChanges {
  private readonly kinds = new Map<number, ChangeKind | 'none'>();
  /** Writes of this worker under way, by id, each with a promise settled when it ends. */
  private readonly writing = new Map<number, Promise<void>>();
  private nextWrite = 0;
  /** The rewrites of those, by id, and how many began so far. */
  private readonly rewriting = new Set<number>();
  private rewritesBegun = 0;
  /**
   * Versions upkeep made that kept the rows by their counts, waiting for the writes that were under way when it
   * ended: a version one of them claims is the write's; the rest are upkeep's.
   */
  private unclaimed: { versions: number[]; waitingFor: Set<number> }[] = [];

  /**
   * Marks a write as started, one of `kind` (a rewrite may remove rows); call the returned function with the
   * version it committed (or none).
   */
  beginWrite(kind: ChangeKind): (committed?: { version: number; kind: ChangeKind }) => void {
    const id = this.nextWrite++;
    if (kind === 'rewrite') {
      this.rewritesBegun++;
      this.rewriting.add(id);
    }
    let ended = () => {};
    this.writing.set(
      id,
      new Promise<void>((resolve) => {
        ended = resolve;
      }),
    );
    let done = false;
    return (committed) => {
      if (done) return;
      done = true;
      if (committed !== undefined) this.remember(committed.version, committed.kind);
      this.writing.delete(id);
      this.rewriting.delete(id);
      ended();
      this.settle(id, committed !== undefined);
    };
  }

  /**
   * Runs a commit that leaves the rows as they were, and records the versions it made as such. Writes of this
   * worker may commit amid it (under steady ingest they always do): each records its own version, so a version
   * between upkeep's start and end that kept the rows by its manifest's counts (`keptRows`) and that no write
   * claimed, once every write under way at the end has ended, is upkeep's. A write that ended without knowing its
   * version (its commit failed, and may have landed) leaves the versions waiting for it unaccounted for. A commit
   * no write of this worker made (another process's) could pass the counts check as a replace of whole fragments
   * does, which is why upkeep does not use this where other nodes write (`UpkeepOptions.othersWrite`).
   */
  async maintain<T>(
    currentVersion: () => Promise<number>,
    run: () => Promise<T>,
    versions: () => Promise<readonly VersionInfo[]>,
  ): Promise<T> {
    const before = await currentVersion();
    const result = await run();
    const after = await currentVersion();
    if (after > before) {
      const stats = new Map((await versions()).map((v) => [v.version, v]));
      const kept: number[] = [];
      for (let v = before + 1; v <= after; v++) if (keptRows(stats.get(v - 1), stats.get(v))) kept.push(v);
      this.unclaimed.push({ versions: kept, waitingFor: new Set(this.writing.keys()) });
      this.settle(undefined, true);
    }
    return result;
  }

  /**
   * Write `id` ended (`knows`: with its version recorded): versions no write under way may still claim become
   * upkeep's, unless a write they waited for ended without knowing its version.
   */
  private settle(id: number | undefined, knows: boolean): void {
    const waiting: typeof this.unclaimed = [];
    for (const entry of this.unclaimed) {
      if (id !== undefined && entry.waitingFor.delete(id) && !knows) continue;
      if (entry.waitingFor.size > 0) {
        waiting.push(entry);
        continue;
      }
      for (const v of entry.versions) if (!this.kinds.has(v)) this.remember(v, 'none');
    }
    this.unclaimed = waiting;
  }

  /**
   * Where the rewrites of this worker stand, for a read that must know whether one could have committed while it
   * ran (`rewroteSince`).
   */
  get rewrites(): RewriteMark {
    return { begun: this.rewritesBegun, underWay: this.rewriting.size > 0 };
  }

  /** Whether a rewrite was under way at `mark` or began since. */
  rewroteSince(mark: RewriteMark): boolean {
    return mark.underWay || this.rewritesBegun !== mark.begun;
  }

  /** Resolves once every write under way now has ended (true), or after `ms` (false). */
  async writesEnded(ms: number): Promise<boolean> {
    if (this.writing.size === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([
      Promise.all(this.writing.values()).then(() => true),
      new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), ms);
      }),
    ]);
    clearTimeout(timer);
    return ended;
  }

  /**
   * How the rows changed from `from` to `to`, with the versions nobody recorded yet explained, for a worker that
   * is its tables' one writer (only its writes and its upkeep commit; never where other nodes write). Once the
   * writes under way have ended (each records its version), a version none of them claimed is upkeep's, which
   * `maintain` records only when its step ends: it left the rows as they were if its manifest's counts say so
   * (`keptRows`). A write that may have committed without knowing its version is its caller's to distrust.
   */
  async explained(from: number, to: number, versions: () => Promise<readonly VersionInfo[]>): Promise<Difference> {
    const known = this.between(from, to);
    if (known !== 'rewrite' || to < from || to - from > REMEMBERED) return known;
    // A write stuck on its bucket must not hold up the reads that ask: past a while, the gap stays unknown.
    if (!(await this.writesEnded(EXPLAIN_WAIT_MS))) return known;
    let stats: Map<number, VersionInfo> | undefined;
    let difference: Difference = 'none';
    for (let v = from + 1; v <= to; v++) {
      let kind = this.kinds.get(v);
      if (kind === undefined) {
        stats ??= new Map((await versions()).map((s) => [s.version, s]));
        kind = keptRows(stats.get(v - 1), stats.get(v)) ? 'none' : 'rewrite';
      }
      if (kind === 'rewrite') return 'rewrite';
      if (kind === 'append') difference = 'append';
    }
    return difference;
  }

  /** How the rows changed from version `from` to version `to`. */
  between(from: number, to: number): Difference {
    if (to === from) return 'none';
    if (to < from || to - from > REMEMBERED) return 'rewrite';
    let difference: Difference = 'none';
    for (let v = from + 1; v <= to; v++) {
      const kind = this.kinds.get(v);
      if (kind === undefined || kind === 'rewrite') return 'rewrite';
      if (kind === 'append') difference = 'append';
    }
    return difference;
  }

  private remember(version: number, kind: ChangeKind | 'none'): void {
    this.kinds.set(version, kind);
    if (this.kinds.size > REMEMBERED) {
      const oldest = this.kinds.keys().next().value;
      if (oldest !== undefined) this.kinds.delete(oldest);
    }
  }
}
