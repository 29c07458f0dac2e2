import type { Table } from 'apache-arrow';
import { LANCE_METRIC } from '../indexes.js';
import { MatchQuery, type Operator, PREDICATE_READ, READ_OPTIONS, readAll } from '../lance.js';
import { readingPredicate } from '../predicate/predicate.js';
import type { Metric } from '../tables/schema.js';
import type { TableHandle } from '../tables/tables.js';
import type { VectorLegPlan } from './plan.js';
import { numbersOf } from './result-rows.js';

// The two legs of a hybrid search, each read from Lance with every hit that ties at its window's edge.

/**
 * Hits a text leg first reads past its window: BM25 scores tie often (same term counts, same length), and row
 * order can break a tie at the window's edge only with every tied row in hand (see `readLeg`).
 */
const TIE_SLACK = 32;

/**
 * How many hits a text leg first reads to rank `ranked` of them (`readLeg`); exported for bench/search.ts. A leg
 * that reads only row ids and scores (both legs run) reads further past: such hits cost little (~0.1 ms per
 * 100), a second read costs a whole query. On bench/search.ts's corpus (1.2M rows, 5,000-word Zipf vocabulary,
 * ranked = 100) the hits tied with the 100th best reached rank 152 at the median and 384 at most; reading 132
 * first read again for 139 of 200 queries (p50 3.5 ms), reading 400 for none (p50 1.8 ms).
 */
export const firstTextRead = (ranked: number, idsOnly: boolean): number =>
  ranked + (idsOnly ? Math.min(Math.max(TIE_SLACK, 3 * ranked), 1000) : TIE_SLACK);
/**
 * IVF partitions an ANN-served vector leg probes. Its candidates are all re-ranked by exact distance
 * (`refineFactorFor`), so distances are exact and only recall depends on this. Measured on bench/search.ts's
 * corpus at 1M × 384 (IVF_RQ, Lance's default partitions), recall@10: 10 → 0.912, 15 → 0.970, 20 → 0.994, 30 → 0.998,
 * 50 → 1.0, at 7.3, 7.4, 7.6, 8.2 and 9.2 ms for 132 candidates; 1.0 from 10 up at 200k.
 */
export const NPROBES = 20;

/**
 * The most partitions a vector leg probes when the first `NPROBES` held too few rows (all of them; Lance stops once
 * it has enough). At 1.2M rows, a filter matching 12 rows left a k = 10 leg a median 1 row with `NPROBES` alone.
 */
const ALL_PARTITIONS = 1_000_000;

/**
 * Candidates an ANN-served vector leg re-ranks by exact distance, at least. A vector leg alone reads only
 * k + 1 rows, and re-ranking only those leaves recall to RQ's coarse distances. 1.1M × 384, k = 10 (11 rows
 * read), 200 queries: refineFactor 1 → recall@10 0.973, 2 → 0.994, 3 → 0.994, at 5.2–5.4 ms p50 each.
 */
const MIN_REFINED = 32;

/** The refineFactor of an ANN-served vector leg that reads `limit` rows. */
export const refineFactorFor = (limit: number): number => Math.max(1, Math.ceil(MIN_REFINED / limit));

/** Lance's distance → the API's canonical form: Lance's cosine and (squared) l2 already are; dot is 1 − x·y. */
const CANONICAL: Readonly<Record<Metric, (d: number) => number>> = {
  cosine: (d) => d,
  l2sq: (d) => d,
  negdot: (d) => d - 1,
};

/** What both legs share: the table, the filter, and how far and with which columns they read. */
export interface LegReads {
  table: TableHandle;
  filter: string | undefined;
  /** Whether both legs run: then each reads only row ids and its measure (`carried` is empty). */
  both: boolean;
  /** Hits a leg ranks: the window when both legs run, else the page's end. */
  ranked: number;
  /** The columns a leg alone reads with its hits. */
  carried: readonly string[];
  /** Rows up to one past the page's end. */
  page: number;
}

