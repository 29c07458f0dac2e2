/** One leg's ranking: row keys best first, with the leg's own measure (BM25 or canonical distance). */
export interface LegRanking {
  keys: readonly bigint[];
  values: readonly number[];
  weight: number;
}

export interface Fused {
  key: bigint;
  score: number;
  bm25: number | null;
  distance: number | null;
  /** The row's rank in each leg, from 1; null where the leg did not return it (or did not run). */
  textRank: number | null;
  vectorRank: number | null;
}

export interface FusionOptions {
  rrfK: number;
  offset: number;
  k: number;
}

/**
 * Reciprocal-rank fusion exactly as docs/api.md: score(d) = Σ weight / (rrf_k + rank), ranks from 1, a leg that
 * did not return d adding nothing; ties by the better single-leg rank, then row order (row key). The only
 * place RRF lives.
 */
export function fuse(text: LegRanking | undefined, vector: LegRanking | undefined, options: FusionOptions): Fused[] {
  const byKey = new Map<bigint, Fused & { bestRank: number }>();
  const add = (leg: LegRanking | undefined, kind: 'bm25' | 'distance', ranked: 'textRank' | 'vectorRank') => {
    if (leg === undefined) return;
    leg.keys.forEach((key, i) => {
      const rank = i + 1;
      let entry = byKey.get(key);
      if (entry === undefined) {
        entry = { key, score: 0, bm25: null, distance: null, textRank: null, vectorRank: null, bestRank: rank };
        byKey.set(key, entry);
      }
      entry.score += leg.weight / (options.rrfK + rank);
      entry[kind] = leg.values[i] ?? null;
      entry[ranked] = rank;
      entry.bestRank = Math.min(entry.bestRank, rank);
    });
  };
  add(text, 'bm25', 'textRank');
  add(vector, 'distance', 'vectorRank');
  const ordered = [...byKey.values()].sort(
    (a, b) => b.score - a.score || a.bestRank - b.bestRank || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
  );
  return ordered.slice(options.offset, options.offset + options.k).map(({ bestRank: _, ...rest }) => rest);
}

/** Orders one leg's hits by its measure, equal measures by row order, and keeps the best `window`. */
export function rankLeg(
  keys: readonly bigint[],
  values: readonly number[],
  better: 'higher' | 'lower',
  window: number,
): { keys: bigint[]; values: number[] } {
  const order = keys.map((_, i) => i);
  const sign = better === 'higher' ? -1 : 1;
  order.sort((a, b) => {
    const diff = sign * ((values[a] ?? 0) - (values[b] ?? 0));
    if (diff !== 0) return diff;
    const ka = keys[a] ?? 0n;
    const kb = keys[b] ?? 0n;
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });
  const kept = order.slice(0, window);
  return { keys: kept.map((i) => keys[i] ?? 0n), values: kept.map((i) => values[i] ?? 0) };
}

/**
 * Indexes of the hits whose measure is as good as the `ranked`-th best, or all when there are no more:
 * `rankLeg(…, ranked)` keeps the same rows from them as from all hits.
 */
export function inReach(values: readonly number[], better: 'higher' | 'lower', ranked: number): number[] {
  const all = values.map((_, i) => i);
  if (values.length <= ranked) return all;
  const edge = values.slice().sort((a, b) => (better === 'higher' ? b - a : a - b))[ranked - 1] as number;
  return all.filter((i) => (better === 'higher' ? (values[i] as number) >= edge : (values[i] as number) <= edge));
}
