import fc from 'fast-check';
import { afterAll, describe, expect, test } from 'vitest';
import { FreshGone, FreshRows, type FreshWrite } from '../src/engine/fresh/rows.js';
import { VectorMatrix } from '../src/engine/fresh/vector-matrix.js';
import { VectorScanThread } from '../src/engine/fresh/vector-scans.js';
import { FreshVectors, type MatrixMaker } from '../src/engine/fresh/vectors.js';
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
          const there = new FreshVectors(dim, metric, (d, kind, lost) => thread.matrix(d, kind, lost));
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

  test("once the thread is gone, the tables it held vectors for let go of their fresh rows and read Lance's way", async () => {
    const lost = new VectorScanThread();
    const fresh = freshRows((dim, kind, gone) => lost.matrix(dim, kind, gone));
    fresh.committed(1, [], [1n, 2n], vectors([1, 0], [0, 1]));
    expect((await nearest(fresh, [1, 0], 1))?.keys).toEqual([1n]);

    await lost.close();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(fresh.overflowed).toBe(true);
    expect(fresh.usable('vector')).toBe(false);
  });

  test("a search whose scan is on the thread when the fresh rows are let go of reads Lance's way, not nothing", async () => {
    const fresh = freshRows(hooked);
    fresh.committed(1, [], [1n, 2n, 3n], vectors([0, 0], [1, 1], [2, 2]));
    whileScanning = () => fresh.overflow();
    await expect(nearest(fresh, [0, 0], 10)).rejects.toBeInstanceOf(FreshGone);
  });

  test('a row replaced while a scan is on the thread is found by that search (as it was, or as it is)', async () => {
    const fresh = freshRows(hooked);
    fresh.committed(1, [], [1n, 2n, 3n], vectors([0, 0], [1, 1], [2, 2]));
    whileScanning = () => fresh.committed(2, [1n], [1n], vectors([0.5, 0]));
    expect((await nearest(fresh, [0, 0], 10))?.keys).toContain(1n);
    expect((await nearest(fresh, [0, 0], 10))?.keys).toEqual([1n, 2n, 3n]);
  });

  test('a write committed after its table closed makes no matrix on the thread', async () => {
    let made = 0;
    const fresh = freshRows((dim, kind, gone) => {
      made++;
      return thread.matrix(dim, kind, gone);
    });
    fresh.dispose();
    fresh.committed(1, [], [1n], vectors([1, 1]));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(made).toBe(0);
  });
});

/** A matrix on the shared thread whose scans run `whileScanning` once, just after each is sent. */
let whileScanning: (() => void) | undefined;
const hooked: MatrixMaker = (dim, kind, lost) => {
  const matrix = thread.matrix(dim, kind, lost);
  return {
    write: (slot, rows) => matrix.write(slot, rows),
    pack: (keep) => matrix.pack(keep),
    close: () => matrix.close(),
    scan: (slots, query, count) => {
      const scanning = matrix.scan(slots, query, count);
      const during = whileScanning;
      whileScanning = undefined;
      during?.();
      return scanning;
    },
  };
};

/** Matrices on this thread that tell `scanning` how many slots each scan goes over. */
function watchedScans(scanning: (slots: number) => void): MatrixMaker {
  return (dim, kind) => {
    const matrix = new VectorMatrix(dim, kind);
    return {
      write: (slot, rows) => matrix.write(slot, rows),
      pack: (keep) => matrix.pack(keep),
      scan: (slots, query, count) => {
        scanning(slots);
        return matrix.scan(slots, query, count);
      },
      close: () => matrix.close(),
    };
  };
}

/** Fresh rows of one 2-d vector column (l2sq) whose matrices `matrices` makes, usable from version 0. */
function freshRows(matrices: MatrixMaker): FreshRows {
  const fresh = new FreshRows(
    { fts: [], vector: [{ column: 'emb', metric: 'l2sq', dim: 2 }] },
    true,
    async (texts) => texts.map(() => []),
    undefined,
    matrices,
  );
  fresh.folded(0);
  return fresh;
}

