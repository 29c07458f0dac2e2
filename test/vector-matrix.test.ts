import fc from 'fast-check';
import { MetricKind } from 'usearch';
import { describe, expect, test } from 'vitest';
import { QUANTIZED_FROM_FLOATS, VectorMatrix } from '../src/engine/fresh/vector-matrix.js';

// The fresh vectors' matrix on the calling thread: the exact f32 scan of small matrices, and the 8-bit first pass
// of large ones (past QUANTIZED_FROM_FLOATS) whose candidates are measured again in f32.

/** Rows near a few centres, as embeddings cluster: the 8-bit pass has near ties to get wrong. */
function clustered(rows: number, dim: number, seed: number): Float32Array {
  // mulberry32: a full period in 32-bit integer steps.
  let state = seed >>> 0;
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5;
  };
  const centres = Array.from({ length: 16 }, () => Float32Array.from({ length: dim }, random));
  const data = new Float32Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    const centre = centres[r % centres.length] as Float32Array;
    for (let d = 0; d < dim; d++) data[r * dim + d] = (centre[d] as number) + 0.3 * random();
  }
  return data;
}

/** The exact nearest `k` slots, by brute force in f32 through a matrix too small to be quantized. */
function exact(data: Float32Array, dim: number, query: Float32Array, k: number, kind: MetricKind): number[] {
  const slots: number[] = [];
  const chunk = Math.floor((QUANTIZED_FROM_FLOATS - 1) / dim);
  const best: { slot: number; distance: number }[] = [];
  for (let from = 0; from < data.length / dim; from += chunk) {
    const part = data.subarray(from * dim, Math.min(data.length, (from + chunk) * dim));
    const small = new VectorMatrix(dim, kind);
    small.write(0, part);
    const rows = part.length / dim;
    const scan = small.scan(rows, query, Math.min(k, rows));
    scan.slots.forEach((slot, i) => {
      best.push({ slot: from + slot, distance: scan.distances[i] as number });
    });
  }
  best.sort((a, b) => a.distance - b.distance || a.slot - b.slot);
  for (const { slot } of best.slice(0, k)) slots.push(slot);
  return slots;
}

describe('VectorMatrix', () => {
  /** The share of the exact nearest 10 a matrix of `data` finds, over 20 queries. */
  const recall = (
    matrix: VectorMatrix,
    data: Float32Array,
    dim: number,
    kind: MetricKind,
    rows = data.length / dim,
  ) => {
    let hits = 0;
    for (let q = 0; q < 20; q++) {
      const query = clustered(1, dim, 1000 + q);
      const want = exact(data.subarray(0, rows * dim), dim, query, 10, kind);
      const got = matrix.scan(rows, query, 10);
      expect(got.slots).toHaveLength(10);
      hits += got.slots.filter((slot) => want.includes(slot)).length;
    }
    return hits / 200;
  };
  const kinds = [MetricKind.Cos, MetricKind.L2sq, MetricKind.IP];

  test('past the 8-bit threshold, every metric finds the exact nearest 10 (recall over 20 queries)', () => {
    const dim = 128;
    const rows = Math.ceil((2 * QUANTIZED_FROM_FLOATS) / dim);
    const data = clustered(rows, dim, 7);
    for (const kind of kinds) {
      const matrix = new VectorMatrix(dim, kind);
      // Written in batches, as commits arrive: the shared scale grows with them.
      for (let at = 0; at < rows; at += 5000) {
        matrix.write(at, data.subarray(at * dim, Math.min(rows, at + 5000) * dim));
      }
      expect(recall(matrix, data, dim, kind), kind).toBeGreaterThanOrEqual(0.99);
    }
  });

  test('one row far larger than the rest does not wreck the others, nor does it once it is packed away', () => {
    const dim = 128;
    const rows = Math.ceil(QUANTIZED_FROM_FLOATS / dim) + 2000;
    const data = clustered(rows, dim, 11);
    for (let d = 0; d < dim; d++) data[d] = 1000 * (data[d] as number);
    for (const kind of kinds) {
      const matrix = new VectorMatrix(dim, kind);
      matrix.write(0, data);
      expect(recall(matrix, data, dim, kind), kind).toBeGreaterThanOrEqual(0.99);
      const keep = Array.from({ length: rows - 1 }, (_, i) => i + 1);
      matrix.pack(keep);
      const kept = data.slice(dim);
      expect(recall(matrix, kept, dim, kind), `${kind} packed`).toBeGreaterThanOrEqual(0.99);
    }
  });

  test('a row written with a larger magnitude than any before re-scales the codes: each row still finds itself', () => {
    const dim = 64;
    const rows = Math.ceil(QUANTIZED_FROM_FLOATS / dim) + 10;
    const data = clustered(rows, dim, 3);
    const matrix = new VectorMatrix(dim, MetricKind.L2sq);
    matrix.write(0, data.subarray(0, (rows - 1) * dim));
    const loud = Float32Array.from({ length: dim }, (_, d) => (d % 2 === 0 ? 2 : -2));
    matrix.write(rows - 1, loud);
    data.set(loud, (rows - 1) * dim);
    for (const slot of [0, 17, rows - 2, rows - 1]) {
      const query = data.slice(slot * dim, (slot + 1) * dim);
      expect(matrix.scan(rows, query, 1).slots).toEqual([slot]);
    }
  });

  test('a pack keeps the named rows in their new order, above and below the threshold', () => {
    return fc.assert(
      fc.property(fc.boolean(), fc.integer({ min: 1, max: 50 }), (large, seed) => {
        const dim = 32;
        const rows = large ? Math.ceil(QUANTIZED_FROM_FLOATS / dim) + 100 : 300;
        const data = clustered(rows, dim, seed);
        const matrix = new VectorMatrix(dim, MetricKind.L2sq);
        matrix.write(0, data);
        const keep = Array.from({ length: rows }, (_, i) => i).filter((i) => (i + seed) % 3 !== 0);
        matrix.pack(keep);
        for (const at of [0, Math.floor(keep.length / 2), keep.length - 1]) {
          const slot = keep[at] as number;
          const query = data.slice(slot * dim, (slot + 1) * dim);
          expect(matrix.scan(keep.length, query, 1).slots).toEqual([at]);
        }
      }),
      { numRuns: 6 },
    );
  });
});
