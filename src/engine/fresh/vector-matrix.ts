import { exactSearch, MetricKind } from 'usearch';

/** The nearest slots a scan found, nearest first, with usearch's distances. */
export interface MatrixScan {
  slots: number[];
  distances: number[];
}

/** Where a fresh vector column's rows are kept and scanned: here (`VectorMatrix`) or on the scan thread. */
export interface FreshMatrix {
  /** Writes rows of `dim` floats at the slots from `slot` on. */
  write(slot: number, vectors: Float32Array): void;
  /** Keeps the rows of `keep`, in that order, as the first slots; the rest go. */
  pack(keep: readonly number[]): void;
  /** The `count` slots of the first `slots` nearest `query` by the matrix's metric. */
  scan(slots: number, query: Float32Array, count: number): MatrixScan | Promise<MatrixScan>;
  /** Lets go of the rows. */
  close(): void;
}

/** Slots the first growth makes room for. */
const FIRST_SLOTS = 1024;
/**
 * From this many floats on (~11k rows of 384-d), a scan ranks 8-bit copies of the rows first and measures its
 * best candidates exactly: 1.5–2 ms for 105k × 384 against 6–8 ms in f32 on one core here.
 */
export const QUANTIZED_FROM_FLOATS = 1 << 22;
/** Candidates an 8-bit scan hands to the exact one: four times those asked for, and at least 100 more. */
const candidatesFor = (count: number): number => Math.max(4 * count, count + 100);

/**
 * On a shared scale, the 8-bit codes are not used past this ratio of the largest magnitude written to the mean
 * one: a few rows far larger than the rest would leave the others' codes near 0 (one row 1000× the rest made
 * recall@10 0.05). The scan is then f32 alone.
 */
const SKEW_LIMIT = 64;

/**
 * One vector column's rows as one f32 matrix that usearch scans exactly with SIMD. Large, it also keeps each
 * value as a signed byte and ranks those first: like the ANN index beside it, a scan then may miss a row whose
 * 8-bit rank was past its candidates. Under cosine each row has its own scale (the angle ignores length); under
 * l2sq and the inner product all rows share one, with room to grow: a value past it makes every code again at
 * twice the new largest magnitude, so that rows growing slowly in magnitude cost a few passes, not one each.
 */
export class VectorMatrix implements FreshMatrix {
  private data = new Float32Array(0);
  private codes: Int8Array | undefined;
  /** The shared scale's magnitude (l2sq, inner product): 127 stands for it. */
  private scale = 0;
  /** The largest magnitude written, and the sum of all magnitudes and how many (for `SKEW_LIMIT`). */
  private largest = 0;
  private magnitudes = 0;
  private values = 0;
  /** Slots written. */
  private rows = 0;

  constructor(
    private readonly dim: number,
    private readonly kind: MetricKind,
  ) {}

  write(slot: number, vectors: Float32Array): void {
    const { dim } = this;
    const end = slot + vectors.length / dim;
    if (end * dim > this.data.length) this.resize(Math.max(FIRST_SLOTS, 2 * end));
    this.data.set(vectors, slot * dim);
    this.rows = Math.max(this.rows, end);
    this.measure(vectors);
    if (this.rows * dim < QUANTIZED_FROM_FLOATS) return;
    const shared = this.kind !== MetricKind.Cos;
    if (this.codes === undefined || (shared && this.largest > this.scale)) {
      if (shared) this.scale = this.codes === undefined ? this.largest : 2 * this.largest;
      this.encode(0, this.rows);
    } else this.encode(slot, end);
  }

  pack(keep: readonly number[]): void {
    const { dim } = this;
    const data = new Float32Array(Math.max(FIRST_SLOTS, 2 * keep.length) * dim);
    keep.forEach((slot, i) => {
      data.set(this.data.subarray(slot * dim, (slot + 1) * dim), i * dim);
    });
    this.data = data;
    this.rows = keep.length;
    this.codes = undefined;
    // The rows that went may have held the largest values: the scale is taken from those kept.
    this.largest = 0;
    this.magnitudes = 0;
    this.values = 0;
    this.measure(data.subarray(0, this.rows * dim));
    this.scale = this.largest;
    if (this.rows * dim >= QUANTIZED_FROM_FLOATS) this.encode(0, this.rows);
  }

