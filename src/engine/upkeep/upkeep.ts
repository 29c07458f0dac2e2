import { behindOf, type DeclaredIndex, declaredIndexes, type IndexSpec, storedIndexOf } from '../indexes/registry.js';
import type { EngineLog } from '../log.js';
import { CommitConflict, type IndexInfo, UpkeepProcessGone } from '../rows/source.js';
import { ROW_KEY } from '../tables/schema.js';
import type { TableHandle, Tables } from '../tables/tables.js';

/** Whether a pass folds at once the rows a table's fresh rows hold, or may leave them to a later pass. */
export type HeldTails = 'fold' | 'wait';

/** Whether upkeep may commit on a node: one switch every worker's upkeep reads. */
export interface UpkeepPause {
  paused: boolean;
}

export interface UpkeepOptions {
  /** Pause between passes over a database's open tables. */
  intervalMs: number;
  /**
   * An index upkeep trains (a vector column's ANN index) is built once its table holds this many rows; below,
   * exact scans win.
   */
  annMinRows: number;
  /**
   * Rows outside the search indexes that this node holds in its fresh rows (`FreshRows.holdsTail`) are folded by a
   * pass of the interval once writes pause, or once they number `rows` or are `ms` old: searched beside the
   * indexes they cost a search little, while each fold of a large table takes a core for seconds
   * (docs/performance.md, Fresh rows under ingest). No explicit pass (`run()`) waits.
   */
  heldTail: { rows: number; ms: number };
  /** Table versions older than this are pruned. */
  retainMs: number;
  /**
   * No pass runs (nor commits anything) while set: `STRATA_UPKEEP_PAUSED` at start, the admin route
   * (`PUT /v1/admin/upkeep`) at run time.
   */
  pause: UpkeepPause;
  /**
   * Whether other nodes write these tables too (a shared control store). Their commits can fall between upkeep's
   * own, and no statistic of a version tells a replace of whole fragments from a compaction: upkeep's versions
   * are then left unaccounted for, and SQL reloads what they touched as it does for any other node's commit.
   */
  othersWrite: boolean;
}

/**
 * What an upkeep step did: fold new rows into the indexes (compacting and pruning with it), prune an idle table,
 * or build or train again an index of a kind upkeep trains (`ann_build`, `ann_retrain`).
 */
export type UpkeepWork = 'optimize' | 'prune' | `${IndexSpec['type']}_build` | `${IndexSpec['type']}_retrain`;

/**
 * Which node looks after a table: one at a time across every node of a deployment. `acquire` takes or renews
 * the table's lease for this node before a pass; a lease not renewed lapses, and another node takes over. A table
 * dropped (on any node), or of a database being deleted, has no lease to take: `dropped`. `renew` keeps the
 * lease of a pass under way, even through its database's deletion, whose purge waits for the pass to end.
 */
export interface UpkeepLeases {
  /** How long a lease lasts unrenewed. */
  readonly ms: number;
  acquire(tableId: string): Promise<{ held: boolean; tookOver: boolean; dropped: boolean }>;
  renew(tableId: string): Promise<boolean>;
  release(tableId: string): Promise<void>;
  /** Upkeep committed work on the table now (shown by `list_tables`). */
  upkept(tableId: string): Promise<void>;
}

/** Told of upkeep's work as it happens (the service counts it for `/metrics`). */
export interface UpkeepObserver {
  /** An upkeep step finished: what it was and how long it took. */
  done(work: UpkeepWork, seconds: number): void;
  /** A pass over a table failed; the next pass tries again. */
  failed(): void;
  /** This node took a table's upkeep over from another node whose lease ran out. */
  tookOver(): void;
}

/** Upkeep commits lost to concurrent writes before upkeep waits its turn in the table's write queue. */
const MAX_PREEMPTED = 3;

/**
 * Fragments under Lance's compaction target that make upkeep optimize a table whose only index behind is the
 * row key's. `optimize()` always compacts too, and compaction rewrites every fragment under 1M rows: folded on
 * every pass, 100 appends of 10k × 384-d rows left 7.5 GB on disk for 1.5 GB of rows (1.5 GB without upkeep).
 * Unindexed row keys cost little meanwhile (a scan of one integer column of the new fragments).
 */
