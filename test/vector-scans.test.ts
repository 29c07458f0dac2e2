import fc from 'fast-check';
import { afterAll, describe, expect, test } from 'vitest';
import { FreshGone, FreshRows } from '../src/engine/fresh/rows.js';
import { VectorScanThread } from '../src/engine/fresh/vector-scans.js';
import { FreshVectors } from '../src/engine/fresh/vectors.js';
import type { Metric } from '../src/engine/indexes/registry.js';

// The node's vector scan thread (the build's worker module): matrices held and scanned there answer as the same
// matrices scanned on the calling thread, and a thread that is gone lets go of the fresh rows it served.

const thread = new VectorScanThread();
afterAll(() => thread.close());

describe('the vector scan thread', () => {
  test('rows added, removed (packing the matrix) and searched there answer as they do here', () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('add' as const),
        key: fc.integer({ min: 1, max: 3000 }),
        rows: fc.integer({ min: 1, max: 400 }),
        x: fc.integer({ min: -50, max: 50 }),
      }),
      fc.record({ kind: fc.constant('remove' as const), from: fc.integer({ min: 1, max: 3000 }), span: fc.nat(1500) }),
      fc.record({
        kind: fc.constant('search' as const),
        x: fc.integer({ min: -60, max: 60 }),
        k: fc.integer({ min: 1, max: 30 }),
      }),
    );
    return fc.assert(
      fc.asyncProperty(
        fc.constantFrom<Metric>('l2sq', 'cosine', 'negdot'),
        fc.array(op, { minLength: 10, maxLength: 40 }),
        async (metric, ops) => {
          const dim = 8;
          const there = new FreshVectors(dim, metric, (d) => thread.matrix(d));
          const here = new FreshVectors(dim, metric);
          const held = new Set<bigint>();
          const same = async (x: number, k: number) => {
            const query = Float32Array.from({ length: dim }, (_, d) => x - d);
            const all = () => true;
            expect(await there.search(query, k, all)).toEqual(await here.search(query, k, all));
          };
          try {
            for (const o of ops) {
              if (o.kind === 'add') {
                for (let i = 0; i < o.rows; i++) {
                  const key = BigInt(o.key * 1000 + i);
                  if (held.has(key)) continue;
                  held.add(key);
                  const vector = Float32Array.from({ length: dim }, (_, d) => o.x + ((i * (d + 1)) % 7) - d);
                  there.add(key, vector);
                  here.add(key, vector);
                }
              } else if (o.kind === 'remove') {
                const start = o.from % (held.size + 1);
                for (const key of [...held].slice(start, start + o.span)) {
                  held.delete(key);
                  there.remove(key);
                  here.remove(key);
                }
              } else await same(o.x, o.k);
            }
            await same(0, 10);
          } finally {
            there.close();
            here.close();
          }
        },
      ),
      { numRuns: 25 },
    );
  });

  test("once the thread is gone, a search of the fresh vectors lets go of them and reads Lance's way", async () => {
    const lost = new VectorScanThread();
    const fresh = new FreshRows(
      { fts: [], vector: [{ column: 'emb', metric: 'l2sq', dim: 2 }] },
      true,
      async (texts) => texts.map(() => []),
      undefined,
      (dim) => lost.matrix(dim),
    );
    fresh.folded(0);
    fresh.committed(1, [], [1n, 2n], {
      texts: new Map(),
      vectors: new Map([['emb', [Float32Array.from([1, 0]), Float32Array.from([0, 1])]]]),
      rows: [],
    });
    const read = fresh.begin('vector');
    if (read === undefined) throw new Error('not usable');
    expect((await fresh.searchVector(read, 'emb', Float32Array.from([1, 0]), 1)).keys).toEqual([1n]);
    fresh.end(read);

    await lost.close();
    const after = fresh.begin('vector');
    if (after === undefined) throw new Error('not usable');
    await expect(fresh.searchVector(after, 'emb', Float32Array.from([1, 0]), 1)).rejects.toBeInstanceOf(FreshGone);
    fresh.end(after);
    expect(fresh.overflowed).toBe(true);
    expect(fresh.usable('vector')).toBe(false);
  });
});