/** A leg's hits as read, and each hit's measure (BM25 score, or canonical distance). */
export interface LegHits {
  hits: Table;
  values: number[];
}

/** The BM25 leg: hits of `query` over `field`, higher scores first. */
export async function readTextLeg(legs: LegReads, query: string, field: string, operator: Operator): Promise<LegHits> {
  const { table, filter, both, carried, ranked } = legs;
  const read = (limit: number) => {
    let q = table.lance
      .query()
      .fullTextSearch(new MatchQuery(query, field, { operator }))
      .select([...carried, '_score'])
      .limit(limit);
    if (both) q = q.withRowId();
    if (filter !== undefined) q = q.where(filter);
    return readingFilter(() => readAll(q, filter === undefined ? READ_OPTIONS : PREDICATE_READ));
  };
  const scores = (t: Table) => numbersOf(t, '_score');
  return readLeg(read, scores, 'higher', ranked, firstTextRead(ranked, both));
}

/** The vector leg: the nearest rows of `field` to `query` by `metric`, nearest first. */
export async function readVectorLeg(legs: LegReads, vector: VectorLegPlan): Promise<LegHits> {
  const { table, filter, both, carried, ranked, page } = legs;
  const ann = table.ann.has(vector.field);
  const search = (limit: number, wide: boolean) => {
    let q = table.lance
      .vectorSearch(vector.query)
      .column(vector.field)
      .distanceType(LANCE_METRIC[vector.metric])
      .select(both ? ['_distance'] : [...carried])
      .limit(limit);
    if (both) q = q.withRowId();
    if (ann) {
      q = wide ? q.minimumNprobes(NPROBES).maximumNprobes(ALL_PARTITIONS) : q.nprobes(NPROBES);
      q = q.refineFactor(refineFactorFor(limit));
    }
    if (filter !== undefined) q = q.where(filter);
    return readingFilter(() => readAll(q, filter === undefined ? READ_OPTIONS : PREDICATE_READ));
  };
  // The partitions probed can hold too few rows that pass a narrow filter (or were not deleted) to fill the
  // page: then more are searched, only as many as it takes. Not from the start: that mode measured 16.7 ms
  // against 5.5 for an unfiltered leg at 1.2M rows, even when the first partitions were enough. Nor for a
  // window short of candidates that still fills the page: a filter matching 0.1% of 1.2M rows left a hybrid
  // window ~83 of 101, and searching on for the rest took 81 ms against 24.
  const read = async (limit: number) => {
    const hits = await search(limit, false);
    return ann && hits.numRows < Math.min(limit, page) ? search(limit, true) : hits;
  };
  const distances = (t: Table) => numbersOf(t, '_distance').map(CANONICAL[vector.metric]);
  // Distances rarely tie: one row past the window shows whether they do.
  return readLeg(read, distances, 'lower', ranked, ranked + 1);
}

/**
 * Reads a leg's best `ranked` hits and every hit that ties with the last of them, so that row order decides
 * ties there and not Lance. Reads `first` hits, then twice as many while the worst hit read still ties with
 * the `ranked`-th best (an unread hit could tie too).
 */
async function readLeg(
  read: (limit: number) => Promise<Table>,
  measure: (hits: Table) => number[],
  better: 'higher' | 'lower',
  ranked: number,
  first: number,
): Promise<LegHits> {
  for (let limit = first; ; limit *= 2) {
    const hits = await read(limit);
    const values = measure(hits);
    if (hits.numRows < limit) return { hits, values };
    const sorted = values.slice().sort((a, b) => (better === 'higher' ? b - a : a - b));
    if (sorted[ranked - 1] !== sorted[sorted.length - 1]) return { hits, values };
  }
}

/** A filter is a predicate too: Lance's refusals of it become 400s. */
const readingFilter = <T>(read: () => Promise<T>): Promise<T> => readingPredicate(read, 'filter');
