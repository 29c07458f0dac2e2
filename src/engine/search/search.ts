import { MatchQuery, Operator } from '@lancedb/lancedb';
import type { Data, DataType, Field, RecordBatch, Schema, Table } from 'apache-arrow';
import type { Static } from 'typebox';
import { arrow } from '../../arrow/arrow.js';
import { intRange, parseDate, parseTimestamp } from '../../arrow/from-json.js';
import { minRowsBytes } from '../../arrow/row-size.js';
import { takeColumns } from '../../arrow/take.js';
import type { ExactMatchBody, HybridSearchBody, TokenMatchBody } from '../../contract/search.js';
import { BadRequest, ResultTooLarge } from '../../errors.js';
import { LANCE_METRIC } from '../indexes.js';
import { READ_OPTIONS } from '../lance.js';
import { checkPredicate, readingPredicate } from '../predicate.js';
import { type Metric, ROW_KEY, spellingOf, vectorWidth } from '../tables/schema.js';
import type { TableHandle } from '../tables/tables.js';
import { readByKeys, rowIdsOf } from '../writes/row-keys.js';
import { batchOf, rowKeysOf } from '../writes/rows.js';
import { type Fused, fuse, inReach, rankLeg } from './fusion.js';

const { Type } = arrow;

/** The bodies of the search routes, less the table they name (the worker has opened it): the contract's types. */
export type HybridRequest = Omit<Static<typeof HybridSearchBody>, 'table_name'>;
/** `count` takes the same as `token_match`, without projection and limit. */
export type MatchRequest = Omit<Static<typeof TokenMatchBody>, 'table_name'>;
export type ExactRequest = Omit<Static<typeof ExactMatchBody>, 'table_name'>;

/** Rows to answer with, and their schema (for an empty answer). */
export interface RowsResult {
  schema: Schema;
  rows: RecordBatch[];
}

const MAX_WINDOW = 10_000;
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
const ALL_ROWS = 1_000_000_000;
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

function operatorOf(raw: string | undefined): Operator {
  const op = (raw ?? 'or').toLowerCase();
  if (op !== 'or' && op !== 'and') throw new BadRequest(`operator must be "or" or "and", got "${raw}"`);
  return op === 'and' ? Operator.And : Operator.Or;
}

/**
 * Whether a query can have tokens under both analyzers (they split on what is not a letter or digit). Decided
 * here rather than by asking Lance to tokenize, which cost a round trip (~0.3–0.7 ms) before every text
 * leg; where only Lance would find no token (a word over 255 characters), the leg simply matches nothing.
 */
const hasTokens = (query: string) => /[\p{L}\p{N}]/u.test(query);

const quoteName = (name: string) => `\`${name.replaceAll('`', '``')}\``;

function projectionOf(table: TableHandle, projection: readonly string[] | undefined): Field[] {
  if (projection === undefined) return table.schema.fields;
  const byName = new Map(table.schema.fields.map((f) => [f.name, f] as const));
  const seen = new Set<string>();
  return projection.map((name, i) => {
    const field = byName.get(name);
    if (field === undefined) throw new BadRequest(`projection[${i}]: no column named "${name}"`);
    if (seen.has(name)) throw new BadRequest(`projection[${i}]: column "${name}" is listed twice`);
    seen.add(name);
    return field;
  });
}

function ftsColumn(table: TableHandle, field: string | undefined, what: string): string {
  if (field === undefined) throw new BadRequest(`${what} is required`);
  if (!table.schema.fields.some((f) => f.name === field)) throw new BadRequest(`${what}: no column named "${field}"`);
  if (!table.indexes.fts.some((f) => f.column === field)) {
    throw new BadRequest(`${what}: column "${field}" has no full-text index`);
  }
  return field;
}

const keysOf = (result: Table): bigint[] => Array.from(rowKeysOf(result));

/** Row keys in row order. */
const inRowOrder = (result: Table): bigint[] => Array.from(rowKeysOf(result).sort());

function numbersOf(table: Table, name: string): number[] {
  const column = table.getChild(name);
  const out: number[] = [];
  if (column === null) return out;
  for (const chunk of column.data) {
    const values = chunk.values as Float32Array | Float64Array;
    for (let i = 0; i < chunk.length; i++) out.push(values[i] ?? 0);
  }
  return out;
}

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

