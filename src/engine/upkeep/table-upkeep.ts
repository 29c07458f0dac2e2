/**
 * What upkeep keeps about one open table between its passes, held by the table's handle so that it goes with the
 * table (`TableHandle.dispose`). All of it is this process's knowledge, worked out again after a restart.
 */
export class TableUpkeep {
  /** Consecutive upkeep commits the table's writes preempted. */
  preempted = 0;
  /** The version at which a pass last found every index caught up. */
  settled: number | undefined;
  /**
   * The version a pass saw before it last optimized the table (or first saw it). Deletes and replaces since then
   * leave no index behind, so without this their rows would never be compacted nor versions pruned.
   */
  tidied: number | undefined;
  /** The version the previous pass saw: the same version again means writes paused. */
  seen: number | undefined;
  /** When a pass first found rows outside the search indexes since they last covered every row. */
  behindSince: number | undefined;
  /**
   * Once settled, by the version it was worked out at: the time of its oldest kept version, and when the next
   * prune is due.
   */
  pruneAt: { version: number; oldest: number; at: number } | undefined;
  /** Rows the previous pass that saw the table change counted, and passes in a row it deferred (`loading`). */
  counted: number | undefined;
  deferred = 0;
  /** Rows each trained index (by its declaration's key) was last trained on, as far as this process knows. */
  readonly trainedRows = new Map<string, number>();
  /** When each trained index (by its declaration's key) whose build or retraining failed is due to be tried again. */
  readonly trainRetryAt = new Map<string, number>();
  /** When the full-text indexes may next be built again for deletions they count (`Upkeep.rebuildText`). */
  rebuildTextAfterMs = 0;

  /** Lets go of all of it: the table is closed, or upkeep no longer looks after it. */
  clear(): void {
    this.preempted = 0;
    this.settled = undefined;
    this.tidied = undefined;
    this.seen = undefined;
    this.behindSince = undefined;
    this.pruneAt = undefined;
    this.counted = undefined;
    this.deferred = 0;
    this.trainedRows.clear();
    this.trainRetryAt.clear();
    this.rebuildTextAfterMs = 0;
  }
}
