import type { RowId } from '../rows/source.js';

/**
 * The analyzed texts of indexed rows a text leg scored over the live rows, by table, column and Lance row id, so that
 * a later search scoring the same rows needs no read of their texts. A row id always names the same row (a
 * replaced or compacted row gets a new one), so an entry never goes stale; the least recently used go past the
 * budget. Reading texts is what a text leg beside fresh rows spends most on: at 1.17M rows, Lance's full-text read
 * of 132 hits took 14–15 ms with their texts against 8 ms with ids and scores alone, and a take of 140 texts by id
 * 10–17 ms.
 */
export class RowTokens {
  private readonly held = new Map<string, { tokens: readonly string[]; cost: number }>();
  private used = 0;

  /** `budget`: the bytes held at most, as `costOf` counts them. */
  constructor(private readonly budget: number) {}

  /** A row's tokens when held, in order; undefined otherwise. */
  get(table: string, column: string, id: RowId): readonly string[] | undefined {
    const key = keyOf(table, column, id);
    const entry = this.held.get(key);
    if (entry === undefined) return undefined;
    // Taken to the end: the first in the map are the least recently used.
    this.held.delete(key);
    this.held.set(key, entry);
    return entry.tokens;
  }

  set(table: string, column: string, id: RowId, tokens: readonly string[]): void {
    const key = keyOf(table, column, id);
    const cost = costOf(key, tokens);
    if (cost > this.budget) return;
    const before = this.held.get(key);
    if (before !== undefined) {
      this.held.delete(key);
      this.used -= before.cost;
    }
    this.held.set(key, { tokens, cost });
    this.used += cost;
    for (const [oldest, entry] of this.held) {
      if (this.used <= this.budget) break;
      this.held.delete(oldest);
      this.used -= entry.cost;
    }
  }

  /** Rows held. */
  get size(): number {
    return this.held.size;
  }

  /** Bytes held, as `costOf` counts them. */
  get bytes(): number {
    return this.used;
  }
}

/** A row's bytes as held: its key, and each token's characters and slot, with the map's and arrays' own share. */
const costOf = (key: string, tokens: readonly string[]): number =>
  tokens.reduce((sum, token) => sum + token.length + 24, 2 * key.length + 96);

const keyOf = (table: string, column: string, id: RowId): string => `${table}\u0000${column}\u0000${id}`;

/** What a node's `RowTokens`, shared by its tables, holds at most, as `costOf` counts. */
export const SCORED_TOKENS_BYTES = 64 * 2 ** 20;
