import type { TextOperator } from '../rows/source.js';
import { bm25Scorer, type CollectionStatistics } from '../text/bm25.js';

/**
 * One full-text column of the fresh rows: each row's tokens as term ids, and the rows holding each term. Ids
 * rather than strings: 105k rows of ~20 tokens took 209 MB of heap as token strings with a set of terms per row,
 * 70 MB as ids. A term's id goes back for reuse once no row holds it, so the dictionary holds only live terms.
 */
export class FreshPostings {
  private readonly ids = new Map<string, number>();
  /** Each id's term; empty where the id is free. */
  private readonly terms: string[] = [];
  private readonly free: number[] = [];
  private readonly docs = new Map<bigint, Int32Array>();
  private readonly postings = new Map<number, Set<bigint>>();

  /** Holds `tokens` for `key` (the key must not be held). */
  add(key: bigint, tokens: readonly string[]): void {
    const doc = new Int32Array(tokens.length);
    tokens.forEach((token, i) => {
      let id = this.ids.get(token);
      if (id === undefined) {
        id = this.free.pop() ?? this.terms.length;
        this.ids.set(token, id);
        this.terms[id] = token;
      }
      doc[i] = id;
    });
    this.docs.set(key, doc);
    for (const id of new Set(doc)) {
      let keys = this.postings.get(id);
      if (keys === undefined) {
        keys = new Set();
        this.postings.set(id, keys);
      }
      keys.add(key);
    }
  }

  remove(key: bigint): void {
    const doc = this.docs.get(key);
    if (doc === undefined) return;
    this.docs.delete(key);
    for (const id of new Set(doc)) {
      const keys = this.postings.get(id);
      keys?.delete(key);
      if (keys?.size !== 0) continue;
      this.postings.delete(id);
      this.ids.delete(this.terms[id] as string);
      this.terms[id] = '';
      this.free.push(id);
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
    // A query token no row here holds matches nothing here, and under AND no row at all.
    const known = query.map((token) => this.ids.get(token) ?? -1);
    const lists = [...new Set(known)].map((id) => this.postings.get(id));
    if (operator === 'AND' && lists.some((keys) => keys === undefined)) return { keys: [], values: [] };
    const held = lists.filter((keys): keys is Set<bigint> => keys !== undefined);
    const candidates = operator === 'AND' ? smallest(held) : new Set(held.flatMap((keys) => [...keys]));
    const score = bm25Scorer(known, stats, (id) => (id < 0 ? '' : (this.terms[id] as string)));
    const scored: { key: bigint; value: number }[] = [];
    for (const key of candidates) {
      const doc = this.docs.get(key);
      if (doc === undefined || !eligible(key)) continue;
      if (operator === 'AND' && !held.every((keys) => keys.has(key))) continue;
      scored.push({ key, value: score(doc) });
    }
    scored.sort((a, b) => b.value - a.value || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const edge = scored[limit - 1]?.value;
    const kept = edge === undefined ? scored : scored.filter((s) => s.value >= edge);
    return { keys: kept.map((s) => s.key), values: kept.map((s) => s.value) };
  }
}

/** The smallest of some sets (the rows an AND query can match are among it); none when there are no sets. */
function smallest(lists: readonly Set<bigint>[]): Set<bigint> {
  let best: Set<bigint> | undefined;
  for (const keys of lists) if (best === undefined || keys.size < best.size) best = keys;
  return best ?? new Set();
}
