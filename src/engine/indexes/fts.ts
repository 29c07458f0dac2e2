import type { Field } from 'apache-arrow';
import { BadRequest } from '../../errors.js';
import { describeField, isTextType } from '../tables/schema.js';
import type { IndexKind } from './kind.js';

/** The languages Lance's tokenizer stems and has stop words for (an unknown one aborts its process: never pass one). */
export const LANGUAGES = [
  'arabic',
  'danish',
  'dutch',
  'english',
  'finnish',
  'french',
  'german',
  'greek',
  'hungarian',
  'italian',
  'norwegian',
  'portuguese',
  'romanian',
  'russian',
  'spanish',
  'swedish',
  'tamil',
  'turkish',
] as const;
export type Language = (typeof LANGUAGES)[number];

/** How an analyzer splits text into words: on what is not a letter or digit, or by Unicode word rules (ICU). */
export const TOKENIZERS = ['simple', 'icu'] as const;
export type Tokenizer = (typeof TOKENIZERS)[number];

/** An analyzer spelled out (docs/api.md, analyzers): the object form, every member given in canonical form. */
export interface AnalyzerSettings {
  tokenizer: Tokenizer;
  lowercase: boolean;
  ascii_folding: boolean;
  /** The language whose stemmer reduces each word to its stem, or none. */
  stem: Language | null;
  /** The language whose common words are dropped, or none. */
  stop_words: Language | null;
}

/** An analyzer by name (`ascii_lower`, `standard`, or a language: stemmed, with its stop words) or spelled out. */
export type Analyzer = 'ascii_lower' | 'standard' | Language | AnalyzerSettings;
const NAMED = ['ascii_lower', 'standard', ...LANGUAGES] as const;

/** What each analyzer does, spelled out. */
export function settingsOf(analyzer: Analyzer): AnalyzerSettings {
  if (typeof analyzer !== 'string') return analyzer;
  if (analyzer === 'ascii_lower') {
    return { tokenizer: 'simple', lowercase: true, ascii_folding: true, stem: null, stop_words: null };
  }
  if (analyzer === 'standard') {
    return { tokenizer: 'icu', lowercase: true, ascii_folding: false, stem: null, stop_words: null };
  }
  return { tokenizer: 'simple', lowercase: true, ascii_folding: false, stem: analyzer, stop_words: analyzer };
}

/** A full-text (BM25) index: the text leg, `count` and `token_match` read a column through it. */
export interface FtsIndex {
  column: string;
  analyzer: Analyzer;
  /** Whether it keeps each token's position, which phrases in a query need; absent when it does not. */
  positions?: true;
}

/** The object form of an analyzer as a create_table body gives it: members left out take their defaults. */
interface AnalyzerInput {
  tokenizer?: string | null;
  lowercase?: boolean | null;
  ascii_folding?: boolean | null;
  stem?: string | null;
  stop_words?: string | null;
}

type FtsEntry = string | { column: string; analyzer?: string | AnalyzerInput | null; positions?: boolean | null };

/** A language named in an analyzer's object form, checked (case-insensitive). */
function languageOf(value: string | null | undefined, where: string): Language | null {
  if (value === undefined || value === null) return null;
  const language = value.toLowerCase();
  if (!(LANGUAGES as readonly string[]).includes(language)) {
    throw new BadRequest(`${where} "${value}" is not one of ${LANGUAGES.join(', ')}`);
  }
  return language as Language;
}

/** An analyzer as declared → its canonical form: a name, or every member of the object form. */
function analyzerOf(input: string | AnalyzerInput | null | undefined, where: string): Analyzer {
  if (input === undefined || input === null) return 'ascii_lower';
  if (typeof input === 'string') {
    const name = input.toLowerCase();
    if (!(NAMED as readonly string[]).includes(name)) {
      throw new BadRequest(`${where} "${input}" is not one of ${NAMED.join(', ')}`);
    }
    return name as Analyzer;
  }
  const tokenizer = (input.tokenizer ?? 'simple').toLowerCase();
  if (!(TOKENIZERS as readonly string[]).includes(tokenizer)) {
    throw new BadRequest(`${where}.tokenizer "${input.tokenizer}" is not one of ${TOKENIZERS.join(', ')}`);
  }
  const stem = languageOf(input.stem, `${where}.stem`);
  const stopWords = languageOf(input.stop_words, `${where}.stop_words`);
  // Lance takes one language for both.
  if (stem !== null && stopWords !== null && stem !== stopWords) {
    throw new BadRequest(`${where}: stem and stop_words must name the same language ("${stem}", "${stopWords}")`);
  }
  return {
    tokenizer: tokenizer as Tokenizer,
    lowercase: input.lowercase ?? true,
    ascii_folding: input.ascii_folding ?? false,
    stem,
    stop_words: stopWords,
  };
}

export const ftsKind: IndexKind<FtsEntry, FtsIndex, { kind: 'fts'; analyzer: Analyzer; positions?: true }> = {
  columnOf: (entry) => (typeof entry === 'string' ? entry : entry.column),
  declare(entry, field: Field | undefined, where) {
    const column = ftsKind.columnOf(entry);
    if (field === undefined) throw new BadRequest(`${where}: column "${column}" is not in the schema`);
    if (!isTextType(field.type)) {
      throw new BadRequest(
        `${where}: column "${column}" is ${describeField(field).type}; full-text indexes need utf8 or large_utf8`,
      );
    }
    const analyzer = analyzerOf(typeof entry === 'string' ? undefined : entry.analyzer, `${where}.analyzer`);
    return typeof entry !== 'string' && entry.positions === true
      ? { column, analyzer, positions: true }
      : { column, analyzer };
  },
  shown: (declared) => ({
    kind: 'fts',
    analyzer: declared.analyzer,
    ...(declared.positions ? { positions: true } : {}),
  }),
  noun: 'full-text index',
  stored: (declared) => ({
    type: 'text',
    column: declared.column,
    analyzer: declared.analyzer,
    ...(declared.positions === true ? { positions: true } : {}),
  }),
  upkeep: 'fold',
};

/** A full-text column a text leg reads, and the weight of its scores in the leg's. */
export interface TextField {
  field: string;
  boost: number;
}

/**
 * The columns a text leg (or `count`, `token_match`) reads: `one` (`text_field`, `field_name`) or `several`
 * (`text_fields`), exactly one of them, each checked by `ftsColumn` and named once.
 */
export function textFieldsOf(
  table: { schema: { fields: readonly Field[] }; indexes: { fts: readonly FtsIndex[] } },
  one: { name: string; value: string | undefined },
  several: readonly { field: string; boost?: number }[] | undefined,
): TextField[] {
  if (several === undefined) return [{ field: ftsColumn(table, one.value, one.name), boost: 1 }];
  if (one.value !== undefined) throw new BadRequest(`send one of ${one.name} and text_fields, not both`);
  const seen = new Set<string>();
  return several.map((entry, i) => {
    const field = ftsColumn(table, entry.field, `text_fields[${i}].field`);
    if (seen.has(field)) throw new BadRequest(`text_fields[${i}]: column "${field}" is listed twice`);
    seen.add(field);
    return { field, boost: entry.boost ?? 1 };
  });
}

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
