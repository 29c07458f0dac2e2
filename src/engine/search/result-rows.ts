import type { Data, Field, RecordBatch, Schema, Table } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { minRowsBytes } from '../../arrow/row-size.js';
import { takeColumns } from '../../arrow/take.js';
import { ResultTooLarge } from '../../errors.js';
import type { RowId } from '../rows/source.js';
import { ROW_KEY } from '../tables/schema.js';
import type { TableHandle } from '../tables/tables.js';
import { batchOf, rowKeysOf } from '../writes/rows.js';
import { EXPLAIN_FIELD } from './explain.js';
import type { Fused } from './fusion.js';
import type { RowsResult } from './request.js';

// The rows of a reply: the projected columns of row keys, read by key where no leg read them already.

export const keysOf = (result: Table): bigint[] => Array.from(rowKeysOf(result));

/** Row keys in row order. */
export const inRowOrder = (result: Table): bigint[] => Array.from(rowKeysOf(result).sort());

function float64Data(values: readonly (number | null)[]): Data {
  const data = new Float64Array(values.length);
  const bitmap = new Uint8Array(Math.ceil(values.length / 8));
  let nulls = 0;
  values.forEach((v, i) => {
    if (v === null) nulls++;
    else {
      data[i] = v;
      bitmap[i >> 3] = (bitmap[i >> 3] ?? 0) | (1 << (i & 7));
    }
  });
  return arrow.makeData({
    type: new arrow.Float64(),
    length: values.length,
    nullCount: nulls,
    nullBitmap: nulls === 0 ? undefined : bitmap,
    data,
  });
}

/** Where `rowsByKeys` may find rows before it reads them by key, and what else a search answers with them. */
interface KnownRows {
  /** Results that already carry the projected columns and the row key. */
  fetched?: readonly Table[];
  /** The row identity a search leg saw for a key. */
  rowIds?: ReadonlyMap<bigint, RowId>;
  /** The `_explain` column of the scored rows given, when the search was asked to explain itself. */
  explain?: (rows: readonly Fused[]) => Data;
  /** The rows were not ranked (a search with only a filter): `_score` is null. */
  unranked?: boolean;
}

/**
 * The rows of `keys`, in that order, with the projected columns (and, for search, the score columns).
 * Rows not already at hand are read together (`RowSource.rowsByKey`), then laid out as zero-copy slices, one per run
 * of rows that are neighbours in both orders.
 */
export async function rowsByKeys(
  table: TableHandle,
  keys: readonly bigint[],
  fields: readonly Field[],
  scores?: readonly Fused[],
  known: KnownRows = {},
): Promise<RowsResult> {
  const extra =
    scores === undefined
      ? []
      : [
          new arrow.Field('_score', new arrow.Float64(), known.unranked === true),
          new arrow.Field('_bm25', new arrow.Float64(), true),
          new arrow.Field('_distance', new arrow.Float64(), true),
          ...(known.explain === undefined ? [] : [EXPLAIN_FIELD]),
        ];
  const schema = new arrow.Schema([...fields, ...extra]);
  if (keys.length === 0) return { schema, rows: [] };
  // Rows the legs already read (they select the projection too) are taken from there; only the rest is read.
  const batches: RecordBatch[] = (known.fetched ?? []).flatMap((t) => t.batches);
  const where = new Map<bigint, { batch: number; row: number }>();
  const index = (from: number) => {
    for (let b = from; b < batches.length; b++) {
      const column = (batches[b] as RecordBatch).getChild(ROW_KEY);
      for (let i = 0; i < (batches[b] as RecordBatch).numRows; i++) {
        const key = column?.get(i) as bigint;
        if (!where.has(key)) where.set(key, { batch: b, row: i });
      }
    }
  };
  index(0);
  const missing = keys.filter((key) => !where.has(key));
  if (missing.length > 0) {
    const found = await table.rows.rowsByKey(missing, [...fields.map((f) => f.name), ROW_KEY], known.rowIds);
    const from = batches.length;
    batches.push(...found.flatMap((t) => t.batches));
    index(from);
  }
  // Runs of rows that are neighbours in both orders (`from`: the run's first index in `keys`). A key deleted
  // between ranking and fetching (a read of a later version than the ranking) has no row and is left out.
  const runs: { batch: RecordBatch; start: number; end: number; from: number }[] = [];
  keys.forEach((key, i) => {
    const at = where.get(key);
    if (at === undefined) return;
    const last = runs[runs.length - 1];
    const batch = batches[at.batch] as RecordBatch;
    if (last?.batch === batch && last.end === at.row && last.from + (last.end - last.start) === i) last.end++;
    else runs.push({ batch, start: at.row, end: at.row + 1, from: i });
  });
  const keyIndexes = (run: (typeof runs)[number]) =>
    Array.from({ length: run.end - run.start }, (_, j) => run.from + j);
  const scoreColumns = (picked: readonly number[]): Data[] => {
    if (scores === undefined) return [];
    const part = picked.map((i) => scores[i] as Fused);
    return [
      float64Data(part.map((s) => (known.unranked === true ? null : s.score))),
      float64Data(part.map((s) => s.bm25)),
      float64Data(part.map((s) => s.distance)),
      ...(known.explain === undefined ? [] : [known.explain(part)]),
    ];
  };
  // Rows gathered from many places are copied into one batch: every batch is an IPC message of its own, and
  // encoding ~7 one-row batches cost more than all the rest of a text query's work outside Lance.
  const copied =
    runs.length > 1
      ? takeColumns(
          new arrow.Schema([...fields]),
          runs.map((r) => [r.batch, r.start, r.end] as const),
        )
      : undefined;
  if (copied !== undefined) {
    const picked = runs.flatMap(keyIndexes);
    return { schema, rows: [batchOf(schema, picked.length, [...copied, ...scoreColumns(picked)])] };
  }
  const rows = runs.map((run) => {
    const slice = run.batch.slice(run.start, run.end);
    const columns = fields.map(
      (f) => slice.data.children[run.batch.schema.fields.findIndex((s) => s.name === f.name)] as Data,
    );
    return batchOf(schema, run.end - run.start, [...columns, ...scoreColumns(keyIndexes(run))]);
  });
  return { schema, rows };
}

/** Keys read together when a reply may hold any number of rows: one `IN` list of Lance's, one batch of ours. */
const KEYS_PER_READ = 16_384;

/**
 * The rows of `keys`, unscored, read a part at a time and refused as soon as they pass `maxBytes`: at once
 * when even their fixed-width part would, else as the parts read add up, never after reading them all.
 */
export async function rowsWithin(
  table: TableHandle,
  keys: readonly bigint[],
  fields: readonly Field[],
  maxBytes: number,
): Promise<RowsResult> {
  if (minRowsBytes(fields, keys.length) > maxBytes) throw new ResultTooLarge(maxBytes, 'the reply');
  if (keys.length <= KEYS_PER_READ) return rowsByKeys(table, keys, fields);
  const rows: RecordBatch[] = [];
  let bytes = 0;
  let schema: Schema | undefined;
  for (let at = 0; at < keys.length; at += KEYS_PER_READ) {
    const part = await rowsByKeys(table, keys.slice(at, at + KEYS_PER_READ), fields);
    schema = part.schema;
    bytes += part.rows.reduce((n, batch) => n + batch.data.byteLength, 0);
    if (bytes > maxBytes) throw new ResultTooLarge(maxBytes, 'the reply');
    rows.push(...part.rows);
  }
  return { schema: schema ?? new arrow.Schema([...fields]), rows };
}
