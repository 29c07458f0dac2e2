import type { Data } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import type { Fused } from './fusion.js';

// Why a hybrid search answered what it did (docs/api.md, Explain): per row, its rank, raw measure, fused share and
// where each leg found it; per request, what each leg read and how long it took.

/**
 * How a leg read its candidates: its index alone (`index`), its index and the fresh rows this node holds beside it
 * (`index_and_fresh`), its index and the rows outside it read by the row store (`index_and_scan`), or the whole
 * column exactly, having no index yet (`scan`).
 */
export type LegRead = 'index' | 'index_and_fresh' | 'index_and_scan' | 'scan';

/**
 * Where a leg found a row: in its index, among the fresh rows beside it, by an exact scan of the column, or, for a
 * leg that read its index and the rows outside it together, in either (`index_or_scan`: the row store does not say).
 */
export type Found = 'index' | 'fresh' | 'scan' | 'index_or_scan';

/** What one leg did, as the request's `explain` says. */
export interface LegReport {
  read: LegRead;
  /** Milliseconds from the leg's start to its ranking. */
  ms: number;
  /** Hits it read (its window, and past it those tied at its edge). */
  candidates: number;
  /** Rows it read outside its index. */
  outside_index: number;
  weight: number;
}

/** The request's `explain`: the version searched, the fusion constant, and each leg that ran. */
export interface SearchExplain {
  version: number;
  rrf_k: number;
  legs: { text?: LegReport; vector?: LegReport };
}

/** What the per-row explanation needs of a leg: how it read, and which rows it found among the fresh ones. */
export interface LegSource {
  read: LegRead;
  fresh: ReadonlySet<bigint>;
  weight: number;
}

const legType = (measure: 'score' | 'distance') =>
  new arrow.Struct([
    new arrow.Field('rank', new arrow.Int32(), true),
    new arrow.Field(measure, new arrow.Float64(), true),
    new arrow.Field('contribution', new arrow.Float64(), false),
    new arrow.Field('found', new arrow.Utf8(), true),
  ]);

/** The `_explain` column: per row, `{text: {rank, score, contribution, found}, vector: {rank, distance, …}}`. */
export const EXPLAIN_FIELD = new arrow.Field(
  '_explain',
  new arrow.Struct([
    new arrow.Field('text', legType('score'), true),
    new arrow.Field('vector', legType('distance'), true),
  ]),
  false,
);

const foundBy = (source: LegSource, key: bigint): Found => {
  if (source.fresh.has(key)) return 'fresh';
  if (source.read === 'scan') return 'scan';
  return source.read === 'index_and_scan' ? 'index_or_scan' : 'index';
};

/** One leg's part of the `_explain` column for `rows`; a null struct where the leg did not run. */
function legData(
  rows: readonly Fused[],
  source: LegSource | undefined,
  rrfK: number,
  measure: 'score' | 'distance',
): Data {
  const type = legType(measure);
  const rank = rows.map((r) => (measure === 'score' ? r.textRank : r.vectorRank));
  const value = rows.map((r) => (measure === 'score' ? r.bm25 : r.distance));
  const children = [
    arrow.vectorFromArray(rank, new arrow.Int32()).data[0] as Data,
    arrow.vectorFromArray(value, new arrow.Float64()).data[0] as Data,
    arrow.vectorFromArray(
      rank.map((r) => (r === null || source === undefined ? 0 : source.weight / (rrfK + r))),
      new arrow.Float64(),
    ).data[0] as Data,
    arrow.vectorFromArray(
      rows.map((row, i) => (rank[i] === null || source === undefined ? null : foundBy(source, row.key))),
      new arrow.Utf8(),
    ).data[0] as Data,
  ];
  const nullBitmap = source === undefined ? new Uint8Array(Math.ceil(rows.length / 8)) : undefined;
  return arrow.makeData({
    type,
    length: rows.length,
    nullCount: source === undefined ? rows.length : 0,
    nullBitmap,
    children,
  });
}

/** The `_explain` column of `rows` (in reply order), given how each leg that ran read. */
export function explainData(
  rows: readonly Fused[],
  legs: { text?: LegSource; vector?: LegSource },
  rrfK: number,
): Data {
  return arrow.makeData({
    type: EXPLAIN_FIELD.type,
    length: rows.length,
    nullCount: 0,
    children: [legData(rows, legs.text, rrfK, 'score'), legData(rows, legs.vector, rrfK, 'distance')],
  });
}
