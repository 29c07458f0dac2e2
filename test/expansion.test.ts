import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { expansionsOf, MAX_EXPANSIONS, withinEdits } from '../src/engine/text/expansion.js';

/** The widening of query words (prefix, fuzziness) against definitions written here. */

/** Levenshtein distance, the textbook way. */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i] as number[];
      const up = d[i - 1] as number[];
      row[j] = Math.min(
        (up[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (up[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

const word = fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'k', 'e', 't'), maxLength: 8 });

describe('widening', () => {
  test('withinEdits agrees with the Levenshtein distance (no transpositions)', () => {
    fc.assert(
      fc.property(word, word, fc.integer({ min: 0, max: 2 }), (a, b, max) => {
        expect(withinEdits(a, b, max)).toBe(distance(a, b) <= max);
      }),
      { numRuns: 2000 },
    );
    expect(withinEdits('kettel', 'kettle', 1)).toBe(false);
    expect(withinEdits('kettel', 'kettle', 2)).toBe(true);
  });

  test('each token stands for its terms: itself and the near ones, the last also for those it begins', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(word, { maxLength: 40 }),
        fc.array(word, { minLength: 1, maxLength: 3 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 2 }),
        (terms, tokens, prefix, fuzziness) => {
          const docs = (term: string) => term.length;
          const got = expansionsOf(tokens, terms, { docsWith: docs }, { prefix, fuzziness });
          tokens.forEach((token, i) => {
            const wanted = terms.filter(
              (t) => distance(t, token) <= fuzziness || (prefix && i === tokens.length - 1 && t.startsWith(token)),
            );
            expect(new Set(got[i])).toEqual(new Set(wanted.length <= MAX_EXPANSIONS ? wanted : got[i]));
            expect(got[i]?.length).toBe(Math.min(wanted.length, MAX_EXPANSIONS));
          });
        },
      ),
      { numRuns: 500 },
    );
  });
});
