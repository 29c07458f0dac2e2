import { MetricKind } from 'usearch';
import type { Metric } from '../indexes/registry.js';
import { type FreshMatrix, VectorMatrix } from './vector-matrix.js';

/** The usearch metric of each of the API's, and its distance in the API's form (docs/api.md, Vector indexes). */
const SEARCHED: Readonly<Record<Metric, { kind: MetricKind; canonical: (d: number) => number }>> = {
  cosine: { kind: MetricKind.Cos, canonical: (d) => d },
  l2sq: { kind: MetricKind.L2sq, canonical: (d) => d },
  // usearch's inner-product distance is 1 − x·y.
  negdot: { kind: MetricKind.IP, canonical: (d) => d - 1 },
};

/** Empty slots a matrix keeps before it is packed, at least. */
const PACK_FROM = 1024;

/**
 * Makes the matrix a column's rows are kept in: on the node's scan thread, or here (`VectorMatrix`). `lost` is
 * called if the matrix's rows are lost with its thread.
 */
export type MatrixMaker = (dim: number, kind: MetricKind, lost: () => void) => FreshMatrix;

/**
 * One vector column of the fresh rows: which row is in which slot of its matrix (`FreshMatrix`), which usearch
 * scans with SIMD: ~0.4 ms for 20k × 64 and ~6.6 ms for 100k × 384 in f32 on one core here, against 1.5 and 37
 * ms for the same loop in JavaScript. A removed row leaves its slot empty until empty slots outnumber the held
 * ones; the matrix is then packed.
 */
export class FreshVectors {
  private matrix: FreshMatrix | undefined;
  /** The key in each slot; undefined once its row left. */
  private keys: (bigint | undefined)[] = [];
  private readonly slotOf = new Map<bigint, number>();

  constructor(
    private readonly dim: number,
    private readonly metric: Metric,
    private readonly makeMatrix: MatrixMaker = (dim, kind) => new VectorMatrix(dim, kind),
    private readonly lost: () => void = () => undefined,
  ) {}

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
    this.matrix ??= this.makeMatrix(this.dim, SEARCHED[this.metric].kind, this.lost);
    this.matrix.write(slot, vector);
    this.keys.push(key);
    this.slotOf.set(key, slot);
  }

  remove(key: bigint): void {
    const slot = this.slotOf.get(key);
    if (slot === undefined) return;
    this.slotOf.delete(key);
    this.keys[slot] = undefined;
    if (this.keys.length - this.slotOf.size > Math.max(PACK_FROM, this.slotOf.size)) this.pack();
  }

  /** Lets go of the matrix. */
  close(): void {
    this.matrix?.close();
    this.matrix = undefined;
  }

  /**
   * The held rows nearest `query` among those `eligible` admits: the best `limit`, and every row tied with the
   * last of them, nearest first (ties by key). Undefined when the matrix was let go of during the search.
   * `eligibleRows`: about how many held rows `eligible` admits (all by default), which sizes the first scan.
   */
  async search(
    query: Float32Array,
    limit: number,
    eligible: (key: bigint) => boolean,
    eligibleRows = Number.POSITIVE_INFINITY,
  ): Promise<{ keys: bigint[]; values: number[] } | undefined> {
    const { matrix } = this;
    const held = Math.min(this.slotOf.size, eligibleRows);
    if (matrix === undefined || held === 0 || limit <= 0) return { keys: [], values: [] };
    const { canonical } = SEARCHED[this.metric];
    // Empty and ineligible slots take places among the nearest: ask for as many more as their share predicts, with
    // a margin, then twice as many until `limit` rows and their ties are in hand, or every slot was ranked (asking
    // for every empty slot at once made a scan with 5% of its rows deleted ~5× slower; sized by the held rows rather
    // than the eligible, a scan under ingest, where rows a fold covered stay held for key lookups, went round six
    // times). usearch answers nearest first, so the walk stops past the edge. The slots and their keys are taken
    // as they are when each scan is sent: copied, as a row replaced meanwhile leaves its slot empty in the array
    // and moves to one past the scan's, and would be found in neither.
    let slots = this.keys.length;
    for (let count = Math.min(slots, Math.ceil((1.25 * (limit + 1) * slots) / held) + 16); ; ) {
      const keys = this.keys.slice(0, slots);
      const matches = await matrix.scan(slots, query, count);
      if (this.matrix !== matrix) return undefined;
      const found: { key: bigint; value: number }[] = [];
      let edge: number | undefined;
      let past = false;
      for (let i = 0; i < matches.slots.length; i++) {
        const distance = matches.distances[i] as number;
        if (edge !== undefined && distance > edge) {
          past = true;
          break;
        }
        const key = keys[matches.slots[i] as number];
        if (key === undefined || !eligible(key)) continue;
        found.push({ key, value: canonical(distance) });
        if (found.length === limit) edge = distance;
      }
      if (past || count >= slots) {
        found.sort((x, y) => x.value - y.value || (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
        return { keys: found.map((f) => f.key), values: found.map((f) => f.value) };
      }
      slots = this.keys.length;
      count = Math.min(slots, 2 * count);
    }
  }

  /** Moves the held rows to the first slots. */
  private pack(): void {
    const keys: bigint[] = [];
    const keep: number[] = [];
    this.keys.forEach((key, slot) => {
      if (key === undefined) return;
      keep.push(slot);
      this.slotOf.set(key, keys.length);
      keys.push(key);
    });
    this.matrix?.pack(keep);
    this.keys = keys;
  }
}
