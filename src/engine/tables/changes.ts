/** What a table version did to the rows: added new ones only, or changed or removed existing ones. */
export type ChangeKind = 'append' | 'rewrite';

/** How the rows of a table differ between two of its versions. */
export type Difference = 'none' | ChangeKind;

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
   * write overlapped it, in which case which version is whose is unknown and they stay unaccounted for.
   */
  async maintain<T>(currentVersion: () => Promise<number>, run: () => Promise<T>): Promise<T> {
    const before = await currentVersion();
    const generation = this.generation;
    const quiet = this.writesInFlight === 0;
    const result = await run();
    const after = await currentVersion();
    if (quiet && this.writesInFlight === 0 && generation === this.generation) {
      for (let v = before + 1; v <= after; v++) this.remember(v, 'none');
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
