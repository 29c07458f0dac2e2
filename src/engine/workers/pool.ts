import { StrataError, Throttled, Unavailable } from '../../errors.js';
import { VectorScanThread } from '../fresh/vector-scans.js';
import { UpkeepProcess } from '../lance/index.js';
import { JsonThread } from '../writes/json-rows.js';
import { type DatabaseRef, DatabaseWorker, type Lease, type WorkerDeps } from './worker.js';

function leastRecentlyUsedIdle(workers: Iterable<DatabaseWorker>): DatabaseWorker | undefined {
  let victim: DatabaseWorker | undefined;
  for (const worker of workers) {
    if (worker.busy) continue;
    if (victim === undefined || worker.idleSinceMs < victim.idleSinceMs) victim = worker;
  }
  return victim;
}

export interface WorkerPoolOptions {
  deps: WorkerDeps;
  capacity: number;
  /** Percent of `capacity` the databases of one account may hold, so that other accounts can always be placed. */
  accountSharePercent: number;
  idleMs: number;
  /** Called when a worker was placed for a database, so its state can become `active`. */
  onPlaced(ref: DatabaseRef): Promise<void>;
  onError(err: unknown, ref: DatabaseRef): void;
}

/**
 * The node's workers, at most `capacity` of them. A database without a worker gets one on demand; when the
 * node is full the least recently used idle worker is let go, and only when every worker is busy does the
 * caller get 503 + Retry-After. Idle workers are also let go by a sweep after `idleMs`.
 */
export class WorkerPool {
  private readonly workers = new Map<string, DatabaseWorker>();
  private readonly placing = new Map<string, Promise<DatabaseWorker>>();
  /** The account of each database whose worker is being placed. */
  private readonly placingAccounts = new Map<string, string>();
  private sweeper: NodeJS.Timeout | undefined;
  /** Databases being deleted (or just deleted) here, by id: no lease is given on them. */
  private readonly retiring = new Set<string>();
  /** The drain of each database being retired: a second retirement (its own deletion's notice) waits for it. */
  private readonly draining = new Map<string, Promise<void>>();
  /** Where every worker's upkeep runs its heavy work: one process for the node, started on first use. */
  readonly upkeepProcess = new UpkeepProcess();
  /** Where large JSON is parsed and made: one thread for the node, started on first use. */
  readonly json = new JsonThread();
  /** Where fresh vectors are kept and scanned: one thread for the node, started on first use. */
  readonly vectorScans = new VectorScanThread();

  constructor(private readonly options: WorkerPoolOptions) {}

  get size(): number {
    return this.workers.size;
  }

  has(id: string): boolean {
    return this.workers.has(id);
  }

  /** Whether upkeep is paused on this node, and how many of its databases have a pass under way. */
  upkeepState(): { paused: boolean; passesUnderWay: number } {
    let passes = 0;
    for (const worker of this.workers.values()) if (worker.upkeep.passing) passes++;
    return { paused: this.options.deps.upkeep.pause.paused, passesUnderWay: passes };
  }