const SMALL_FRAGMENTS_TO_COMPACT = 32;

/**
 * A trained index (ANN) is trained again from all rows once folds have left it in more segments than this, or the
 * table has grown to `ANN_REGROWTH` times the rows it was trained on. Each fold adds a segment that every query
 * searches, and partitions stay those of the first training: measured at 400k × 384 grown from 25k in
 * 25k-row folds, 8 segments answered in 9.7 ms, the same index trained again in 5.8 ms (one segment, 11 s).
 */
export const MAX_ANN_SEGMENTS = 4;
const ANN_REGROWTH = 4;

/**
 * The least time between two rebuilds of a table's full-text indexes for deletions they still count
 * (`rebuildText`): at 200k rows one took 0.66 s of the upkeep process, and a table deleted from without pause
 * would otherwise have it rebuilt on every pass.
 */
const REBUILD_TEXT_MS = 60_000;

/**
 * A table that grew since the previous pass by at least this many rows and by an eighth of what it held is being
 * loaded: its upkeep waits (at most `MAX_DEFERRED_PASSES` passes in a row), as an index built now would be folded
 * into or retrained within a few passes while taking the cores the load needs (docs/performance.md, Loading
 * files). A table first seen this large waits one pass, which tells whether it is being loaded.
 */
const LOADING_MIN_ROWS = 10_000;
const MAX_DEFERRED_PASSES = 6;

/**
 * A trained index that failed to build is tried again after this long (its column searched exactly meanwhile); its
 * table's other upkeep goes on.
 */
const ANN_RETRY_MS = 60_000;

/**
 * Background index upkeep of one database's open tables: build the ANN index when a vector column outgrows
 * the exact scan, fold new rows into every index, compact small fragments and prune old versions
 * (`optimize()`). One table at a time, never blocking a read, and beside the table's writes (see `commit`).
 * The heavy work runs in the upkeep process, at a lower priority than searches (`UpkeepProcess`); the checks
 * that decide it run here. A failed pass is logged and tried again on the next one.
 */
export class Upkeep {
  private timer: NodeJS.Timeout | undefined;
  private pass: Promise<void> | undefined;
  private stopped = false;
  // What upkeep keeps of each table is the table's own (`TableHandle.upkeep`), and goes when it closes.
  /** Tables whose upkeep lease this node holds. */
  private readonly leased = new Set<string>();
  /**
   * Tables dropped while open here (through another node, or while a pass ran): a handle another node's drop left
   * open stays so until the worker goes, but gets no more upkeep (a purged one would fail every pass). Table ids
   * are never reused.
   */
  private readonly dropped = new Set<string>();

  constructor(
    private readonly tables: Tables,
    private readonly options: UpkeepOptions,
    private readonly log: EngineLog,
    private readonly observer: UpkeepObserver,
    private readonly leases: UpkeepLeases,
  ) {}

  /** Whether upkeep is paused on this node (`STRATA_UPKEEP_PAUSED`, or the admin route). */
  get paused(): boolean {
    return this.options.pause.paused;
  }

  /** Whether a pass is under way. */
  get passing(): boolean {
    return this.pass !== undefined;
  }

  /** Resolves once the pass under way, if any, has ended (a pause waits for it: nothing commits after). */
  async settled(): Promise<void> {
    await this.pass?.catch(() => undefined);
  }

  /** Tables whose upkeep this database's worker holds the lease of. */
  get leasesHeld(): number {
    return this.leased.size;
  }

  /**
   * Rows searches of the open tables whose upkeep this node holds scan by brute force (the most any one search
   * index of a table misses, summed over tables), as this node's writes and folds leave them (`UnindexedRows`).
   */
  unindexedRows(): number {
    let rows = 0;
    for (const table of this.tables.opened()) {
      if (this.leased.has(table.record.tableId)) rows += table.unindexed.last?.behind ?? 0;
    }
    return rows;
  }

  start(): void {
    this.timer = setInterval(() => this.nudge(), this.options.intervalMs);
    this.timer.unref();
  }