/** Where `rowsByKeys` may find rows before it reads them by key. */
interface KnownRows {
  /** Results that already carry the projected columns and the row key. */
  fetched?: readonly Table[];
  /** The Lance row id a search leg saw for a key. */
  rowIds?: ReadonlyMap<bigint, bigint>;
}

/**
 * The rows of `keys`, in that order, with the projected columns (and, for search, the score columns).
 * Rows not already at hand are read together (`readByKeys`), then laid out as zero-copy slices, one per run
 * of rows that are neighbours in both orders.
 */
async function rowsByKeys(
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
          new arrow.Field('_score', new arrow.Float64(), false),
          new arrow.Field('_bm25', new arrow.Float64(), true),
          new arrow.Field('_distance', new arrow.Float64(), true),
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
    const found = await readByKeys(table.lance, missing, [...fields.map((f) => f.name), ROW_KEY], known.rowIds);
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
      float64Data(part.map((s) => s.score)),
      float64Data(part.map((s) => s.bm25)),
      float64Data(part.map((s) => s.distance)),
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

/** BM25 + vector search fused by reciprocal rank (docs/api.md). */
export async function hybridSearch(table: TableHandle, req: HybridRequest): Promise<RowsResult> {
  const fields = projectionOf(table, req.projection);
  const offset = req.offset ?? 0;
  const window = req.window ?? Math.max(100, 2 * (offset + req.k));
  if (window < offset + req.k) throw new BadRequest(`window ${window} must be at least offset + k = ${offset + req.k}`);
  if (window > MAX_WINDOW) throw new BadRequest(`window ${window} is over the limit of ${MAX_WINDOW}`);
  const operator = operatorOf(req.operator);
  const filter = req.filter === undefined ? undefined : checkPredicate(req.filter, 'filter');

  let textQuery: string | undefined;
  let textField: string | undefined;
  if (req.text_query !== undefined) {
    textField = ftsColumn(table, req.text_field, 'text_field');
    if (hasTokens(req.text_query)) textQuery = req.text_query;
  }
  let vector: { field: string; query: number[]; metric: Metric } | undefined;
  if (req.vector_query !== undefined) {
    const name = req.vector_field;
    if (name === undefined) throw new BadRequest('vector_field is required with vector_query');
    const declared = table.indexes.vector.find((v) => v.column === name);
    const field = table.schema.fields.find((f) => f.name === name);
    if (field === undefined) throw new BadRequest(`vector_field: no column named "${name}"`);
    if (declared === undefined) throw new BadRequest(`vector_field: column "${name}" has no vector index`);
    const dim = vectorWidth(field.type) ?? declared.dim;
    if (req.vector_query.length !== dim) {
      throw new BadRequest(`vector_query has ${req.vector_query.length} numbers; column "${name}" has dim ${dim}`);
    }
    // 1 − cos(a, 0) has no value: Lance would drop every row, answering an empty page as if nothing matched.
    if (declared.metric === 'cosine' && req.vector_query.every((x) => x === 0)) {
      throw new BadRequest(`vector_query is all zeros: its cosine distance to any row of "${name}" is undefined`);
    }
    vector = { field: name, query: req.vector_query, metric: declared.metric };
  }
  if (textQuery === undefined && vector === undefined) {
    throw new BadRequest('nothing to search: send a text_query with at least one token, or a vector_query');
  }
  if (req.k === 0) return rowsByKeys(table, [], fields, []);

  // One leg alone ranks as it fuses, so it needs only the rows up to the page's end, not the whole window.
  const both = textQuery !== undefined && vector !== undefined;
  const ranked = both ? window : offset + req.k;
  // Both legs read only row ids and their measure, and the winners' columns are read after fusion: Lance's
  // take of columns for every candidate cost more than the search (RowKeys). One leg alone reads its few
  // candidates' columns with them, as the extra read after it would cost more (~1.4 ms) than it saves.
  const carried = both ? [] : [ROW_KEY, ...fields.map((f) => f.name)];
  // The row id each ranked key had in its leg, for reading the winners' columns (`rowsByKeys`).
  const rowIds = new Map<bigint, bigint>();
  const ranking = async (hits: Table, values: number[], better: 'higher' | 'lower', weight: number | undefined) => {
    const ids = both ? rowIdsOf(hits) : [];
    const keys = both ? [] : keysOf(hits);
    // The row key of each hit in `at`; undefined for a row deleted since the leg read it.
    const keysAt = (at: readonly number[]) =>
      both ? table.rowKeys.of(at.map((i) => ids[i] as bigint)) : Promise.resolve(at.map((i) => keys[i]));
    // Only hits as good as the `ranked`-th best can be ranked; the rest were read for ties and need no key,
    // unless a deleted row (no key, left out as a later read would leave it out) frees a place for them.
    let at = inReach(values, better, ranked);
    let found = await keysAt(at);
    if (at.length < values.length && found.includes(undefined)) {
      at = values.map((_, i) => i);
      found = await keysAt(at);
    }
    const kept = found.flatMap((key, j) => (key === undefined ? [] : [j]));
    if (both) for (const j of kept) rowIds.set(found[j] as bigint, ids[at[j] as number] as bigint);
    return {
      ...rankLeg(
        kept.map((j) => found[j] as bigint),
        kept.map((j) => values[at[j] as number] as number),
        better,
        ranked,
      ),
      weight: weight ?? 1,
      hits: both ? undefined : hits,
    };
  };
  const textLeg = async () => {
    if (textQuery === undefined || textField === undefined) return undefined;
    const read = (limit: number) => {
      let q = table.lance
        .query()
        .fullTextSearch(new MatchQuery(textQuery, textField, { operator }))
        .select([...carried, '_score'])
        .limit(limit);
      if (both) q = q.withRowId();
      if (filter !== undefined) q = q.where(filter);
      return readingFilter(() => q.toArrow(READ_OPTIONS));
    };
    const scores = (t: Table) => numbersOf(t, '_score');
    const { hits, values } = await readLeg(read, scores, 'higher', ranked, firstTextRead(ranked, both));
    return ranking(hits, values, 'higher', req.text_weight);
  };
  const vectorLeg = async () => {
    if (vector === undefined) return undefined;
    const ann = table.ann.has(vector.field);
    const search = (limit: number, wide: boolean) => {
      let q = table.lance
        .vectorSearch(vector.query)
        .column(vector.field)
        .distanceType(LANCE_METRIC[vector.metric])
        .select(both ? ['_distance'] : carried)
        .limit(limit);
      if (both) q = q.withRowId();
      if (ann) {
        q = wide ? q.minimumNprobes(NPROBES).maximumNprobes(ALL_PARTITIONS) : q.nprobes(NPROBES);
        q = q.refineFactor(refineFactorFor(limit));
      }
      if (filter !== undefined) q = q.where(filter);
      return readingFilter(() => q.toArrow(READ_OPTIONS));
    };
    // The partitions probed can hold too few rows that pass a narrow filter (or were not deleted) to fill the
    // page: then more are searched, only as many as it takes. Not from the start: that mode measured 16.7 ms
    // against 5.5 for an unfiltered leg at 1.2M rows, even when the first partitions were enough. Nor for a
    // window short of candidates that still fills the page: a filter matching 0.1% of 1.2M rows left a hybrid
    // window ~83 of 101, and searching on for the rest took 81 ms against 24.
    const page = offset + req.k + 1;
    const read = async (limit: number) => {
      const hits = await search(limit, false);
      return ann && hits.numRows < Math.min(limit, page) ? search(limit, true) : hits;
    };
    const distances = (t: Table) => numbersOf(t, '_distance').map(CANONICAL[vector.metric]);
    // Distances rarely tie: one row past the window shows whether they do.
    const { hits, values } = await readLeg(read, distances, 'lower', ranked, ranked + 1);
    return ranking(hits, values, 'lower', req.vector_weight);
  };
  const [text, vec] = await Promise.all([textLeg(), vectorLeg()]);
  const winners = fuse(text, vec, { rrfK: req.rrf_k ?? 60, offset, k: req.k });
  const fetched = [text?.hits, vec?.hits].filter((hits): hits is Table => hits !== undefined);
  return rowsByKeys(
    table,
    winners.map((w) => w.key),
    fields,
    winners,
    { fetched, rowIds },
  );
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
): Promise<{ hits: Table; values: number[] }> {
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

/** Every row matching a full-text query (docs/api.md), with `columns`; undefined when the query has no token. */
async function fullTextMatches(table: TableHandle, req: MatchRequest, columns: string[]): Promise<Table | undefined> {
  const column = ftsColumn(table, req.field_name, 'field_name');
  const operator = operatorOf(req.operator);
  if (!hasTokens(req.query)) return undefined;
  return table.lance
    .query()
    .fullTextSearch(new MatchQuery(req.query, column, { operator }))
    .select(columns)
    .limit(ALL_ROWS)
    .toArrow(READ_OPTIONS);
}

/** The exact number of rows matching a full-text query; no columns are read, Lance only counts. */
export async function countMatches(table: TableHandle, req: MatchRequest): Promise<number> {
  return (await fullTextMatches(table, req, []))?.numRows ?? 0;
}

/** The rows `count` would count, in row order, unscored. */
export async function tokenMatch(table: TableHandle, req: MatchRequest, maxBytes: number): Promise<RowsResult> {
  const fields = projectionOf(table, req.projection);
  const hits = await fullTextMatches(table, req, [ROW_KEY]);
  const keys = hits === undefined ? [] : inRowOrder(hits);
  return rowsWithin(table, req.limit === undefined ? keys : keys.slice(0, req.limit), fields, maxBytes);
}

/** Keys read together when a reply may hold any number of rows: one `IN` list of Lance's, one batch of ours. */
const KEYS_PER_READ = 16_384;

/**
 * The rows of `keys`, unscored, read a part at a time and refused as soon as they pass `maxBytes`: at once
 * when even their fixed-width part would, else as the parts read add up, never after reading them all.
 */
async function rowsWithin(
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

/**
 * An integer as SQL. The parser reads `-9223372036854775808` as the negation of a literal one past the
 * largest i64, which overflows; that one value is written as a difference instead.
 */
const integerLiteral = (v: bigint): string => (v === -(2n ** 63n) ? '(-9223372036854775807 - 1)' : v.toString());

/** `value` as a SQL literal of the column's type, or a 400; values are parsed, never pasted. */
export function literalFor(type: DataType, value: string, column: string): string {
  const fail = (expected: string): never => {
    throw new BadRequest(
      `value "${value}" is not ${expected} (column "${column}" is ${spellingOf(type) ?? String(type)})`,
    );
  };
  switch (type.typeId) {
    case Type.Int: {
      if (!/^-?\d+$/.test(value)) fail('an integer');
      const [lo, hi] = intRange(type);
      const v = BigInt(value);
      if (v < lo || v > hi) fail(`an integer from ${lo} to ${hi}`);
      return integerLiteral(v);
    }
    case Type.Float: {
      const v = value === 'NaN' || value === 'Infinity' || value === '-Infinity' ? value : Number(value);
      if (typeof v === 'number' && (value.trim() === '' || Number.isNaN(v))) fail('a number');
      const sqlType = spellingOf(type) === 'f64' ? 'DOUBLE' : 'FLOAT';
      return `CAST('${typeof v === 'number' ? String(v) : v}' AS ${sqlType})`;
    }
    case Type.Bool:
      if (value !== 'true' && value !== 'false') fail('true or false');
      return value.toUpperCase();
    case Type.Utf8:
    case Type.LargeUtf8:
      return `'${value.replaceAll("'", "''")}'`;
    case Type.Date:
      if (spellingOf(type) !== 'date32' || parseDate(value) === undefined) fail('a date "YYYY-MM-DD"');
      return `DATE '${value}'`;
    case Type.Timestamp: {
      const v = parseTimestamp(value, (type as InstanceType<typeof arrow.Timestamp>).unit);
      if (v === undefined) fail("an RFC 3339 timestamp exact to the column's unit");
      return integerLiteral(v as bigint);
    }
    default:
      throw new BadRequest(`exact_match cannot compare column "${column}" of type ${spellingOf(type) ?? String(type)}`);
  }
}

/** Rows whose column equals `value`, in row order (docs/api.md). */
export async function exactMatch(table: TableHandle, req: ExactRequest, maxBytes: number): Promise<RowsResult> {
  const fields = projectionOf(table, req.projection);
  const field = table.schema.fields.find((f) => f.name === req.field_name);
  if (field === undefined) throw new BadRequest(`field_name: no column named "${req.field_name}"`);
  const literal = literalFor(field.type, req.value, field.name);
  const lhs =
    field.type.typeId === Type.Timestamp ? `arrow_cast(${quoteName(field.name)}, 'Int64')` : quoteName(field.name);
  const hits = await table.lance
    .query()
    .where(`${lhs} = ${literal}`)
    .select([ROW_KEY])
    .limit(ALL_ROWS)
    .toArrow(READ_OPTIONS);
  const keys = inRowOrder(hits);
  return rowsWithin(table, req.limit === undefined ? keys : keys.slice(0, req.limit), fields, maxBytes);
}