  /**
   * Pauses or resumes upkeep on this node (the admin route). A pause starts no step, and waits up to `waitMs` for
   * the passes under way to end (a step under way, such as an index build, still commits when it ends); a resume
   * starts a pass at once.
   */
  async pauseUpkeep(paused: boolean, waitMs: number): Promise<{ paused: boolean; passesUnderWay: number }> {
    this.options.deps.upkeep.pause.paused = paused;
    if (paused) {
      const settled = Promise.all([...this.workers.values()].map((worker) => worker.upkeep.settled()));
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, waitMs);
      });
      await Promise.race([settled, waited]);
      clearTimeout(timer);
    } else {
      // Out of a maintenance window, what waited is folded at once.
      for (const worker of this.workers.values()) worker.upkeep.nudge('fold');
    }
    return this.upkeepState();
  }

  /** Rows the open tables of every placed worker search by brute force, as their upkeep last found them. */
  unindexedRows(): number {
    let rows = 0;
    for (const worker of this.workers.values()) rows += worker.upkeep.unindexedRows();
    return rows;
  }

  /** Tables whose upkeep lease the workers of this node hold. */
  leasesHeld(): number {
    let held = 0;
    for (const worker of this.workers.values()) held += worker.upkeep.leasesHeld;
    return held;
  }

  start(): void {
    const every = Math.max(50, Math.min(this.options.idleMs, 60_000) / 2);
    this.sweeper = setInterval(() => void this.sweep(), every);
    this.sweeper.unref();
  }

  async stop(): Promise<void> {
    if (this.sweeper !== undefined) clearInterval(this.sweeper);
    // Stopped first, so that upkeep passes waiting on its work end at once rather than hold the workers' close.
    const upkeepStopped = this.upkeepProcess.close();
    const jsonStopped = this.json.close();
    const scansStopped = this.vectorScans.close();
    await Promise.allSettled([...this.placing.values()]);
    const all = [...this.workers.values()];
    this.workers.clear();
    await Promise.allSettled([upkeepStopped, jsonStopped, scansStopped, ...all.map((worker) => worker.close())]);
  }

  /** Places a worker in the background after verification; a full node leaves the database `activating`. */
  activate(ref: DatabaseRef): void {
    this.place(ref).catch((err: unknown) => {
      // No capacity (or no share of it) leaves the database activating; its next request places it.
      if (!(err instanceof StrataError)) this.options.onError(err, ref);
    });
  }

  /** The database's worker, placed if needed, held in use until `release()`. */
  async acquire(ref: DatabaseRef): Promise<Lease> {
    const worker = await this.place(ref);
    return { worker, release: worker.enter() };
  }

  /** A lease on the database's worker when one is placed already; never places one. */
  leaseIfPlaced(id: string): Lease | undefined {
    const worker = this.workers.get(id);
    return worker === undefined ? undefined : { worker, release: worker.enter() };
  }

  /** The databases with a worker placed here. */
  placedIds(): string[] {
    return [...this.workers.keys()];
  }

  /** Whether the database is being deleted here, so that no call may hold its worker. */
  isRetiring(id: string): boolean {
    return this.retiring.has(id);
  }

  /**
   * Takes a database out of service before it is deleted: no new lease is given (the gate answers 503
   * `database_deleting`), calls that hold its worker get up to `drainMs` to finish, then the worker closes. The
   * returned `end` says how the deletion went: a database deleted stays refused a minute more (a call that read
   * it just before must not place a worker for it again), one that was not is served again at once.
   */
  async retire(id: string, drainMs: number): Promise<(deleted: boolean) => void> {
    this.retiring.add(id);
    let drained = this.draining.get(id);
    if (drained === undefined) {
      drained = this.drain(id, drainMs).finally(() => this.draining.delete(id));
      this.draining.set(id, drained);
    }
    await drained;
    return (deleted) => {
      if (!deleted) this.retiring.delete(id);
      else setTimeout(() => this.retiring.delete(id), 60_000).unref();
    };
  }

  /** Waits up to `drainMs` for the calls holding the database's worker, then closes it. */
  private async drain(id: string, drainMs: number): Promise<void> {
    const worker = this.workers.get(id);
    for (const until = Date.now() + drainMs; worker?.busy === true && Date.now() < until; ) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await this.release(id);
  }

  /** Stops a database's worker (database deleted, or its binding no longer verifies). */
  async release(id: string): Promise<void> {
    await this.placing.get(id)?.catch(() => undefined);
    const worker = this.workers.get(id);
    if (worker === undefined) return;
    this.workers.delete(id);
    await worker.close();
  }

  private place(ref: DatabaseRef): Promise<DatabaseWorker> {
    const existing = this.workers.get(ref.id);
    if (existing !== undefined && !(existing.stale && !existing.busy)) return Promise.resolve(existing);
    if (existing !== undefined) {
      this.workers.delete(ref.id);
      void existing.close().catch((err: unknown) => this.options.onError(err, ref));
    }
    const pending = this.placing.get(ref.id);
    if (pending !== undefined) return pending;
    const placing = (async () => {
      this.placingAccounts.set(ref.id, ref.accountId);
      await this.makeRoom(ref);
      const worker = await DatabaseWorker.open(ref, this.options.deps, this);
      this.workers.set(ref.id, worker);
      await this.options.onPlaced(ref);
      return worker;
    })().finally(() => {
      this.placing.delete(ref.id);
      this.placingAccounts.delete(ref.id);
    });
    this.placing.set(ref.id, placing);
    return placing;
  }

  /** Workers one account may hold: its share of the node, at least one. */
  get accountShare(): number {
    return Math.max(1, Math.floor((this.options.capacity * this.options.accountSharePercent) / 100));
  }

  /**
   * Frees a slot for `ref`: within its account's share first (letting go of that account's least recently
   * used idle worker when the share is full), then within the node.
   */
  private async makeRoom(ref: DatabaseRef): Promise<void> {
    const own = [...this.workers.values()].filter((worker) => worker.ref.accountId === ref.accountId);
    let placingOwn = 0;
    for (const [id, account] of this.placingAccounts) if (id !== ref.id && account === ref.accountId) placingOwn++;
    if (own.length + placingOwn >= this.accountShare) {
      const victim = leastRecentlyUsedIdle(own);
      if (victim === undefined) {
        throw new Throttled(
          `the databases of this account already hold ${this.accountShare} of this node's ${this.options.capacity} workers (STRATA_MAX_WORKER_SHARE_PERCENT), all busy; retry shortly`,
          { retryAfterS: 1 },
        );
      }
      await this.letGo(victim);
      return;
    }
    if (this.workers.size + this.placing.size < this.options.capacity) return;
    const victim = leastRecentlyUsedIdle(this.workers.values());
    if (victim === undefined) {
      throw new Unavailable(`no capacity is free to place the workers of database "${ref.name}"; retry shortly`, {
        retryAfterS: 1,
        code: 'no_capacity',
      });
    }
    await this.letGo(victim);
  }

  private async letGo(worker: DatabaseWorker): Promise<void> {
    this.workers.delete(worker.ref.id);
    await worker.close();
  }

  private async sweep(): Promise<void> {
    const cutoff = Date.now() - this.options.idleMs;
    for (const worker of [...this.workers.values()]) {
      if (worker.busy || worker.idleSinceMs > cutoff) continue;
      this.workers.delete(worker.ref.id);
      await worker.close().catch((err: unknown) => this.options.onError(err, worker.ref));
    }
  }
}
