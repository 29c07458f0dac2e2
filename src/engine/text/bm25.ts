// BM25 as Lance's full-text index computes it (k1 1.2, b 0.75, idf ln(1 + (N − n + 0.5)/(n + 0.5))), over
// statistics the service keeps of the live rows (`statistics.ts`) rather than those of the index, which count rows
// deleted since it was built and leave out rows written since (docs/api.md, Freshness).

const K1 = 1.2;
/** Distinct query terms up to which a row's frequencies are counted term by term rather than in one pass. */
const COUNT_EACH_TERM = 8;
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
  return bm25Scorer(query, stats, (term) => term)(row);
}

/** A term's idf among `docs` documents, `holding` of which hold it. */
export const idfOf = (holding: number, docs: number): number => Math.log(1 + (docs - holding + 0.5) / (holding + 0.5));

/** The length part of BM25's denominator for a row of `length` tokens. */
export const lengthNorm = (length: number, stats: CollectionStatistics): number =>
  K1 * (1 - B + (B * length * stats.docs) / stats.tokens);

/**
 * How many times higher a row's score for `query` can be under the `live` statistics than under the `index` ones,
 * whatever its terms' frequencies and its length: each term's idf moves by its own ratio, and each term's
 * frequency part, tf·(k1 + 1)/(tf + norm), by at most the ratio of the average lengths (norm grows with length over
 * the average, from k1·(1 − b) at length 0). Infinity where the statistics cannot be those of two sets of rows
 * (the index's describe no document, or a term in fewer than none or more than all of them).
 */
export function highestGain(query: readonly string[], live: CollectionStatistics, index: CollectionStatistics): number {
  const possible = (stats: CollectionStatistics, term: string) => {
    const n = stats.docsWith(term);
    return n >= 0 && n <= stats.docs;
  };
  if (index.docs <= 0 || index.tokens <= 0 || live.docs <= 0 || live.tokens <= 0) return Number.POSITIVE_INFINITY;
  let idf = 0;
  for (const term of new Set(query)) {
    if (!possible(live, term) || !possible(index, term)) return Number.POSITIVE_INFINITY;
    const ratio = idfOf(live.docsWith(term), live.docs) / idfOf(index.docsWith(term), index.docs);
    idf = Math.max(idf, ratio);
  }
  const gain = idf * Math.max(1, live.tokens / live.docs / (index.tokens / index.docs));
  return Number.isFinite(gain) ? gain : Number.POSITIVE_INFINITY;
}

/** What one query term adds to a row's score: its idf, its frequency in the row, and the row's `lengthNorm`. */
export const termScore = (idf: number, tf: number, norm: number): number => idf * ((tf * (K1 + 1)) / (tf + norm));

/**
 * `bm25` for many rows of one query: each term's idf is computed once, and a row's term frequencies are counted
 * for the query's terms alone (a row is a few dozen tokens; a map of them all cost more than the scoring). Terms
 * may stand for tokens (`termOf` names each). The same arithmetic in the same order as `bm25` and as the fresh
 * rows' term-at-a-time scoring (`fresh/postings.ts`), so the scores are the same to the bit.
 */
export function bm25Scorer<T>(
  query: readonly T[],
  stats: CollectionStatistics,
  termOf: (term: T) => string,
): (row: ArrayLike<T>) => number {
  const idf = new Map<T, number>();
  for (const term of query) if (!idf.has(term)) idf.set(term, idfOf(stats.docsWith(termOf(term)), stats.docs));
  // Past a few distinct terms, counting the row's tokens once beats counting each term's (a long query would
  // otherwise cost its length times the row's, for every candidate).
  const counted = idf.size > COUNT_EACH_TERM;
  return (row) => {
    if (row.length === 0 || stats.docs === 0) return 0;
    const norm = lengthNorm(row.length, stats);
    let frequency: Map<T, number> | undefined;
    if (counted) {
      frequency = new Map();
      for (let i = 0; i < row.length; i++) {
        const token = row[i] as T;
        if (idf.has(token)) frequency.set(token, (frequency.get(token) ?? 0) + 1);
      }
    }
    let score = 0;
    for (const term of query) {
      let tf = 0;
      if (frequency !== undefined) tf = frequency.get(term) ?? 0;
      else for (let i = 0; i < row.length; i++) if (row[i] === term) tf++;
      if (tf === 0) continue;
      score += termScore(idf.get(term) as number, tf, norm);
    }
    return score;
  };
}