  /**
   * Starts a pass now unless one is running: the interval's tick (which may leave held tails, `heldTails`), and a
   * write that left a table's rows far enough ahead of its indexes (the worker's `adding` and `admit`, which fold
   * at once), so that backpressure releases.
   */
  nudge(heldTails: HeldTails = 'wait'): void {
    if (this.pass !== undefined || this.stopped || this.options.pause.paused) return;
    this.run(heldTails).catch((err: unknown) =>
      this.log.warn({ err }, 'an upkeep pass failed; the next one tries again'),
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    await this.pass;
    // Handed back, so that another node takes over at once rather than after the lease runs out.
    await Promise.allSettled([...this.leased].map((id) => this.leases.release(id)));
    this.leased.clear();
  }

  /**
   * One pass over every open table, after the one under way if any (passes never overlap); exposed so tests and
   * benchmarks can wait for a settled state. `heldTails` says whether it folds the rows the fresh rows hold at once
   * (an explicit pass) or may leave them to a later pass (the interval's, `UpkeepOptions.heldTail`).
   */
  run(heldTails: HeldTails = 'fold'): Promise<void> {
    const pass = (this.pass ?? Promise.resolve()).then(() => this.passOnce(heldTails));
    const running = pass
      .catch(() => undefined)
      .finally(() => {
        if (this.pass === running) this.pass = undefined;
      });
    this.pass = running;
    return pass;
  }

  private async passOnce(heldTails: HeldTails): Promise<void> {
    if (this.options.pause.paused) return;
    const open = new Map<string, TableHandle>();
    const handles = await Promise.all(
      this.tables.openHandles().map((handle) =>
        handle.then(
          (table) => ({ table, opened: handle }),
          () => ({ table: undefined, opened: handle }),
        ),
      ),
    );
    // Tables whose fresh rows the budget let go of are folded first: their searches read Lance's slower way until then.
    const first = (t: TableHandle | undefined) => (t?.fresh.overflowed === true ? 0 : 1);
    handles.sort((a, b) => first(a.table) - first(b.table));
    for (const { opened } of handles) {
      // A pause set meanwhile lets this table's step (under way) end, and starts no other.
      if (this.stopped || this.options.pause.paused) return;
      let id: string | undefined;
      try {
        const table = await opened;
        id = table.record.tableId;
        open.set(id, table);
        if (this.dropped.has(id)) continue;
        await this.leasing(table, () => this.upkeep(table, heldTails));
      } catch (err) {
        if (this.stopped) return; // its work was cut short by the shutdown
        // Dropped while its pass ran (a purge removes the files the job reads): not a failure, and not retried.
        if (id !== undefined && (await this.droppedMeanwhile(id))) continue;
        this.observer.failed();
        this.log.warn({ err }, 'index upkeep failed; retrying on the next pass');
      }
    }
    for (const id of this.dropped) if (!open.has(id)) this.dropped.delete(id);
    for (const id of this.leased) {
      if (open.has(id)) continue;
      this.leased.delete(id);
      await this.leases.release(id).catch(() => undefined);
    }
    // A closed table's bookkeeping went with it; a dropped one left open has no more upkeep to keep.
    for (const [id, table] of open) if (this.dropped.has(id)) table.upkeep.clear();
  }

  /**
   * Lets go of a table being dropped here: no pass step starts on it from now. A job under way is not waited for
   * (an index build may take minutes): it fails once its dataset is gone, and writes nothing back.
   */
  leave(id: string): void {
    this.markDropped(id);
  }

  /** Whether the table left the catalog (`acquire` says so, and takes no lease then). */
  private async droppedMeanwhile(id: string): Promise<boolean> {
    const lease = await this.leases.acquire(id).catch(() => undefined);
    if (lease?.dropped !== true) return false;
    this.markDropped(id);
    return true;
  }

  /** Ends this node's upkeep of a dropped table: its lease ended with the drop (the pass forgets the rest). */
  private markDropped(id: string): void {
    this.dropped.add(id);
    this.leased.delete(id);
  }

  /**
   * Runs a table's upkeep if this node holds its lease (taking it when free or lapsed), renewing the lease while
   * the work lasts. Another node's table is left alone, and its unindexed rows are that node's to report.
   */
  private async leasing(table: TableHandle, work: () => Promise<void>): Promise<void> {
    const id = table.record.tableId;
    const lease = await this.leases.acquire(id);
    if (lease.dropped) {
      this.markDropped(id);
      return;
    }
    if (!lease.held) {
      this.leased.delete(id);
      return;
    }
    if (lease.tookOver) this.observer.tookOver();
    this.leased.add(id);
    const renew = setInterval(
      () => {
        this.leases.renew(id).then(
          (renewed) => {
            if (!renewed) this.leased.delete(id);
          },
          () => undefined,
        );
      },
      Math.max(100, Math.floor(this.leases.ms / 3)),
    );
    renew.unref();
    try {
      await work();
    } finally {
      clearInterval(renew);
    }
  }

  private async upkeep(table: TableHandle, heldTails: HeldTails): Promise<void> {
    // A table untouched since a pass found nothing to do is skipped: index stats are not free at 1M rows,
    // and a pass runs every few seconds beside the searches.
    const kept = table.upkeep;
    const version = await table.rows.version();
    const quiet = kept.seen === version;
    kept.seen = version;
    if (kept.settled === version) {
      await this.pruneIdle(table, version);
      return;
    }
    // Written by another node, or first seen: what its indexes miss is read once for this version.
    await table.unindexed.at(version);
    if (!quiet && (await this.loading(table))) return;
    kept.tidied ??= version;
    const indices = await table.rows.indexes();
    const trained = declaredIndexes(table.indexes).filter((d) => d.upkeep === 'train');
    const missing = trained.filter((d) => storedIndexOf(d, indices) === undefined);
    const rows = missing.length > 0 ? await table.rows.count() : 0;
    const needsAnn = rows >= this.options.annMinRows && missing.length > 0;
    // Whether this pass committed new index files, which queries would otherwise load as they touch them.
    let reindexed = false;
    let built = 0;
    if (needsAnn) {
      for (const declared of missing) {
        if (await this.train(table, declared, false)) {
          kept.trainedRows.set(declared.key, rows);
          built++;
        }
      }
    } else {
      built = await this.retrainOutgrown(table, trained, indices);
    }
    reindexed = built > 0;
    // Trained from every row of a version from this one on: where every vector index was, they cover it all.
    if (built > 0 && built === trained.length && trained.length === table.indexes.vector.length) {
      table.folded(version, ['vector']);
    }
    if (reindexed) table.unindexed.folded();
    const { searchBehind, keysBehind } = await this.behindOf(table, version);
    const rewritten = table.changes.between(kept.tidied ?? version, version) === 'rewrite';
    // Search indexes are folded at once, unless this node holds what they miss and writes go on
    // (`UpkeepOptions.heldTail`); the row key's waits until writes pause or enough small fragments pile up.
    const behindSince = searchBehind === 0 ? undefined : (kept.behindSince ?? Date.now());
    kept.behindSince = behindSince;
    const { heldTail } = this.options;
    const held =
      heldTails === 'wait' &&
      behindSince !== undefined &&
      searchBehind < heldTail.rows &&
      Date.now() - behindSince < heldTail.ms &&
      !quiet &&
      !rewritten &&
      table.fresh.holdsTail;
    const due =
      (searchBehind > 0 && !held) ||
      rewritten ||
      (keysBehind && (quiet || (await table.rows.smallFragments()) >= SMALL_FRAGMENTS_TO_COMPACT));
    if (due) {
      const optimized = await this.optimize(table, 'optimize');
      // From the version this pass saw: if a write overlapped, its version and upkeep's own are not all
      // accounted for, so the next pass optimizes again rather than miss the write.
      if (optimized) {
        // What the pass found behind is folded in; rows written meanwhile are counted again from the statistics.
        table.unindexed.folded();
        table.folded(version);
        kept.tidied = version;
        kept.behindSince = undefined;
        await table.rows.compacted();
        reindexed = true;
      }
    } else if (searchBehind === 0 && !keysBehind && !needsAnn && !(await this.rebuildText(table, version))) {
      kept.settled = version;
    }
    if (reindexed) {
      // What the indexes miss now, for `strata_unindexed_rows` (and the next search) rather than the next pass.
      await table.unindexed.at(await table.rows.version());
      await table.rows.warm().catch((err: unknown) => {
        this.log.warn({ err }, 'warming indexes after upkeep failed; queries load them as they go');
      });
    }
  }

  /**
   * Builds a caught-up table's full-text indexes again when they still count rows deleted or replaced since (a
   * compaction drops deletions only from fragments a tenth deleted or more): their BM25 statistics then describe
   * the live rows again, and searches take Lance's scores instead of scoring their candidates themselves
   * (docs/api.md, Freshness). At most every `REBUILD_TEXT_MS` per table; true when it tried.
   */
  private async rebuildText(table: TableHandle, version: number): Promise<boolean> {
    const text = declaredIndexes(table.indexes).filter((d) => d.stored.type === 'text');
    if (text.length === 0 || Date.now() < table.upkeep.rebuildTextAfterMs) return false;
    const state = await table.unindexed.at(version);
    if (!table.unindexed.countsDeleted(state)) return false;
    table.upkeep.rebuildTextAfterMs = Date.now() + REBUILD_TEXT_MS;
    let rebuilt = true;
    for (const declared of text) rebuilt = (await this.train(table, declared, true)) && rebuilt;
    if (rebuilt) {
      table.unindexed.rebuilt(version);
      table.folded(version, ['text']);
    }
    await table.unindexed.at(await table.rows.version());
    return true;
  }

  /**
   * The most rows any declared index of the table is behind at `version` (`UnindexedRows`), and whether the row
   * key's index misses any now.
   */
  private async behindOf(table: TableHandle, version: number): Promise<{ searchBehind: number; keysBehind: boolean }> {
    const searchBehind = (await table.unindexed.at(version)).behind;
    const keys = (await table.rows.indexes()).find((i) => i.columns.includes(ROW_KEY));
    const keysBehind = keys !== undefined && behindOf(await table.rows.indexStats(keys.name)) > 0;
    return { searchBehind, keysBehind };
  }

  /**
   * Whether a table that changed since the previous pass is being loaded (`LOADING_MIN_ROWS`), so that this pass
   * leaves it be.
   */
  private async loading(table: TableHandle): Promise<boolean> {
    const kept = table.upkeep;
    const rows = await table.rows.count();
    const before = kept.counted;
    kept.counted = rows;
    const deferred = kept.deferred;
    const grown = rows - (before ?? 0);
    if (grown < LOADING_MIN_ROWS || grown * 8 < (before ?? 0) || deferred >= MAX_DEFERRED_PASSES) {
      kept.deferred = 0;
      return false;
    }
    kept.deferred = deferred + 1;
    return true;
  }

  /**
   * Folds, compacts and prunes (`optimize()`); true when it committed. The version found latest outlives the
   * compaction that replaces it: its files must last until the new ones are durable (`commit` syncs after the
   * call), or a power cut during that sync could leave the new files torn and the old ones deleted. A later pass
   * prunes it.
   */
  private async optimize(table: TableHandle, work: 'optimize' | 'prune'): Promise<boolean> {
    const latest = (await table.rows.versions()).at(-1)?.timestamp.getTime() ?? Date.now();
    const cutoff = new Date(Math.min(Date.now() - this.options.retainMs, latest - 1));
    return this.commit(table, work, () => table.rows.optimize(cutoff));
  }

  /**
   * Prunes a settled table's old versions once the oldest passes the retention (optimize then has nothing else
   * to do, and commits nothing). Otherwise only upkeep after its next write would: an idle table kept for good
   * the files its last compaction replaced (bench:sql's 1M-row table held 7.5 GB on disk, its latest version
   * about 1.6 GB of them).
   */
  private async pruneIdle(table: TableHandle, version: number): Promise<void> {
    const kept = table.upkeep;
    const oldest = async () => {
      const versions = await table.rows.versions();
      return versions.length > 1 ? (versions[0]?.timestamp.getTime() ?? 0) : Number.POSITIVE_INFINITY;
    };
    let due = kept.pruneAt;
    if (due?.version !== version) {
      const first = await oldest();
      due = { version, oldest: first, at: first + this.options.retainMs };
      kept.pruneAt = due;
    }
    if (Date.now() < due.at) return;
    await this.optimize(table, 'prune');
    // A version Lance would not prune (its oldest kept is unchanged) is tried again a retention later, not every pass.
    const after = await oldest();
    const next = (after === due.oldest ? Date.now() : after) + this.options.retainMs;
    kept.pruneAt = { version, oldest: after, at: next };
  }

  /**
   * Trains an index of a kind upkeep trains again when folds have split it into too many segments or the table
   * outgrew it; answers how many it trained.
   */
  private async retrainOutgrown(
    table: TableHandle,
    trained: readonly DeclaredIndex[],
    indices: readonly IndexInfo[],
  ): Promise<number> {
    let retrained = 0;
    for (const declared of trained) {
      const index = storedIndexOf(declared, indices);
      const stats = index === undefined ? undefined : await table.rows.indexStats(index.name);
      if (stats === undefined) continue;
      const trainedRows = table.upkeep.trainedRows;
      // Unknown after a restart: taken as trained on what it holds now, so only its segments count.
      const trainedOn = trainedRows.get(declared.key) ?? stats.indexedRows;
      trainedRows.set(declared.key, trainedOn);
      if (stats.segments <= MAX_ANN_SEGMENTS && stats.indexedRows < ANN_REGROWTH * trainedOn) continue;
      const rows = await table.rows.count();
      if (await this.train(table, declared, true)) {
        trainedRows.set(declared.key, rows);
        retrained++;
      }
    }
    return retrained;
  }

  /**
   * Builds (or with `replace` trains again) a declaration's trained index; true when it committed. A failure is
   * logged, counted and tried again `ANN_RETRY_MS` later, without holding up the table's other upkeep (folding,
   * compaction, pruning).
   */
  private async train(table: TableHandle, declared: DeclaredIndex, replace: boolean): Promise<boolean> {
    const retryAt = table.upkeep.trainRetryAt;
    if ((retryAt.get(declared.key) ?? 0) > Date.now()) return false;
    const work: UpkeepWork = `${declared.stored.type}_${replace ? 'retrain' : 'build'}`;
    try {
      return await this.commit(table, work, () => table.rows.train(declared.stored, replace));
    } catch (err) {
      // The process's end is no verdict on the job: the next pass tries again. A drop ends the table's upkeep.
      if (err instanceof UpkeepProcessGone || this.stopped || (await this.droppedMeanwhile(table.record.tableId))) {
        throw err;
      }
      retryAt.set(declared.key, Date.now() + ANN_RETRY_MS);
      this.observer.failed();
      this.log.warn(
        { err, table: table.record.tableId, column: declared.column, index: declared.stored.type },
        'training an index failed; its column is searched exactly meanwhile; trying again in a minute',
      );
      return false;
    }
  }

  /**
   * Runs an upkeep job in the upkeep process, beside the table's writes. Measured here: a write never fails for it, but a
   * compaction loses to any update or delete that commits first ("Retryable commit conflict"). So upkeep
   * retries on the next pass, and after `MAX_PREEMPTED` lost passes in a row takes its turn in the table's
   * write queue once, so a table written without pause still gets its indexes caught up. True when it
   * committed.
   */
  private async commit(table: TableHandle, work: UpkeepWork, run: () => Promise<void>): Promise<boolean> {
    const kept = table.upkeep;
    const lost = kept.preempted;
    const started = performance.now();
    try {
      // Recorded as leaving the rows unchanged, so SQL does not reload a table for its upkeep; not where other
      // nodes write (`othersWrite`).
      const maintain = () =>
        this.options.othersWrite
          ? run()
          : table.changes.maintain(
              () => table.rows.version(),
              run,
              () => table.rows.versions(),
            );
      await (lost >= MAX_PREEMPTED ? table.writes.run(maintain) : maintain());
      kept.preempted = 0;
      // What it rewrote replaces rows that were durable: a power cut must not leave versions naming lost files.
      await table.rows.sync();
      this.observer.done(work, (performance.now() - started) / 1000);
      // Only a figure for people (`list_tables`): a store that does not answer now must not fail the pass.
      await this.leases.upkept(table.record.tableId).catch(() => undefined);
      return true;
    } catch (err) {
      if (!(err instanceof CommitConflict)) throw err;
      kept.preempted = lost + 1;
      return false;
    }
  }
}
