import { isUtf8 } from 'node:buffer';
import type { FieldSpec } from './fields.js';
import { damaged, type Flatbuffer, int64At, SAFE, type Table } from './wire.js';

// One record batch's field nodes and buffers walked against the schema: lengths, bitmaps, offsets, text.

/** 1 bits in each byte value, for counting nulls in a validity bitmap. */
const ONES = Uint8Array.from({ length: 256 }, (_, b) => {
  let n = 0;
  for (let x = b; x > 0; x >>= 1) n += x & 1;
  return n;
});

interface Region {
  offset: number;
  length: number;
}

/** The last row the bitmap marks valid (-1 if none); every row is valid without a bitmap. */
function lastValid(body: Uint8Array, validity: Region | undefined, length: number): number {
  if (validity === undefined) return length - 1;
  for (let byte = Math.ceil(length / 8) - 1; byte >= 0; byte--) {
    const bits = body[validity.offset + byte] as number;
    for (let bit = 7; bit >= 0; bit--) {
      const row = byte * 8 + bit;
      if (row < length && ((bits >> bit) & 1) === 1) return row;
    }
  }
  return -1;
}

/** One record batch's nodes and buffers, consumed in the depth-first order the IPC format lays them out. */
class BatchWalk {
  private node = 0;
  private buffer = 0;
  private readonly view: DataView;

  constructor(
    private readonly body: Uint8Array,
    private readonly nodes: ReadonlyArray<[number, number]>,
    private readonly buffers: readonly Region[],
    private readonly maxRows: number,
    private readonly where: string,
    /** Values each dictionary id holds so far: indices must fall within. */
    private readonly dictionaryLengths: ReadonlyMap<number, number>,
  ) {
    this.view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  }

  private fail(spec: FieldSpec, problem: string): never {
    return damaged(`${this.where}, column "${spec.path}": ${problem}`);
  }

  private nextBuffer(): Region {
    return this.buffers[this.buffer++] as Region;
  }

  /** Checks the field's node, buffers and descendants; returns the node's length. */
  visit(spec: FieldSpec): number {
    const [length, nullCount] = this.nodes[this.node++] as [number, number];
    if (!(length >= 0 && length <= this.maxRows)) {
      this.fail(spec, `length ${length} is outside 0..${this.maxRows}, the rows this body can hold`);
    }
    const layout = spec.layout;
    if (layout.kind === 'null') return length;
    if (!(nullCount >= 0 && nullCount <= length)) this.fail(spec, `null count ${nullCount} is outside 0..${length}`);
    const validity = this.validity(spec, length, nullCount);
    switch (layout.kind) {
      case 'bool': {
        const values = this.nextBuffer();
        // Arrow JS's own writer sends an all-null Bool column without values; nothing reads them, and the
        // service's writer fills them in for Lance (arrow.ts). Any other short values buffer is damage.
        if (nullCount < length || values.length > 0) this.atLeast(spec, values, Math.ceil(length / 8), 'values');
        break;
      }
      case 'fixed': {
        const values = this.nextBuffer();
        this.atLeast(spec, values, length * layout.width, 'values');
        if (layout.range) this.checkRange(spec, values, length, validity, layout.range);
        break;
      }
      case 'bytes': {
        const offsets = this.nextBuffer();
        const data = this.nextBuffer();
        const span = this.offsets(spec, offsets, length, layout.offsetWidth, data.length, 'the data buffer');
        if (layout.utf8 && span) this.checkUtf8(spec, offsets, layout.offsetWidth, length, data, span);
        break;
      }
      case 'list': {
        const offsets = this.nextBuffer();
        const child = this.visit(spec.children[0] as FieldSpec);
        this.offsets(spec, offsets, length, 4, child, 'the child column');
        break;
      }
      case 'fixed-list': {
        const child = this.visit(spec.children[0] as FieldSpec);
        // Arrow JS's writer leaves out the child values of trailing null lists (all of them in an all-null
        // column), so only the lists up to the last valid one must have their values.
        const needed = (lastValid(this.body, validity, length) + 1) * layout.size;
        if (child < needed) {
          this.fail(spec, `the child column has ${child} values; its lists of ${layout.size} need ${needed}`);
        }
        break;
      }
      case 'dictionary': {
        const indices = this.nextBuffer();
        this.atLeast(spec, indices, length * layout.width, 'indices');
        this.checkIndices(spec, indices, length, validity, layout);
        break;
      }
      case 'struct':
        for (const c of spec.children) {
          const n = this.visit(c);
          if (n !== length) this.fail(spec, `child "${c.path}" has length ${n}; the struct has ${length}`);
        }
        break;
    }
    return length;
  }

