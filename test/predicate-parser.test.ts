import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Table } from '@lancedb/lancedb';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { canonicalPredicate } from '../src/engine/predicate/parser.js';
import { BadRequest } from '../src/errors.js';

const COLUMNS = [
  new arrow.Field('id', new arrow.Int64()),
  new arrow.Field('title', new arrow.Utf8()),
  new arrow.Field('price', new arrow.Float64()),
  new arrow.Field('flag', new arrow.Bool()),
];

const column = fc.constantFrom('id', 'ID', '`id`', 'title', '`title`', 'Price', 'price', 'flag');
const number = fc.oneof(
  fc.integer({ min: -1000, max: 1000 }).map(String),
  fc.constantFrom('0.5', '1e3', '2.25', '9223372036854775807', '-9223372036854775808'),
);
const text = fc.constantFrom("'a'", "'it''s'", "''", "'item 3'", "'%3'", "'LIMIT 1'", "'; DROP'");
const numeric = fc.oneof(
  number,
  fc.constantFrom('id', '`id`', 'price', 'abs(id)', 'CAST(price AS BIGINT)', 'id::DOUBLE', '(id + 1)', 'id * 2 - 1'),
);

/** Boolean expressions in the dialect Lance reads, as a client may write them. */
const predicate: fc.Arbitrary<string> = fc.letrec<{ p: string }>((tie) => ({
  p: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc
      .tuple(numeric, fc.constantFrom('=', '==', '!=', '<>', '<', '<=', '>', '>='), numeric)
      .map(([a, op, b]) => `${a} ${op} ${b}`),
    fc.tuple(fc.constantFrom('title', 'lower(title)'), fc.constantFrom('=', '!='), text).map((p) => p.join(' ')),
    fc.tuple(column, fc.constantFrom('IS NULL', 'IS NOT NULL')).map((p) => p.join(' ')),
    fc.tuple(fc.constantFrom('title LIKE', 'title NOT LIKE', 'title ILIKE'), text).map((p) => p.join(' ')),
    fc
      .tuple(fc.constantFrom('id IN', 'id NOT IN'), fc.array(number, { minLength: 1, maxLength: 4 }))
      .map(([lhs, items]) => `${lhs} (${items.join(', ')})`),
    fc
      .tuple(numeric, fc.constantFrom('BETWEEN', 'NOT BETWEEN'), number, number)
      .map(([a, b, lo, hi]) => `${a} ${b} ${lo} AND ${hi}`),
    fc.constantFrom('true', 'false', 'flag', 'flag = true', 'flag IS TRUE', 'flag IS NOT FALSE'),
    tie('p').map((p) => `NOT ${p}`),
    tie('p').map((p) => `(${p})`),
    fc.tuple(tie('p'), fc.constantFrom('AND', 'OR'), tie('p')).map((p) => p.join(' ')),
  ),
})).p;

