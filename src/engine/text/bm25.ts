// BM25 as Lance's full-text index computes it (k1 1.2, b 0.75, idf ln(1 + (N − n + 0.5)/(n + 0.5))), over
// statistics the service keeps of the live rows (`statistics.ts`) rather than those of the index, which count rows
// deleted since it was built and leave out rows written since (docs/api.md, Freshness).

const K1 = 1.2;
const B = 0.75;

/** What BM25 needs of a column's live rows: those with at least one token, their tokens, and each term's rows. */
export interface CollectionStatistics {
  /** Live rows whose text has at least one token (a null or token-less text is no document). */
  docs: number;
  /** Tokens over those rows. */
  tokens: number;
  /** Live rows holding `term`. */
  docsWith(term: string): number;
}

/**
 * A row's BM25 score for a query's tokens (duplicates count again, as in Lance): Σ idf(t) · tf(t)·(k1 + 1) /
 * (tf(t) + k1·(1 − b + b·dl/avgdl)) over the query's tokens the row holds. 0 when it holds none.
 */
export function bm25(query: readonly string[], row: readonly string[], stats: CollectionStatistics): number {
  if (row.length === 0 || stats.docs === 0) return 0;
  const frequency = new Map<string, number>();
  for (const token of row) frequency.set(token, (frequency.get(token) ?? 0) + 1);
  const norm = K1 * (1 - B + (B * row.length * stats.docs) / stats.tokens);
  let score = 0;
  for (const term of query) {
    const tf = frequency.get(term);
    if (tf === undefined) continue;
    const n = stats.docsWith(term);
    score += Math.log(1 + (stats.docs - n + 0.5) / (n + 0.5)) * ((tf * (K1 + 1)) / (tf + norm));
  }
  return score;
}
