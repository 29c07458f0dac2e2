import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Table } from '@lancedb/lancedb';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { ftsIndex } from '../src/engine/lance/indexes.js';
import { analyzableHere, analyze } from '../src/engine/text/analyzer.js';
import { tokenizeMany } from '../src/engine/text/tokenize-many.js';

// The service's own tokenizer against Lance's, on random text: BM25's statistics and term frequencies are only
// exact if both make the same tokens of every text.

let dir: string;
let table: Table;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'strata-analyzer-'));
  const db = await connect(dir);
  const text = (v: string[]) => arrow.vectorFromArray(v, new arrow.Utf8());
  table = await db.createTable('t', new arrow.Table({ ascii_lower: text(['x']), standard: text(['x']) }));
  for (const analyzer of ['ascii_lower', 'standard'] as const) {
    await table.createIndex(analyzer, { config: ftsIndex(analyzer) });
  }
});

afterAll(() => {
  table.close();
  rmSync(dir, { recursive: true, force: true });
});

const lance = async (text: string, analyzer: 'ascii_lower' | 'standard') =>
  (await table.tokenize(text, { column: analyzer })).map((t) => t.text);

/** Each token with its position, as Lance gives them and as `analyze` does: a token dropped for its length keeps its place. */
const lancePositioned = async (text: string, analyzer: 'ascii_lower' | 'standard') =>
  (await table.tokenize(text, { column: analyzer })).map((t) => [t.text, t.position] as const);
const positioned = (text: string, analyzer: 'ascii_lower' | 'standard') => {
  const positions: number[] = [];
  return analyze(text, analyzer, positions)?.map((token, i) => [token, positions[i]] as const);
};

/** Characters that tokenizers treat differently: ASCII, accents, ligatures, Greek, Cyrillic, marks, symbols, emoji. */
const PIECES = [
  'a',
  'Z',
  '7',
  ' ',
  ',',
  '.',
  "'",
  '-',
  '_',
  '@',
  '/',
  '\n',
  'é',
  'Ä',
  'ß',
  'Æ',
  'ø',
  'ﬁ',
  'Ω',
  'Σ',
  'ς',
  'Ж',
  'İ',
  'ı',
  '①',
  '½',
  '™',
  '\u0301',
  '\u200b',
  '😀',
  '𝐀',
  '٣',
  'ǅ',
  'ŉ',
  'x'.repeat(130),
  'é'.repeat(64),
];
const text = fc.array(fc.constantFrom(...PIECES), { maxLength: 40 }).map((parts) => parts.join(''));

describe('the analyzers make the tokens Lance makes', () => {
  test('ascii_lower, on any text', async () => {
    await fc.assert(
      fc.asyncProperty(text, async (s) => {
        expect(positioned(s, 'ascii_lower')).toEqual(await lancePositioned(s, 'ascii_lower'));
      }),
      { numRuns: 300 },
    );
  });

  test('standard, on any text it does not leave to Lance', async () => {
    await fc.assert(
      fc.asyncProperty(text, async (s) => {
        // Texts the service leaves to Lance (a mark after a space here) have no tokens of its own.
        if (!analyzableHere(s, 'standard')) expect(analyze(s, 'standard')).toBeUndefined();
        else expect(positioned(s, 'standard')).toEqual(await lancePositioned(s, 'standard'));
      }),
      { numRuns: 300 },
    );
  });

  test('a token dropped for its length keeps its place after the first kept token, and takes none before it', async () => {
    const long = 'x'.repeat(300);
    for (const s of [`red ${long} kettle`, `${long} ${long} a c`, `b ${long} ${long} a`, `${'é'.repeat(130)} z`]) {
      for (const analyzer of ['ascii_lower', 'standard'] as const) {
        expect(positioned(s, analyzer)).toEqual(await lancePositioned(s, analyzer));
      }
    }
    expect(positioned(`red ${long} kettle`, 'standard')).toEqual([
      ['red', 0],
      ['kettle', 2],
    ]);
  });

  test('sentences people write', async () => {
    const sentences = [
      'Hello, WORLD-wide web_2 3.14 e-mail foo@bar.com',
      "don't can't l'été — naïve café, Ünïcödé",
      'ΣΊΣΥΦΟΣ and İstanbul; Straße, Æsir, ﬁnance',
      'a.b.c 1,000,000 $100 #tag @user x_y z-w',
    ];
    for (const s of sentences) {
      for (const analyzer of ['ascii_lower', 'standard'] as const)
        expect(analyze(s, analyzer)).toEqual(await lance(s, analyzer));
    }
  });

  test('texts in scripts segmented by dictionary are left to Lance under standard', () => {
    expect(analyzableHere('東京都に住んでいます', 'standard')).toBe(false);
    expect(analyze('東京都に住んでいます', 'standard')).toBeUndefined();
    expect(analyze('東京都', 'ascii_lower')).toEqual(['東京都']);
  });
});

