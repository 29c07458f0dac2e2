import { exactSearch, MetricKind } from 'usearch';
import type { Metric } from '../indexes/registry.js';

/** The usearch metric of each of the API's, and its distance in the API's form (docs/api.md, Vector indexes). */
const SEARCHED: Readonly<Record<Metric, { kind: MetricKind; canonical: (d: number) => number }>> = {
  cosine: { kind: MetricKind.Cos, canonical: (d) => d },
  l2sq: { kind: MetricKind.L2sq, canonical: (d) => d },
  // usearch's inner-product distance is 1 − x·y.
  negdot: { kind: MetricKind.IP, canonical: (d) => d - 1 },
};

/** Slots the first growth makes room for. */
const FIRST_SLOTS = 1024;

/**
 * One vector column of the fresh rows, laid out as one matrix that usearch scans exactly with SIMD: ~0.4 ms for
 * 20k × 64 and ~6.6 ms for 100k × 384 on one core here, against 1.5 and 37 ms for the same loop in JavaScript.
 * The scan runs on the event loop: the budget (`STRATA_FRESH_TIER_MB`) bounds how long one can take. A removed row
 * leaves its slot empty until empty slots outnumber the held ones; the matrix is then packed.
 */
export class FreshVectors {
  private data: Float32Array;
  /** The key in each slot; undefined once its row left. */
  private keys: (bigint | undefined)[] = [];
  private readonly slotOf = new Map<bigint, number>();

  constructor(
    private readonly dim: number,
    private readonly metric: Metric,
  ) {
    this.data = new Float32Array(0);
  }

  get size(): number {
    return this.slotOf.size;
  }

  /**
   * Holds `vector` for `key` (the key must not be held). A null vector, or under cosine one with no direction,
   * is never a hit of a vector leg, and is not held.
   */
  add(key: bigint, vector: Float32Array | null): void {
    if (vector === null || vector.length !== this.dim) return;
    if (this.metric === 'cosine' && !vector.some((x) => x !== 0)) return;
    const slot = this.keys.length;
    if ((slot + 1) * this.dim > this.data.length) this.grow(Math.max(FIRST_SLOTS, 2 * this.keys.length));
    this.data.set(vector, slot * this.dim);
    this.keys.push(key);
    this.slotOf.set(key, slot);
  }

  remove(key: bigint): void {
    const slot = this.slotOf.get(key);
    if (slot === undefined) return;
    this.slotOf.delete(key);
    this.keys[slot] = undefined;
    if (this.keys.length - this.slotOf.size > Math.max(FIRST_SLOTS, this.slotOf.size)) this.pack();
  }

  /**
   * The held rows nearest `query` among those `eligible` admits: the best `limit`, and every row tied with the
   * last of them, nearest first (ties by key).
   */
  search(query: Float32Array, limit: number, eligible: (key: bigint) => boolean): { keys: bigint[]; values: number[] } {
    const slots = this.keys.length;
    if (slots === 0 || limit <= 0) return { keys: [], values: [] };
    const { kind, canonical } = SEARCHED[this.metric];
    // Empty and ineligible slots take places among the nearest: ask for more until `limit` rows and their ties
    // are in hand, or every slot was ranked. usearch answers nearest first, so the walk stops past the edge.
    for (let count = Math.min(slots, limit + (slots - this.slotOf.size) + 1); ; count = Math.min(slots, 2 * count)) {
      const matches = exactSearch(this.data.subarray(0, slots * this.dim), query, this.dim, count, kind, 1);
      const found: { key: bigint; value: number }[] = [];
      let edge: number | undefined;
      let past = false;
      for (let i = 0; i < matches.keys.length; i++) {
        const distance = matches.distances[i] as number;
        if (edge !== undefined && distance > edge) {
          past = true;
          break;
        }
        const key = this.keys[Number(matches.keys[i])];
        if (key === undefined || !eligible(key)) continue;
        found.push({ key, value: canonical(distance) });
        if (found.length === limit) edge = distance;
      }
      if (past || count >= slots) {
        found.sort((x, y) => x.value - y.value || (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
        return { keys: found.map((f) => f.key), values: found.map((f) => f.value) };
      }
    }
  }

  private grow(slots: number): void {
    const data = new Float32Array(slots * this.dim);
    data.set(this.data.subarray(0, this.keys.length * this.dim));
    this.data = data;
  }

  /** Moves the held rows to the first slots, and lets go of room past twice them. */
  private pack(): void {
    const keys: bigint[] = [];
    const data = new Float32Array(Math.max(FIRST_SLOTS, 2 * this.slotOf.size) * this.dim);
    this.keys.forEach((key, slot) => {
      if (key === undefined) return;
      data.set(this.data.subarray(slot * this.dim, (slot + 1) * this.dim), keys.length * this.dim);
      this.slotOf.set(key, keys.length);
      keys.push(key);
    });
    this.data = data;
    this.keys = keys;
  }
}
