import type { Field } from 'apache-arrow';
import { BadRequest } from '../../errors.js';
import { describeField, isTextType } from '../tables/schema.js';
import type { IndexKind } from './kind.js';

export type Analyzer = 'ascii_lower' | 'standard';
const ANALYZERS: readonly Analyzer[] = ['ascii_lower', 'standard'];

/** A full-text (BM25) index: the text leg, `count` and `token_match` read a column through it. */
export interface FtsIndex {
  column: string;
  analyzer: Analyzer;
}

type FtsEntry = string | { column: string; analyzer?: string };

export const ftsKind: IndexKind<FtsEntry, FtsIndex, { kind: 'fts'; analyzer: Analyzer }> = {
  columnOf: (entry) => (typeof entry === 'string' ? entry : entry.column),
  declare(entry, field: Field | undefined, where) {
    const column = ftsKind.columnOf(entry);
    const analyzer = typeof entry === 'string' ? 'ascii_lower' : (entry.analyzer ?? 'ascii_lower');
    if (field === undefined) throw new BadRequest(`${where}: column "${column}" is not in the schema`);
    if (!isTextType(field.type)) {
      throw new BadRequest(
        `${where}: column "${column}" is ${describeField(field).type}; full-text indexes need utf8 or large_utf8`,
      );
    }
    if (!(ANALYZERS as readonly string[]).includes(analyzer)) {
      throw new BadRequest(`${where}.analyzer "${analyzer}" is not one of ${ANALYZERS.join(', ')}`);
    }
    return { column, analyzer: analyzer as Analyzer };
  },
  shown: (declared) => ({ kind: 'fts', analyzer: declared.analyzer }),
  noun: 'full-text index',
  stored: (declared) => ({ type: 'text', column: declared.column, analyzer: declared.analyzer }),
  upkeep: 'fold',
};

/**
 * The column a text leg (or `count`, `token_match`) reads, checked: it exists and has a full-text index. `what`
 * names the request's field in a 400.
 */
export function ftsColumn(
  table: { schema: { fields: readonly Field[] }; indexes: { fts: readonly FtsIndex[] } },
  field: string | undefined,
  what: string,
): string {
  if (field === undefined) throw new BadRequest(`${what} is required`);
  if (!table.schema.fields.some((f) => f.name === field)) throw new BadRequest(`${what}: no column named "${field}"`);
  if (!table.indexes.fts.some((f) => f.column === field)) {
    throw new BadRequest(`${what}: column "${field}" has no full-text index`);
  }
  return field;
}
