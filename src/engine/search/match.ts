import type { DataType, Table } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { intRange, parseDate, parseTimestamp } from '../../arrow/from-json.js';
import { BadRequest } from '../../errors.js';
import { textFieldsOf } from '../indexes/fts.js';
import { declarationKey } from '../indexes/registry.js';
import { integerLiteral, stringLiteral } from '../predicate/literals.js';
import { ROW_KEY, spellingOf } from '../tables/schema.js';
import type { TableHandle } from '../tables/tables.js';
import { freshnessOf } from './freshness.js';
import {
  type ExactRequest,
  hasTokens,
  type MatchRequest,
  operatorOf,
  projectionOf,
  quoteName,
  type Receipt,
  type RowsResult,
} from './request.js';
import { inRowOrder, rowsWithin } from './result-rows.js';
import { checkPhrases, clausesOf, parseTextQuery, widened } from './text-query.js';

const { Type } = arrow;
// Unscored matches: full-text count and token match, and exact match of one column's value.

/**
 * Every row matching a full-text query (docs/api.md) in its column, or in any of its `text_fields`, with `columns`
 * (undefined when the query has no token), and the search's receipt.
 */
async function fullTextMatches(
  table: TableHandle,
  req: MatchRequest,
  columns: string[],
): Promise<{ hits: Table | undefined; receipt: Receipt }> {
  const fields = textFieldsOf(table, { name: 'field_name', value: req.field_name }, req.text_fields);
  const operator = operatorOf(req.operator);
  const tokens = hasTokens(req.query);
  const parsed = parseTextQuery(req.query, 'query');
  for (const { field } of fields) checkPhrases(table.indexes.fts, field, parsed, 'query');
  const legs = fields.map(({ field }) => (tokens ? declarationKey('fts', field) : undefined));
  const { receipt } = await freshnessOf(table, legs, false);
  if (!tokens) return { hits: undefined, receipt };
  // A column where the query makes no token (stop words alone), or whose widened words stand for no term,
  // matches nothing.
  const widening = { prefix: req.prefix === true, fuzziness: req.fuzziness ?? 0 };
  const asked = (
    await Promise.all(
      fields.map(async ({ field }) => {
        const clauses = await clausesOf(table, field, parsed);
        const query =
          clauses === undefined ? undefined : await widened(table, receipt.version, field, clauses, widening, operator);
        return { field, query };
      }),
    )
  ).flatMap(({ field, query }) =>
    query === undefined ? [] : [{ query: query.words, phrases: query.phrases, anyOf: query.anyOf, field, operator }],
  );
  const [only] = asked;
  if (fields.length === 1 && only !== undefined) return { hits: await table.rows.textMatches(only, columns), receipt };
  // A row matching in several columns is one row: told apart by row key, which is all the callers read.
  const each = await Promise.all(asked.map((match) => table.rows.textMatches(match, [ROW_KEY])));
  const keys = new Set<bigint>();
  for (const hits of each) for (const key of hits.getChild(ROW_KEY) ?? []) keys.add(key as bigint);
  return { hits: new arrow.Table({ [ROW_KEY]: arrow.vectorFromArray([...keys], new arrow.Int64()) }), receipt };
}

/** The exact number of rows matching a full-text query; no columns are read, the source only counts. */
export async function countMatches(
  table: TableHandle,
  req: MatchRequest,
): Promise<{ count: number; receipt: Receipt }> {
  const { hits, receipt } = await fullTextMatches(table, req, []);
  return { count: hits?.numRows ?? 0, receipt };
}

/** The rows `count` would count, in row order, unscored. */
export async function tokenMatch(table: TableHandle, req: MatchRequest, maxBytes: number): Promise<RowsResult> {
  const fields = projectionOf(table, req.projection);
  const { hits, receipt } = await fullTextMatches(table, req, [ROW_KEY]);
  const keys = hits === undefined ? [] : inRowOrder(hits);
  const rows = await rowsWithin(table, req.limit === undefined ? keys : keys.slice(0, req.limit), fields, maxBytes);
  return { ...rows, receipt };
}

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
      return stringLiteral(value);
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
  const hits = await table.rows.rowsWhere(`${lhs} = ${literal}`, [ROW_KEY]);
  const keys = inRowOrder(hits);
  return rowsWithin(table, req.limit === undefined ? keys : keys.slice(0, req.limit), fields, maxBytes);
}
