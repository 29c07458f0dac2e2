import { BadRequest } from '../../errors.js';
import type { FtsIndex } from '../indexes/fts.js';
import type { TableHandle } from '../tables/tables.js';
import { hasTokens } from './request.js';

/** A text query as a user writes it: its words, and the phrases it holds in double quotes (docs/api.md, Phrases). */
export interface TextQuery {
  words: string;
  phrases: string[];
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