  private atLeast(spec: FieldSpec, region: Region, bytes: number, what: string): void {
    if (region.length < bytes) this.fail(spec, `the ${what} buffer holds ${region.length} bytes; it needs ${bytes}`);
  }

  /**
   * The validity bitmap, or undefined when every row is valid. Its null count must match the node's: Arrow JS
   * believes the node, arrow-rs (Lance) the bitmap, and the two must see the same rows as null.
   */
  private validity(spec: FieldSpec, length: number, nullCount: number): Region | undefined {
    const bitmap = this.nextBuffer();
    if (bitmap.length === 0) {
      if (nullCount > 0) this.fail(spec, `it declares ${nullCount} nulls but has no validity bitmap`);
      return undefined;
    }
    this.atLeast(spec, bitmap, Math.ceil(length / 8), 'validity');
    const whole = length >> 3;
    let valid = 0;
    for (let i = 0; i < whole; i++) valid += ONES[this.body[bitmap.offset + i] as number] as number;
    const rest = length & 7;
    if (rest > 0) valid += ONES[(this.body[bitmap.offset + whole] as number) & ((1 << rest) - 1)] as number;
    if (length - valid !== nullCount) {
      this.fail(spec, `it declares ${nullCount} nulls but its validity bitmap marks ${length - valid}`);
    }
    return nullCount > 0 ? bitmap : undefined;
  }

  /**
   * Checks an offsets buffer: first ≥ 0, never decreasing, last ≤ `limit`. Returns the [first, last] span, or
   * undefined for an empty column written without offsets (which writers may do).
   */
  private offsets(
    spec: FieldSpec,
    region: Region,
    length: number,
    width: 4 | 8,
    limit: number,
    target: string,
  ): [number, number] | undefined {
    if (length === 0 && region.length === 0) return undefined;
    this.atLeast(spec, region, (length + 1) * width, 'offsets');
    const first = this.offsetAt(region, width, 0);
    if (first < 0) this.fail(spec, `the first offset is ${first}`);
    let prev = first;
    for (let i = 1; i <= length; i++) {
      const next = this.offsetAt(region, width, i);
      if (next < prev) this.fail(spec, `offsets decrease at row ${i - 1}`);
      prev = next;
    }
    if (prev > limit) this.fail(spec, `offsets run past ${target} (${prev} > ${limit})`);
    return [first, prev];
  }

  private checkUtf8(
    spec: FieldSpec,
    offsets: Region,
    width: 4 | 8,
    length: number,
    data: Region,
    [first, last]: [number, number],
  ): void {
    if (!isUtf8(this.body.subarray(data.offset + first, data.offset + last))) {
      this.fail(spec, 'the string data is not valid UTF-8');
    }
    for (let i = 0; i < length; i++) {
      const at = this.offsetAt(offsets, width, i);
      // Valid UTF-8 overall, and no string starting on a continuation byte: every string is valid on its own.
      if (at < last && ((this.body[data.offset + at] as number) & 0xc0) === 0x80) {
        this.fail(spec, `row ${i} starts inside a UTF-8 character`);
      }
    }
  }

  private offsetAt(offsets: Region, width: 4 | 8, i: number): number {
    return width === 4 ? this.view.getInt32(offsets.offset + 4 * i, true) : int64At(this.view, offsets.offset + 8 * i);
  }

  /** Arrow JS converts these int64 values to Numbers and throws when the result is not a safe integer. */
  private checkRange(
    spec: FieldSpec,
    values: Region,
    length: number,
    validity: Region | undefined,
    range: 'safe' | 'safe-after-1000',
  ): void {
    for (let i = 0; i < length; i++) {
      if (validity && (((this.body[validity.offset + (i >> 3)] as number) >> (i & 7)) & 1) === 0) continue;
      const at = values.offset + 8 * i;
      const v = int64At(this.view, at);
      if (Math.abs(v) <= SAFE) continue;
      if (range === 'safe-after-1000') {
        const big = this.view.getBigInt64(at, true) / 1000n;
        if (big >= -BigInt(SAFE) && big <= BigInt(SAFE)) continue;
      }
      this.fail(spec, `row ${i} holds a value outside the range this server can read`);
    }
  }

