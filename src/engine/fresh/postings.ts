import type { TextOperator } from '../rows/source.js';
import { bm25, type CollectionStatistics } from '../text/bm25.js';

/** A row's tokens in one column, as BM25 reads them. */
export interface Doc {
  tokens: string[];
  terms: ReadonlySet<string>;
}

/** One full-text column of the fresh rows: each row's tokens, and the rows holding each term. */
export class FreshPostings {
  private readonly docs = new Map<bigint, Doc>();
  private readonly postings = new Map<string, Set<bigint>>();

  /** Holds `doc` for `key` (the key must not be held). */
  add(key: bigint, doc: Doc): void {
    this.docs.set(key, doc);
    for (const term of doc.terms) {
      let keys = this.postings.get(term);
      if (keys === undefined) {
        keys = new Set();
        this.postings.set(term, keys);
      }
      keys.add(key);
    }
  }

  remove(key: bigint): void {
    const doc = this.docs.get(key);
    if (doc === undefined) return;
    this.docs.delete(key);
    for (const term of doc.terms) {
      const keys = this.postings.get(term);
      keys?.delete(key);
      if (keys?.size === 0) this.postings.delete(term);
    }
  }

  /**
   * The held rows `eligible` admits that match a query's tokens (any of them, or all under AND), each with its
   * BM25 score under `stats`; the best `limit`, and every row tied with the last (ties by key).
   */
  search(
    query: readonly string[],
    operator: TextOperator,
    stats: CollectionStatistics,
    limit: number,
    eligible: (key: bigint) => boolean,
  ): { keys: bigint[]; values: number[] } {
    const distinct = [...new Set(query)];
    const candidates = new Set<bigint>();
    for (const term of distinct) for (const key of this.postings.get(term) ?? []) candidates.add(key);
    const scored: { key: bigint; value: number }[] = [];
    for (const key of candidates) {
      const doc = this.docs.get(key);
      if (doc === undefined || !eligible(key)) continue;
      if (operator === 'AND' && !distinct.every((term) => doc.terms.has(term))) continue;
      scored.push({ key, value: bm25(query, doc.tokens, stats) });
    }
    scored.sort((a, b) => b.value - a.value || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const edge = scored[limit - 1]?.value;
    const kept = edge === undefined ? scored : scored.filter((s) => s.value >= edge);
    return { keys: kept.map((s) => s.key), values: kept.map((s) => s.value) };
  }
}