describe('the documented tokens of each analyzer (docs/api.md, analyzers)', () => {
  const SAMPLE = 'The Runners were running past Café viewers in São Paulo';
  test.each([
    ['ascii_lower', ['the', 'runners', 'were', 'running', 'past', 'cafe', 'viewers', 'in', 'sao', 'paulo']],
    ['standard', ['the', 'runners', 'were', 'running', 'past', 'café', 'viewers', 'in', 'são', 'paulo']],
    ['english', ['runner', 'run', 'past', 'café', 'viewer', 'são', 'paulo']],
    ['french', ['the', 'runner', 'wer', 'running', 'past', 'caf', 'viewer', 'in', 'são', 'paulo']],
    [
      { tokenizer: 'simple', lowercase: true, ascii_folding: true, stem: 'english', stop_words: null },
      ['the', 'runner', 'were', 'run', 'past', 'cafe', 'viewer', 'in', 'sao', 'paulo'],
    ],
  ] as const)('%j', async (analyzer, tokens) => {
    const db = await connect(dir);
    const own = await db.createTable(`doc_${Math.random().toString(36).slice(2)}`, [{ body: 'x' }]);
    try {
      await own.createIndex('body', { config: ftsIndex(analyzer) });
      expect((await own.tokenize(SAMPLE, { column: 'body' })).map((t) => t.text)).toEqual(tokens);
      // Stemmed analyzers are Lance's alone: the service asks it for their tokens.
      expect(analyze(SAMPLE, analyzer) === undefined).toBe(
        typeof analyzer !== 'string' || !['ascii_lower', 'standard'].includes(analyzer),
      );
    } finally {
      own.close();
      db.close();
    }
  });
});

describe('many texts tokenized in one call (tokenizeMany)', () => {
  const WORDS = [
    'The',
    'running',
    'foxes',
    'and',
    'of',
    'a',
    'Café',
    'viewers',
    '',
    ' ',
    ',',
    'it',
    'is',
    'x'.repeat(300),
  ];
  const sentence = fc.array(fc.constantFrom(...WORDS, ...PIECES), { maxLength: 12 }).map((parts) => parts.join(' '));

  test.each(['english', 'standard'] as const)(
    'give each text the tokens and positions it has alone (%s)',
    async (analyzer) => {
      const db = await connect(dir);
      const own = await db.createTable(`many_${analyzer}`, [{ body: 'x' }]);
      await own.createIndex('body', { config: ftsIndex(analyzer) });
      const one = async (t: string) =>
        (await own.tokenize(t, { column: 'body' })).map((x) => ({ text: x.text, position: x.position }));
      try {
        await fc.assert(
          fc.asyncProperty(fc.array(sentence, { maxLength: 30 }), async (texts) => {
            const many = await tokenizeMany(texts, one);
            const alone = await Promise.all(
              texts.map(async (t) => {
                const tokens = await one(t);
                return { tokens: tokens.map((x) => x.text), positions: tokens.map((x) => x.position) };
              }),
            );
            expect(many).toEqual(alone);
          }),
          { numRuns: 60 },
        );
      } finally {
        own.close();
        db.close();
      }
    },
  );
});