const vectors = (...rows: number[][]): FreshWrite => ({
  texts: new Map(),
  vectors: new Map([['emb', rows.map((v) => Float32Array.from(v))]]),
  rows: [],
});

async function nearest(fresh: FreshRows, query: number[], limit: number) {
  const read = fresh.begin('vector');
  if (read === undefined) throw new Error('not usable');
  try {
    return await fresh.searchVector(read, 'emb', Float32Array.from(query), limit);
  } finally {
    fresh.end(read);
  }
}

describe('a search where few held rows are eligible', () => {
  // Under ingest a node holds the rows a fold covered for key lookups, and only the newest are searched: sized by
  // the held rows, the first scan found too few eligible ones and the scan went round again, six times.
  test('sizes its first scan by the rows eligible, and answers as a scan of every slot does', async () => {
    let scans = 0;
    const vectors = new FreshVectors(
      8,
      'l2sq',
      watchedScans(() => scans++),
    );
    for (let key = 1; key <= 5000; key++) {
      vectors.add(
        BigInt(key),
        Float32Array.from({ length: 8 }, (_, i) => Math.sin(key * (i + 1))),
      );
    }
    const eligible = (key: bigint) => key > 4900n;
    const query = Float32Array.from({ length: 8 }, (_, i) => Math.cos(i));
    const sized = await vectors.search(query, 10, eligible, 100);
    expect(scans).toBe(1);
    scans = 0;
    const unsized = await vectors.search(query, 10, eligible);
    expect(scans).toBeGreaterThan(2);
    expect(sized).toEqual(unsized);
    expect(sized?.keys).toHaveLength(10);
    expect(sized?.keys.every(eligible)).toBe(true);
    // None eligible: no scan at all.
    scans = 0;
    expect(await vectors.search(query, 10, () => false, 0)).toEqual({ keys: [], values: [] });
    expect(scans).toBe(0);
  });
});

describe('rows the vector index covers', () => {
  // Held on for key lookups until the row key's index covers them too, their vectors were scanned by every search.
  test('leave the matrix once no search reads them, though the rows stay held for the other kinds', async () => {
    const scanned: number[] = [];
    const counting = watchedScans((slots) => scanned.push(slots));
    const fresh = new FreshRows(
      { fts: [], vector: [{ column: 'emb', metric: 'l2sq', dim: 2 }], keyed: true },
      true,
      async (texts) => texts.map(() => []),
      undefined,
      counting,
    );
    fresh.folded(0);
    const keys = (from: number, n: number) => Array.from({ length: n }, (_, i) => BigInt(from + i));
    const rows = (from: number, n: number) => vectors(...Array.from({ length: n }, (_, i) => [from + i, 0]));
    fresh.committed(1, [], keys(1, 3000), rows(1, 3000));
    fresh.committed(2, [], keys(5001, 100), rows(5001, 100));
    expect((await nearest(fresh, [0, 0], 3))?.keys).toEqual([1n, 2n, 3n]);
    // A search begun before the vector index's fold still reads every row.
    const before = fresh.begin('vector');
    if (before === undefined) throw new Error('not usable');
    fresh.folded(1, ['vector']);
    expect((await fresh.searchVector(before, 'emb', Float32Array.from([0, 0]), 2)).keys).toEqual([1n, 2n]);
    fresh.end(before);
    scanned.length = 0;
    expect((await nearest(fresh, [0, 0], 3))?.keys).toEqual([5001n, 5002n, 5003n]);
    // Their slots are packed away but for fewer empty ones than the matrix keeps before packing (1,024).
    expect(scanned.length).toBeGreaterThan(0);
    expect(Math.max(...scanned)).toBeLessThanOrEqual(100 + 1024);
    // The rows themselves are still held: the row key's index covers none of them yet.
    expect(fresh.size).toBe(3100);
    fresh.folded(2);
    expect(fresh.size).toBe(0);
  });
});
