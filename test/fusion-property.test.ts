import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { inReach, rankLeg } from '../src/engine/search/fusion.js';

// Few distinct values, so that ties at the edge are the rule, as they are for BM25 scores.
const hits = fc.array(fc.integer({ min: 0, max: 6 }), { maxLength: 60 });

describe('a leg ranks the same rows from the hits in reach as from all of them', () => {
  for (const better of ['higher', 'lower'] as const) {
    test(`${better} is better`, () => {
      fc.assert(
        fc.property(hits, fc.integer({ min: 1, max: 70 }), (values, ranked) => {
          // Row keys in some order other than the hits' own, as Lance's order is not row order.
          const keys = values.map((_, i) => BigInt((i * 37) % 101));
          const at = inReach(values, better, ranked);
          const fromAll = rankLeg(keys, values, better, ranked);
          const fromReach = rankLeg(
            at.map((i) => keys[i] as bigint),
            at.map((i) => values[i] as number),
            better,
            ranked,
          );
          expect(fromReach).toEqual(fromAll);
          expect(at.length).toBeGreaterThanOrEqual(Math.min(ranked, values.length));
        }),
      );
    });
  }
});