  scan(slots: number, query: Float32Array, count: number): MatrixScan {
    const { dim, codes, kind } = this;
    const wanted = Math.min(count, slots);
    if (wanted <= 0) return { slots: [], distances: [] };
    const candidates = candidatesFor(wanted);
    const skewed =
      this.kind !== MetricKind.Cos && this.largest > SKEW_LIMIT * (this.magnitudes / Math.max(1, this.values));
    if (codes === undefined || skewed || slots * dim < QUANTIZED_FROM_FLOATS || candidates >= slots) {
      return found(exactSearch(this.data.subarray(0, slots * dim), query, dim, wanted, kind, 1), undefined);
    }
    const coarse = exactSearch(codes.subarray(0, slots * dim), this.code(query), dim, candidates, kind, 1);
    const picked = Array.from(coarse.keys, Number);
    const exact = new Float32Array(picked.length * dim);
    picked.forEach((slot, i) => {
      exact.set(this.data.subarray(slot * dim, (slot + 1) * dim), i * dim);
    });
    return found(exactSearch(exact, query, dim, wanted, kind, 1), picked);
  }

  close(): void {
    this.data = new Float32Array(0);
    this.codes = undefined;
    this.rows = 0;
  }

  private resize(slots: number): void {
    const data = new Float32Array(slots * this.dim);
    data.set(this.data.subarray(0, this.rows * this.dim));
    this.data = data;
    if (this.codes === undefined) return;
    const codes = new Int8Array(slots * this.dim);
    codes.set(this.codes.subarray(0, this.rows * this.dim));
    this.codes = codes;
  }

  private measure(values: Float32Array): void {
    for (const x of values) {
      const magnitude = Math.abs(x);
      if (magnitude > this.largest) this.largest = magnitude;
      this.magnitudes += magnitude;
    }
    this.values += values.length;
  }

  private encode(from: number, to: number): void {
    const { data, dim } = this;
    if (this.codes === undefined || this.codes.length < data.length) {
      const codes = new Int8Array(data.length);
      if (this.codes !== undefined && from > 0) codes.set(this.codes.subarray(0, from * dim));
      this.codes = codes;
    }
    const { codes } = this;
    for (let row = from; row < to; row++) {
      let largest = this.scale;
      if (this.kind === MetricKind.Cos) {
        largest = 0;
        for (let i = row * dim; i < (row + 1) * dim; i++) largest = Math.max(largest, Math.abs(data[i] as number));
      }
      const scale = largest > 0 ? 127 / largest : 0;
      for (let i = row * dim; i < (row + 1) * dim; i++) codes[i] = Math.round((data[i] as number) * scale);
    }
  }

  /**
   * The query on the rows' scale for l2sq; on its own for the angle and inner product, whose ranking no positive
   * scale of the query changes (and whose query may be larger than any row). Values past ±127 are clamped.
   */
  private code(query: Float32Array): Int8Array {
    let largest = this.scale;
    if (this.kind !== MetricKind.L2sq) largest = query.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    const scale = largest > 0 ? 127 / largest : 0;
    return Int8Array.from(query, (x) => Math.max(-127, Math.min(127, Math.round(x * scale))));
  }
}

/** usearch's answer as slots (of the matrix, or of `picked` when it scanned those candidates) and distances. */
function found(matches: { keys: BigUint64Array; distances: Float32Array }, picked: number[] | undefined): MatrixScan {
  const slots: number[] = [];
  const distances: number[] = [];
  for (let i = 0; i < matches.keys.length; i++) {
    const at = Number(matches.keys[i]);
    slots.push(picked === undefined ? at : (picked[at] as number));
    distances.push(matches.distances[i] as number);
  }
  return { slots, distances };
}
