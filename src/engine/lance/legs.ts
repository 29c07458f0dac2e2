import type { Table } from 'apache-arrow';
import type { Metric } from '../indexes/registry.js';
import type { Hits, RowId, TextLeg, TextMatch, VectorLeg } from '../rows/source.js';
import { LANCE_METRIC } from './indexes.js';
import {
  BooleanQuery,
  type FullTextQuery,
  type LanceTable,
  MatchQuery,
  Occur,
  Operator,
  PhraseQuery,
  PREDICATE_READ,
  READ_OPTIONS,
  readAll,
} from './lance.js';
import { rowIdsOf } from './row-keys.js';

// The two legs of a search as Lance queries: what they read, how an ANN index is probed, and Lance's distances
// in the API's form. Which hits a leg ranks, and its ties, are the search's (search/legs.ts).

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

export function numbersOf(table: Table, name: string): number[] {
  const column = table.getChild(name);
  const out: number[] = [];
  if (column === null) return out;
  for (const chunk of column.data) {
    const values = chunk.values as Float32Array | Float64Array;
    for (let i = 0; i < chunk.length; i++) out.push(values[i] ?? 0);
  }
  return out;
}

const idsOf = (rows: Table, wanted: boolean): RowId[] => (wanted ? (rowIdsOf(rows) as RowId[]) : []);

/**
 * A text query as Lance takes it: the words as one match query, and with phrases or widened words, each phrase,
 * each widened word (any of its terms) and the words (unless none are left) as clauses of a boolean query (any of
 * them under `or`, all under `and`), whose score is the sum of theirs.
 */
export function fullTextQuery(match: TextMatch): FullTextQuery {
  const operator = match.operator === 'AND' ? Operator.And : Operator.Or;
  const words = new MatchQuery(match.query, match.field, { operator });
  const phrases = match.phrases ?? [];
  const anyOf = match.anyOf ?? [];
  if (phrases.length === 0 && anyOf.length === 0) return words;
  const occur = match.operator === 'AND' ? Occur.Must : Occur.Should;
  const clauses: [Occur, FullTextQuery][] = phrases.map((phrase) => [occur, new PhraseQuery(phrase, match.field)]);
  for (const terms of anyOf) {
    clauses.push([occur, new MatchQuery(terms.join(' '), match.field, { operator: Operator.Or })]);
  }
  if (match.query !== '') clauses.push([occur, words]);
  return new BooleanQuery(clauses);
}

/** The BM25 leg: hits of the query over its column, higher scores first. */
export async function textLeg(lance: LanceTable, leg: TextLeg): Promise<Hits> {
  let q = lance
    .query()
    .fullTextSearch(fullTextQuery(leg))
    .select([...leg.columns, '_score'])
    .limit(leg.limit);
  if (leg.ids) q = q.withRowId();
  if (leg.indexedOnly) q = q.fastSearch();
  if (leg.filter !== undefined) q = q.where(leg.filter);
  const rows = await readAll(q, leg.filter === undefined ? READ_OPTIONS : PREDICATE_READ);
  return { rows, values: numbersOf(rows, '_score'), ids: idsOf(rows, leg.ids) };
}

/** The vector leg: the nearest rows of its column to its vector, nearest first. `ann`: the column has an ANN index. */
export async function vectorLeg(lance: LanceTable, leg: VectorLeg, ann: boolean): Promise<Hits> {
  const search = (wide: boolean) => {
    let q = lance
      .vectorSearch(leg.vector)
      .column(leg.field)
      .distanceType(LANCE_METRIC[leg.metric])
      .select(leg.ids ? ['_distance'] : [...leg.columns])
      .limit(leg.limit);
    if (leg.ids) q = q.withRowId();
    if (leg.indexedOnly && ann) q = q.fastSearch();
    if (ann) {
      q = wide ? q.minimumNprobes(NPROBES).maximumNprobes(ALL_PARTITIONS) : q.nprobes(NPROBES);
      q = q.refineFactor(refineFactorFor(leg.limit));
    }
    if (leg.filter !== undefined) q = q.where(leg.filter);
    return readAll(q, leg.filter === undefined ? READ_OPTIONS : PREDICATE_READ);
  };
  // The partitions probed can hold too few rows that pass a narrow filter (or were not deleted) to fill the
  // page: then more are searched, only as many as it takes. Not from the start: that mode measured 16.7 ms
  // against 5.5 for an unfiltered leg at 1.2M rows, even when the first partitions were enough. Nor for a
  // window short of candidates that still fills the page: a filter matching 0.1% of 1.2M rows left a hybrid
  // window ~83 of 101, and searching on for the rest took 81 ms against 24.
  let rows = await search(false);
  if (ann && rows.numRows < Math.min(leg.limit, leg.wanted)) rows = await search(true);
  return { rows, values: numbersOf(rows, '_distance').map(CANONICAL[leg.metric]), ids: idsOf(rows, leg.ids) };
}