  /** Arrow JS looks indices up unchecked, and arrow-rs refuses a batch whose index is out of range. */
  private checkIndices(
    spec: FieldSpec,
    indices: Region,
    length: number,
    validity: Region | undefined,
    layout: { id: number; width: 1 | 2 | 4; signed: boolean },
  ): void {
    const size = this.dictionaryLengths.get(layout.id) ?? 0;
    const view = this.view;
    const read =
      layout.width === 1
        ? layout.signed
          ? (at: number) => view.getInt8(at)
          : (at: number) => view.getUint8(at)
        : layout.width === 2
          ? layout.signed
            ? (at: number) => view.getInt16(at, true)
            : (at: number) => view.getUint16(at, true)
          : layout.signed
            ? (at: number) => view.getInt32(at, true)
            : (at: number) => view.getUint32(at, true);
    for (let i = 0; i < length; i++) {
      if (validity && (((this.body[validity.offset + (i >> 3)] as number) >> (i & 7)) & 1) === 0) continue;
      const index = read(indices.offset + layout.width * i);
      if (index < 0 || index >= size) {
        this.fail(spec, `row ${i} has dictionary index ${index}; dictionary ${layout.id} holds ${size} values`);
      }
    }
  }

  /** Every node and buffer the message lists was used. */
  finished(): boolean {
    return this.node === this.nodes.length && this.buffer === this.buffers.length;
  }
}

export function checkRecordBatch(
  fb: Flatbuffer,
  batch: Table,
  body: Uint8Array,
  fields: readonly FieldSpec[],
  maxRows: number,
  where: string,
  dictionaryLengths: ReadonlyMap<number, number>,
): number {
  const length = fb.int64(batch, 0, `${where} length`);
  if (!(length >= 0 && length <= maxRows)) damaged(`${where} claims ${length} rows; this body can hold ${maxRows}`);
  if (fb.has(batch, 3, `${where} compression`)) damaged(`${where} is compressed, which is not supported`);
  const nodeVec = fb.vector(batch, 1, 16, `${where} field nodes`) ?? { start: 0, length: 0 };
  const bufferVec = fb.vector(batch, 2, 16, `${where} buffers`) ?? { start: 0, length: 0 };
  const needNodes = fields.reduce((n, f) => n + f.nodes, 0);
  const needBuffers = fields.reduce((n, f) => n + f.buffers, 0);
  if (nodeVec.length !== needNodes)
    damaged(`${where} has ${nodeVec.length} field nodes; the schema needs ${needNodes}`);
  if (bufferVec.length !== needBuffers) {
    damaged(`${where} has ${bufferVec.length} buffers; the schema needs ${needBuffers}`);
  }
  const nodes = Array.from({ length: nodeVec.length }, (_, i) => fb.pair(nodeVec, i));
  const buffers = Array.from({ length: bufferVec.length }, (_, i): Region => {
    const [offset, size] = fb.pair(bufferVec, i);
    if (!(offset >= 0 && size >= 0 && offset + size <= body.byteLength)) {
      damaged(`${where}, buffer ${i} (${offset}+${size}) lies outside the ${body.byteLength}-byte body`);
    }
    // Arrow JS views buffers as typed arrays over the body, which needs them aligned; the format requires 8.
    if (offset % 8 !== 0) damaged(`${where}, buffer ${i} starts at ${offset}, which is not a multiple of 8`);
    return { offset, length: size };
  });
  // Each buffer is scanned once per column that owns it; buffers that overlapped would let many columns
  // rescan one region and make the check cost columns × body instead of the body once.
  const used = buffers
    .map((region, i) => ({ ...region, i }))
    .filter((region) => region.length > 0)
    .sort((a, b) => a.offset - b.offset);
  for (let k = 1; k < used.length; k++) {
    const before = used[k - 1] as Region & { i: number };
    const next = used[k] as Region & { i: number };
    if (before.offset + before.length > next.offset) {
      damaged(`${where}, buffers ${before.i} and ${next.i} overlap`);
    }
  }
  const walk = new BatchWalk(body, nodes, buffers, maxRows, where, dictionaryLengths);
  for (const field of fields) {
    const n = walk.visit(field);
    if (n !== length) damaged(`${where}, column "${field.path}": length ${n}; the batch has ${length} rows`);
  }
  if (!walk.finished()) damaged(`${where} does not use all its field nodes and buffers`);
  return length;
}
