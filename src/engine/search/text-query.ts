import { BadRequest } from '../../errors.js';
import type { FtsIndex } from '../indexes/fts.js';
import type { TextOperator } from '../rows/source.js';
import type { TableHandle } from '../tables/tables.js';
import { expansionsOf, type Widening } from '../text/expansion.js';
import { hasTokens } from './request.js';

/** A text query as a user writes it: its words, and the phrases it holds in double quotes (docs/api.md, Phrases). */
export interface TextQuery {
  words: string;
  phrases: string[];
  /** The words widened (`prefix`, `fuzziness`): for each, the terms of the live rows it stands for. */
  anyOf?: string[][];
}

/**
 * Splits a text query into its words and its phrases: `"red kettle" cheap` is the phrase `red kettle` and the
 * word `cheap`. An unclosed quote is a 400 rather than a guess at what was meant.
 */
export function parseTextQuery(text: string, what: string): TextQuery {
  if (!text.includes('"')) return { words: text, phrases: [] };
  const parts = text.split('"');
  if (parts.length % 2 === 0) {
    throw new BadRequest(`${what} has an unclosed double quote: a phrase is written "like this"`);
  }
  const words = parts.filter((_, i) => i % 2 === 0).join(' ');
  const phrases = parts.filter((part, i) => i % 2 === 1 && hasTokens(part)).map((part) => part.trim());
  return { words, phrases };
}

/** Refuses phrases on a column whose full-text index keeps no positions, naming the column and the fix. */
export function checkPhrases(indexes: readonly FtsIndex[], field: string, query: TextQuery, what: string): void {
  if (query.phrases.length === 0) return;
  if (indexes.find((f) => f.column === field)?.positions === true) return;
  throw new BadRequest(
    `${what} holds a phrase ("${query.phrases[0]}"), but the full-text index of column "${field}" keeps no positions: declare it with "positions": true to search phrases`,
  );
}

/**
 * A query with phrases as a column's analyzer sees it: the words, and each phrase, that make no token there (stop
 * words alone) are left out. Kept, such a clause would match no row, and under `and` make the whole query match none.
 * Undefined when nothing is left.
 */
export async function clausesOf(table: TableHandle, field: string, query: TextQuery): Promise<TextQuery | undefined> {
  if (query.phrases.length === 0) return query;
  const [words = [], ...phrases] = await table.text.tokensOf([query.words, ...query.phrases], field);
  const kept = query.phrases.filter((_, i) => (phrases[i]?.length ?? 0) > 0);
  if (words.length === 0 && kept.length === 0) return undefined;
  return { words: words.length > 0 ? query.words : '', phrases: kept };
}

/** Words of a query that `fuzziness` widens, at most. */
const MAX_FUZZY_WORDS = 16;

/**
 * The query with its words widened (docs/api.md, Prefixes and typos): each word stands for the terms of the live
 * rows at `version` within `fuzziness` edits of it, the last one with `prefix` also for every term it begins.
 * Lance is asked for those terms as words, so only terms its analyzer leaves as they are are kept. A word that
 * stands for no term matches nothing: under `and` the whole query then matches none (undefined); under `or` it
 * is dropped. Unwidened (no prefix, no fuzziness), the query is answered as it is.
 */
export async function widened(
  table: TableHandle,
  version: number,
  field: string,
  query: TextQuery,
  widening: Widening,
  operator: TextOperator,
): Promise<TextQuery | undefined> {
  if (!widening.prefix && widening.fuzziness === 0) return query;
  const [tokens = []] = await table.text.tokensOf([query.words], field);
  if (tokens.length === 0) return query;
  // Each word with typos is held against every term of the column: a long query must not hold the event loop.
  if (widening.fuzziness > 0 && tokens.length > MAX_FUZZY_WORDS) {
    throw new BadRequest(
      `fuzziness applies to at most ${MAX_FUZZY_WORDS} words of a query; this one holds ${tokens.length}`,
    );
  }
  const stats = await table.text.at(version, field);
  if (stats === undefined) return operator === 'AND' ? undefined : { ...query, words: '' };
  const expanded = expansionsOf(tokens, stats.terms(), stats, widening);
  const flat = [...new Set(expanded.flat())];
  const again = await table.text.tokensOf(flat, field);
  const searchable = new Set(flat.filter((term, i) => again[i]?.length === 1 && again[i]?.[0] === term));
  const anyOf = expanded.map((terms) => terms.filter((term) => searchable.has(term)));
  if (operator === 'AND' && anyOf.some((terms) => terms.length === 0)) return undefined;
  const kept = anyOf.filter((terms) => terms.length > 0);
  if (kept.length === 0 && query.phrases.length === 0) return undefined;
  return { words: '', phrases: query.phrases, anyOf: kept };
}
