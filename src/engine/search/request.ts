import type { Field, RecordBatch, Schema } from 'apache-arrow';
import type { Static } from 'typebox';
import type { ExactMatchBody, HybridSearchBody, TokenMatchBody } from '../../contract/search.js';
import { BadRequest } from '../../errors.js';
import type { TextOperator } from '../rows/source.js';
import type { TableHandle } from '../tables/tables.js';
import type { SearchExplain } from './explain.js';

// What a search or match asks, and the checks of it that need the table: projection, operator, FTS column.

/** The bodies of the search routes, less the table they name (the worker has opened it): the contract's types. */
export type HybridRequest = Omit<Static<typeof HybridSearchBody>, 'table_name'>;
/** `count` takes the same as `token_match`, without projection and limit. */
export type MatchRequest = Omit<Static<typeof TokenMatchBody>, 'table_name'>;
export type ExactRequest = Omit<Static<typeof ExactMatchBody>, 'table_name'>;

/**
 * What a search read (docs/api.md, freshness receipt): the table version it started from (every write answered
 * before it is in it) and the most rows any of its legs read outside its index.
 */
export interface Receipt {
  version: number;
  freshRows: number;
}

/**
 * Rows to answer with, and their schema (for an empty answer); a search's receipt with them, and what else the
 * reply says beside the rows (a JSON member each, in Arrow the schema's metadata `strata.<name>`).
 */
export interface RowsResult {
  schema: Schema;
  rows: RecordBatch[];
  receipt?: Receipt;
  members?: { explain?: SearchExplain };
}

/** The operator of the contract's (which allows only "or" and "and", in any case). */
export const operatorOf = (raw: string | undefined): TextOperator => (raw?.toLowerCase() === 'and' ? 'AND' : 'OR');

/**
 * Whether a query can have tokens under both analyzers (they split on what is not a letter or digit). Decided
 * here rather than by asking Lance to tokenize, which cost a round trip (~0.3–0.7 ms) before every text
 * leg; where only Lance would find no token (a word over 255 characters), the leg simply matches nothing.
 */
export const hasTokens = (query: string) => /[\p{L}\p{N}]/u.test(query);

export const quoteName = (name: string) => `\`${name.replaceAll('`', '``')}\``;

export function projectionOf(table: Pick<TableHandle, 'schema'>, projection: readonly string[] | undefined): Field[] {
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
