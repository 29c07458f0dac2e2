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
  private writesInFlight = 0;
  /** Moves whenever a write starts or ends, so upkeep can tell whether one overlapped its commits. */
  private generation = 0;

  /** Marks a write as started; call the returned function with the version it committed (or none). */
  beginWrite(): (committed?: { version: number; kind: ChangeKind }) => void {
    this.writesInFlight++;
    this.generation++;
    let done = false;
    return (committed) => {
      if (done) return;
      done = true;
      if (committed !== undefined) this.remember(committed.version, committed.kind);
      this.writesInFlight--;
      this.generation++;
    };
  }

  /**
   * Runs a commit that leaves the rows as they were, and records the versions it made as such — unless a
   * write of this worker overlapped it, in which case which version is whose is unknown and they stay unaccounted
   * for. And only a version whose manifest shows it kept the rows (`keptRows`) is recorded: a commit no write of
   * this worker made (another process's) is then not taken for upkeep's, though a replace of whole fragments can
   * pass that check, which is why upkeep does not use this where other nodes write (`UpkeepOptions.othersWrite`).
   */
  async maintain<T>(
    currentVersion: () => Promise<number>,
    run: () => Promise<T>,
    versions: () => Promise<readonly VersionInfo[]>,
  ): Promise<T> {
    const before = await currentVersion();
    const generation = this.generation;
    const quiet = this.writesInFlight === 0;
    const result = await run();
    const after = await currentVersion();
    if (quiet && this.writesInFlight === 0 && generation === this.generation && after > before) {
      const stats = new Map((await versions()).map((v) => [v.version, v]));
      for (let v = before + 1; v <= after; v++) {
        if (keptRows(stats.get(v - 1), stats.get(v))) this.remember(v, 'none');
      }
    }
    return result;
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
