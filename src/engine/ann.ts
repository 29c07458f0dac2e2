import { Index, type IndexConfig, type Table as LanceTable } from '@lancedb/lancedb';
import type { Metric } from './schema.js';

/** The metric each declared index trains with; it must match the one queries use. */
export const LANCE_METRIC: Readonly<Record<Metric, 'cosine' | 'l2' | 'dot'>> = {
  cosine: 'cosine',
  l2sq: 'l2',
  negdot: 'dot',
};

export const isAnn = (index: IndexConfig) => /IVF|HNSW/i.test(index.indexType);

/** The columns of a table that carry a vector (ANN) index, from Lance's own list. */
export function annColumns(indices: readonly IndexConfig[]): Set<string> {
  return new Set(indices.filter(isAnn).flatMap((i) => i.columns));
}

/** IVF_RQ, 4 bits: recall@10 1.0 at 200k × 384 with exact re-ranking of the top candidates (`calibrateRefined`). */
export const annIndex = (metric: Metric) => Index.ivfRq({ distanceType: LANCE_METRIC[metric], numBits: 4 });

/**
 * IVF partitions an ANN-served vector leg probes. Its candidates are all re-ranked by exact distance
 * (`refineFactorFor`), so distances are exact and only recall depends on this. Measured on bench/search.ts's
 * corpus at 1M × 384 (IVF_RQ, Lance's default partitions), recall@10: 10 → 0.912, 15 → 0.970, 20 → 0.994,
 * 30 → 0.998, 50 → 1.0, at 7.3, 7.4, 7.6, 8.2 and 9.2 ms for 132 candidates; 1.0 from 10 up at 200k.
 */
export const NPROBES = 20;

/**
 * Candidates an ANN-served vector leg re-ranks by exact distance until upkeep has measured how many the index
 * needs (`calibrateRefined`). A vector leg alone reads only k + 1 rows, and re-ranking only those leaves recall
 * to RQ's coarse distances. 1.1M × 384, k = 10 (11 rows read), 200 queries: refineFactor 1 → recall@10 0.973,
 * 2 → 0.994, 3 → 0.994, at 5.2–5.4 ms p50 each.
 */
export const DEFAULT_REFINED = 32;

/** The refineFactor of an ANN-served vector leg that reads `limit` rows and re-ranks `refined` candidates. */
export const refineFactorFor = (limit: number, refined = DEFAULT_REFINED): number =>
  Math.max(1, Math.ceil(refined / limit));

/** The recall@10 `calibrateRefined` looks for. */
export const TARGET_RECALL = 0.95;
/** Queries a calibration measures recall with: midpoints of neighbouring rows, which the table does not hold. */
const CALIBRATION_QUERIES = 10;
/** Candidate counts a calibration tries, fewest first. */
const REFINED_STEPS = [DEFAULT_REFINED, 64, 128, 256, 512, 1024, 2048];
/** Rows a vector leg for k = 10 reads (k + 1: one past, for ties). */
const LEG_LIMIT = 11;

export interface Calibration {
  /** Candidates searches re-rank: one step above the fewest that reached the recall sought. */
  refined: number;
  /** The recall@10 measured with the step below `refined` (with the most tried, when none reached it). */
  recall: number;
}

/**
 * The fewest candidates re-ranked by exact distance that give the table's ANN index recall@10 ≥ TARGET_RECALL,
 * against exact search. How many RQ needs depends on the data, not only on its size: at 100k rows and 8, 32 or
 * 128 dimensions, 32 candidates gave 0.99, 0.96, 0.91 for clustered vectors and 0.29, 0.21, 0.22 for uniform
 * noise, which needed 264 for 0.90–1.0 (exp/rqdim.ts). Undefined when the table has too few vectors to measure.
 * `lance` must be checked out at one version: rows appended between the exact and the ANN searches would count
 * as misses (measured during a load: recall 0.23 even with 1024 candidates).
 *
 * Ten queries are a small sample where recall climbs steeply: on 100k uniform 8-d vectors they measured 1.0 at
 * 256 candidates, where 20 other queries found 0.895 (and 0.975–1.0 at 512). So the step above the first that
 * reaches the target is used.
 */
export async function calibrateRefined(
  lance: LanceTable,
  column: string,
  metric: Metric,
): Promise<Calibration | undefined> {
  const rows = await lance.countRows();
  if (rows < 2) return undefined;
  const offsets = Array.from({ length: 2 * CALIBRATION_QUERIES }, () => Math.floor(Math.random() * rows));
  const sample = await lance.takeOffsets(offsets).select([column]).toArrow();
  const vectors = (sample.getChild(column)?.toArray() ?? []) as ({ toArray(): Float32Array } | null)[];
  const queries: number[][] = [];
  for (let i = 0; i + 1 < vectors.length; i += 2) {
    const [a, b] = [vectors[i]?.toArray(), vectors[i + 1]?.toArray()];
    if (a !== undefined && b !== undefined) queries.push(Array.from(a, (x, d) => (x + (b[d] ?? 0)) / 2));
  }
  if (queries.length === 0) return undefined;
  const search = (query: number[]) =>
    lance.vectorSearch(query).column(column).distanceType(LANCE_METRIC[metric]).select([]).withRowId().limit(LEG_LIMIT);
  const ids = (result: { getChild(name: string): { toArray(): unknown } | null }) =>
    Array.from((result.getChild('_rowid')?.toArray() ?? []) as BigUint64Array).slice(0, 10);
  const exact: Set<bigint>[] = [];
  for (const query of queries) exact.push(new Set(ids(await search(query).bypassVectorIndex().toArrow())));
  let recall = 0;
  for (const [step, refined] of REFINED_STEPS.entries()) {
    let found = 0;
    let wanted = 0;
    for (const [q, query] of queries.entries()) {
      const hits = ids(
        await search(query).nprobes(NPROBES).refineFactor(refineFactorFor(LEG_LIMIT, refined)).toArrow(),
      );
      found += hits.filter((id) => exact[q]?.has(id)).length;
      wanted += exact[q]?.size ?? 0;
    }
    recall = wanted === 0 ? 1 : found / wanted;
    if (recall >= TARGET_RECALL) return { refined: REFINED_STEPS[step + 1] ?? refined, recall };
  }
  return { refined: REFINED_STEPS[REFINED_STEPS.length - 1] as number, recall };
}
