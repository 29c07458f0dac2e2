import { Unavailable } from '../errors.js';

const MIB = 1024 * 1024;

/** A database's SQL engine as the budget sees it: whether its copies may go now, and how to let them go. */
export interface CopyHolder {
  /** No statement running and nothing loading. */
  idle(): boolean;
  /** Drops every copy; answers the bytes DuckDB then holds for copies. */
  letGo(): Promise<number>;
}

/** One database's share of the budget: what its copies hold, and what a load under way has reserved. */
export class BudgetAccount {
  /** Bytes DuckDB reported for the copies when last measured. */
  held = 0;
  /** Bytes reserved for the insert under way, not yet in `held`. */
  reserved = 0;
  lastUsedMs = Date.now();

  constructor(
    private readonly budget: SqlMemoryBudget,
    readonly holder: CopyHolder,
    /** The database's own DuckDB memory limit: past it DuckDB spills the copies to disk instead of holding more. */
    readonly capBytes: number,
  ) {}

  touch(): void {
    this.lastUsedMs = Date.now();
  }

  /**
   * Reserves `bytes` before they are loaded, letting go of idle databases' copies when they would not fit;
   * 503 `sql_memory_busy` when even that leaves too little. `what` names the load in that answer.
   */
  reserve(bytes: number, what: string): Promise<void> {
    return this.budget.reserve(this, bytes, what);
  }

  /** What DuckDB holds for the copies now: it replaces what was reserved and loaded since the last measure. */
  settle(measured: number): void {
    this.held = measured;
    this.reserved = 0;
  }

  /** The database's engine closed: its copies are gone. */
  close(): void {
    this.budget.remove(this);
  }
}

/**
 * The node's budget for SQL copies (`STRATA_SQL_NODE_MEMORY_MB`): each database's DuckDB may hold up to its own
 * limit, and without a bound for the node 64 of them could hold 64 × that. A load reserves what it will insert
 * before inserting it; when the budget is short, the copies of the least recently used idle databases go first
 * (they load again on their next statement), and only when that is not enough is the load refused, as 503 with
 * Retry-After: the databases holding the budget are running statements, and their copies can go once they end.
 */
export class SqlMemoryBudget {
  private readonly accounts = new Set<BudgetAccount>();
  /** Reservations, one at a time: two loads must not both count on the same victim's bytes. */
  private queue: Promise<unknown> = Promise.resolve();
  /** Databases whose copies were let go to make room, since start-up. */
  evictions = 0;

  constructor(readonly limitBytes: number) {}

  static ofMb(mb: number): SqlMemoryBudget {
    return new SqlMemoryBudget(mb * MIB);
  }

  open(holder: CopyHolder, capMb: number): BudgetAccount {
    const account = new BudgetAccount(this, holder, capMb * MIB);
    this.accounts.add(account);
    return account;
  }

  /** Bytes held and reserved by every database's copies. */
  get usedBytes(): number {
    let used = 0;
    for (const account of this.accounts) used += account.held + account.reserved;
    return used;
  }

  remove(account: BudgetAccount): void {
    this.accounts.delete(account);
  }

  reserve(account: BudgetAccount, bytes: number, what: string): Promise<void> {
    const run = this.queue.then(() => this.makeRoom(account, bytes, what));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async makeRoom(account: BudgetAccount, wanted: number, what: string): Promise<void> {
    // Measured: DuckDB holds at most its own limit in memory and writes the rest of a copy to its temporary files.
    const bytes = Math.min(wanted, Math.max(0, account.capBytes - account.held - account.reserved));
    const tried = new Set<BudgetAccount>([account]);
    while (this.usedBytes + bytes > this.limitBytes) {
      const victim = this.leastRecentlyUsedIdle(tried);
      if (victim === undefined) throw this.busy(account, bytes, what);
      tried.add(victim);
      victim.settle(await victim.holder.letGo());
      this.evictions++;
    }
    account.reserved += bytes;
  }

  private leastRecentlyUsedIdle(tried: ReadonlySet<BudgetAccount>): BudgetAccount | undefined {
    let victim: BudgetAccount | undefined;
    for (const account of this.accounts) {
      if (tried.has(account) || account.held === 0 || !account.holder.idle()) continue;
      if (victim === undefined || account.lastUsedMs < victim.lastUsedMs) victim = account;
    }
    return victim;
  }

  private busy(account: BudgetAccount, bytes: number, what: string): Unavailable {
    const mb = (n: number) => Math.ceil(n / MIB);
    const others = this.usedBytes - account.held - account.reserved;
    return new Unavailable(
      `loading ${what} into SQL needs ${mb(bytes)} MiB more, and this node's ${mb(this.limitBytes)} MiB for SQL copies (STRATA_SQL_NODE_MEMORY_MB) is taken: ${mb(account.held + account.reserved)} MiB by this database, ${mb(others)} MiB by databases running statements; retry shortly`,
      { retryAfterS: 1, code: 'sql_memory_busy' },
    );
  }
}
