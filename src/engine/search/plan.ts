import type { Field } from 'apache-arrow';
import { BadRequest } from '../../errors.js';
import { type TextField, textFieldsOf } from '../indexes/fts.js';
import type { Metric } from '../indexes/registry.js';
import { vectorIndexOf } from '../indexes/vector.js';
import { checkPredicate } from '../predicate/predicate.js';
import type { TextOperator } from '../rows/source.js';
import { vectorWidth } from '../tables/schema.js';
import type { TableHandle } from '../tables/tables.js';
import type { Widening } from '../text/expansion.js';
import { type HybridRequest, hasTokens, operatorOf, projectionOf } from './request.js';
import { checkPhrases, parseTextQuery } from './text-query.js';

const MAX_WINDOW = 10_000;

/** The vector leg's column, query and metric. */
export interface VectorLegPlan {
  field: string;
  query: number[];
  metric: Metric;
}

/** What a hybrid search will do, decided from the request and the table's schema and index declarations alone. */
export interface HybridPlan {
  fields: Field[];
  offset: number;
  /** Candidates each leg ranks. */
  window: number;
  operator: TextOperator;
  filter: string | undefined;
  /**
   * The text leg's query and columns with their boosts; the query is undefined when it holds no token (the leg
   * does not run).
   */
  textQuery: string | undefined;
  /** The text query's phrases (`textQuery` is then its words alone). */
  phrases: string[];
  /** How the text query's words widen (`prefix`, `fuzziness`). */
  widening: Widening;
  textFields: TextField[];
  /** The vector leg's column, query and metric, when it runs. */
  vector: VectorLegPlan | undefined;
  /** No leg asked for, only a filter: the matching rows in row order, paged. */
  filterOnly: boolean;
}

/**
 * The query vector as Lance computes with it, in 32-bit floats, checked there: a number past f32's range is
 * infinite and makes every distance infinite or undefined, so is a squared length past it under cosine and squared
 * L2, and under cosine a vector whose squared length is zero
 * in f32 (all zeros, or as small as 1e-45) has no direction, so Lance would answer -Infinity or drop every row.
 */
function asF32(query: readonly number[], column: string, metric: Metric): number[] {
  const f32 = Float32Array.from(query);
  const overflow = f32.findIndex((x) => !Number.isFinite(x));
  if (overflow >= 0) {
    throw new BadRequest(`vector_query[${overflow}] = ${query[overflow]} is outside the range of a 32-bit float`);
  }
  let squared = 0;
  for (const x of f32) squared = Math.fround(squared + Math.fround(x * x));
  // Cosine and squared L2 take the query's squared length; negdot only its products, which may stay finite.
  if (metric !== 'negdot' && !Number.isFinite(squared)) {
    throw new BadRequest('vector_query is too long: its squared length overflows a 32-bit float; scale it down');
  }
  if (metric === 'cosine' && squared === 0) {
    throw new BadRequest(
      `vector_query has no direction as 32-bit floats (all zeros, or too small): its cosine distance to any row of "${column}" is undefined`,
    );
  }
  return Array.from(f32);
}

/**
 * Plans a hybrid search (docs/api.md): the projection, the page and window, which legs run and on what. Every
 * refusal a request earns from the table's declarations is decided here, before Lance is asked anything. Pure:
 * it reads only the table's schema and index declarations.
 */
export function planHybrid(table: Pick<TableHandle, 'schema' | 'indexes'>, req: HybridRequest): HybridPlan {
  const fields = projectionOf(table, req.projection);
  const offset = req.offset ?? 0;
  const window = req.window ?? Math.max(100, 2 * (offset + req.k));
  if (window < offset + req.k) throw new BadRequest(`window ${window} must be at least offset + k = ${offset + req.k}`);
  if (window > MAX_WINDOW) throw new BadRequest(`window ${window} is over the limit of ${MAX_WINDOW}`);
  const operator = operatorOf(req.operator);
  const filter = req.filter === undefined ? undefined : checkPredicate(req.filter, table.schema, 'filter');

  let textQuery: string | undefined;
  let phrases: string[] = [];
  let textFields: TextField[] = [];
  if (req.text_query !== undefined) {
    textFields = textFieldsOf(table, { name: 'text_field', value: req.text_field }, req.text_fields);
    const parsed = parseTextQuery(req.text_query, 'text_query');
    for (const { field } of textFields) checkPhrases(table.indexes.fts, field, parsed, 'text_query');
    if (hasTokens(req.text_query)) {
      textQuery = parsed.words;
      phrases = parsed.phrases;
    }
  }
  let vector: VectorLegPlan | undefined;
  if (req.vector_query !== undefined) {
    const name = req.vector_field;
    if (name === undefined) throw new BadRequest('vector_field is required with vector_query');
    const { declared, field } = vectorIndexOf(table, name);
    const dim = vectorWidth(field.type) ?? declared.dim;
    if (req.vector_query.length !== dim) {
      throw new BadRequest(`vector_query has ${req.vector_query.length} numbers; column "${name}" has dim ${dim}`);
    }
    vector = { field: name, query: asF32(req.vector_query, name, declared.metric), metric: declared.metric };
  }
  const filterOnly = req.text_query === undefined && req.vector_query === undefined && filter !== undefined;
  if (textQuery === undefined && vector === undefined && !filterOnly) {
    throw new BadRequest(
      'nothing to search: send a text_query with at least one token, a vector_query, or a filter alone',
    );
  }
  const widening = { prefix: req.prefix === true, fuzziness: req.fuzziness ?? 0 };
  return { fields, offset, window, operator, filter, textQuery, phrases, widening, textFields, vector, filterOnly };
}