describe('the predicate grammar', () => {
  test('writing a predicate back is a fixed point: the canonical form reads as itself', () => {
    fc.assert(
      fc.property(predicate, (p) => {
        const once = canonicalPredicate(p, COLUMNS);
        expect(canonicalPredicate(once, COLUMNS)).toBe(once);
      }),
      { numRuns: 500 },
    );
  });

  test('anything after the expression is refused, whatever the expression', () => {
    const tail = fc.constantFrom(
      ' LIMIT 1',
      ' ORDER BY id',
      ' OFFSET 2',
      ' GROUP BY id',
      ' HAVING true',
      ' QUALIFY true',
      ' WINDOW w AS ()',
      ' FETCH FIRST 1 ROWS ONLY',
      ' UNION SELECT 1',
      '; DROP TABLE t',
      ' -- c',
      ' /* c */',
      ' id',
      ' 1',
      ')',
    );
    fc.assert(
      fc.property(predicate, tail, (p, t) => {
        expect(() => canonicalPredicate(p + t, COLUMNS)).toThrow(BadRequest);
      }),
      { numRuns: 300 },
    );
  });

  test('any text at all is either a predicate or a 400, never another error', () => {
    const pieces = fc.constantFrom(
      'id',
      '(',
      ')',
      '[',
      ']',
      ',',
      '.',
      "'",
      '`',
      '"',
      '$',
      '?',
      ':',
      '::',
      '-',
      'NOT',
      'AND',
      'IN',
      'IS',
      'NULL',
      'BETWEEN',
      'CAST',
      'AS',
      'lower',
      '1',
      "'x'",
      ' ',
      '=',
      '||',
      'X',
      'N',
      'DATE',
      'TIMESTAMP',
      '(SELECT',
    );
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ maxLength: 60 }),
          fc.array(pieces, { maxLength: 30 }).map((p) => p.join('')),
        ),
        (s) => {
          try {
            canonicalPredicate(s, COLUMNS);
          } catch (err) {
            expect(err).toBeInstanceOf(BadRequest);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  test('deep nesting is refused, not a stack overflow', () => {
    for (const p of ['('.repeat(100_000), 'NOT '.repeat(100_000), '-'.repeat(100_000), `${'['.repeat(5000)}`]) {
      expect(() => canonicalPredicate(p, COLUMNS)).toThrow(BadRequest);
    }
  });
});

describe('the canonical form means what the predicate meant', () => {
  const dir = mkdtempSync(join(tmpdir(), 'strata-predicate-'));
  let table: Table;
  beforeAll(async () => {
    const db = await connect(dir);
    table = await db.createTable(
      't',
      Array.from({ length: 40 }, (_, i) => ({
        id: i - 20,
        title: i % 7 === 0 ? "it's" : `item ${i}`,
        price: i / 4,
        flag: i % 3 === 0,
      })),
    );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('at the depth limit, every shape of nesting is still planned by Lance', async () => {
    const shapes: Record<string, (n: number) => string> = {
      not: (n) => `${'NOT '.repeat(n)}id = 1`,
      calls: (n) => `${'abs('.repeat(n)}id${')'.repeat(n)} = 1`,
      minus: (n) => `${'-('.repeat(n)}id${')'.repeat(n)} = 1`,
      'and/or': (n) => {
        let p = 'id = 0';
        for (let i = 0; i < n; i++) p = `(id = ${i} ${i % 2 ? 'OR' : 'AND'} ${p})`;
        return p;
      },
      arithmetic: (n) => {
        let p = 'id';
        for (let i = 0; i < n; i++) p = `(1 ${i % 2 ? '+' : '*'} ${p})`;
        return `${p} > 0`;
      },
      comparisons: (n) => {
        let p = 'flag';
        for (let i = 0; i < n; i++) p = `(true = ${p})`;
        return p;
      },
      casts: (n) => `${'CAST('.repeat(n)}id${' AS BIGINT)'.repeat(n)} = 1`,
    };
    for (const [shape, make] of Object.entries(shapes)) {
      let deepest = '';
      for (let n = 1; n < 40; n++) {
        try {
          deepest = canonicalPredicate(make(n), COLUMNS);
        } catch (err) {
          expect(err).toBeInstanceOf(BadRequest);
          expect((err as Error).message).toMatch(
            /nests \d+ levels deep once its operators are grouped; the limit is 16/,
          );
          break;
        }
      }
      expect([shape, typeof (await table.countRows(deepest))]).toEqual([shape, 'number']);
    }
  });

  test('a long chain of OR is one level, however long', async () => {
    const p = Array.from({ length: 300 }, (_, i) => `id = ${i - 20}`).join(' OR ');
    expect(await table.countRows(canonicalPredicate(p, COLUMNS))).toBe(40);
  });

  test('Lance counts the same rows for a predicate and its canonical form', async () => {
    let compared = 0;
    await fc.assert(
      fc.asyncProperty(predicate, async (p) => {
        let original: number | string;
        try {
          original = await table.countRows(p);
        } catch {
          // Lance refused the text as written (a case it reads differently, say): nothing to compare.
          return;
        }
        expect(await table.countRows(canonicalPredicate(p, COLUMNS))).toBe(original);
        compared++;
      }),
      { numRuns: 150 },
    );
    expect(compared).toBeGreaterThan(100);
  });
});
