/** What the budget needs of a table's fresh rows. */
export interface BudgetedTier {
  /** Bytes its rows take, as estimated when they were committed. */
  readonly bytes: number;
  readonly size: number;
  /** Lets go of every row: searches read Lance's own way until a fold covers what it let go of. */
  overflow(): void;
}

/**
 * The memory all tables' fresh rows may take on a node (`STRATA_FRESH_TIER_MB`). Past it, the tables holding the
 * most let go of theirs, largest first, until the rest fit: their searches read fresh rows Lance's way (slower,
 * as correct), and upkeep folds those tables first.
 */
export class FreshBudget {
  private readonly tiers = new Set<BudgetedTier>();
  private used = 0;
  private evicting = false;
  /** Tables that let go of their rows since start-up. */
  overflows = 0;

  constructor(readonly limitBytes: number) {}

  join(tier: BudgetedTier): void {
    this.tiers.add(tier);
  }

  leave(tier: BudgetedTier): void {
    this.tiers.delete(tier);
  }

  get bytes(): number {
    return this.used;
  }

  get rows(): number {
    let rows = 0;
    for (const tier of this.tiers) rows += tier.size;
    return rows;
  }

  /** A tier took `delta` more bytes (fewer, when negative). */
  charged(delta: number): void {
    this.used += delta;
    if (this.used <= this.limitBytes || this.evicting) return;
    this.evicting = true;
    try {
      for (const tier of [...this.tiers].sort((a, b) => b.bytes - a.bytes)) {
        if (this.used <= this.limitBytes) break;
        if (tier.bytes === 0) continue;
        tier.overflow();
        this.overflows++;
      }
    } finally {
      this.evicting = false;
    }
  }
}
