// The IPC format's wire: its constants, and its flatbuffer metadata read with every offset and length bounded.

/** What is wrong with the stream; `checkIpcStream` turns it into a `BadRequest` with the subject prepended. */
export class Damage extends Error {}

export function damaged(message: string): never {
  throw new Damage(message);
}

// ── Wire constants (Message.fbs, Schema.fbs). Numbers, not Arrow JS's enums: these are the format's. ──

export const CONTINUATION = -1;
export const ARROW_FILE_MAGIC = [0x41, 0x52, 0x52, 0x4f, 0x57, 0x31]; // "ARROW1"
export const METADATA_V4 = 3;
export const METADATA_V5 = 4;
export const HEADER = { Schema: 1, DictionaryBatch: 2, RecordBatch: 3 } as const;
/** Schema.fbs's Type union: the ids this file reads (Arrow JS's own `Type` enum is not the wire format). */
export const T = {
  Null: 1,
  Int: 2,
  FloatingPoint: 3,
  Binary: 4,
  Utf8: 5,
  Bool: 6,
  Decimal: 7,
  Date: 8,
  Time: 9,
  Timestamp: 10,
  Interval: 11,
  List: 12,
  Struct: 13,
  FixedSizeBinary: 15,
  FixedSizeList: 16,
  Map: 17,
  Duration: 18,
  LargeBinary: 19,
  LargeUtf8: 20,
} as const;
const OTHER_TYPES: Record<number, string> = {
  0: 'NONE',
  14: 'Union',
  21: 'LargeList',
  22: 'RunEndEncoded',
  23: 'BinaryView',
  24: 'Utf8View',
  25: 'ListView',
  26: 'LargeListView',
};
export const typeName = (id: number) =>
  Object.entries(T).find(([, v]) => v === id)?.[0] ?? OTHER_TYPES[id] ?? `type ${id}`;
/** Deeper nesting than any real schema; bounds the recursion here and in Arrow JS. */
export const MAX_DEPTH = 64;
export const SAFE = Number.MAX_SAFE_INTEGER;

/**
 * An int64 as a number: exact within ±2^53, otherwise ±Infinity so that every bound check refuses it (a Number
 * cannot hold it exactly, and no honest length or offset comes near).
 */
export function int64At(view: DataView, at: number): number {
  const hi = view.getInt32(at + 4, true);
  if (hi >= 0x200000 || hi < -0x200000) return hi < 0 ? -Number.POSITIVE_INFINITY : Number.POSITIVE_INFINITY;
  return hi * 2 ** 32 + view.getUint32(at, true);
}

// ── Flatbuffers, bounds-checked ──

export interface Table {
  pos: number;
  vtable: number;
  vtableSize: number;
}

export interface Vec {
  start: number;
  length: number;
}

/**
 * One message's metadata. Offsets must point forward (flatbuffers' offsets are unsigned; Arrow JS reads them
 * signed, so a backward one could make a cycle). Tables and string bytes are counted against the metadata size:
 * a tree of distinct tables fits, while tables shared many times over (which Arrow JS would decode once per
 * reference) do not.
 */
export class Flatbuffer {
  private readonly view: DataView;
  private tablesLeft: number;
  private stringBytesLeft: number;

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.tablesLeft = Math.floor(bytes.byteLength / 4) + 1;
    this.stringBytesLeft = bytes.byteLength;
  }

  private need(at: number, size: number, what: string): void {
    if (at < 0 || size < 0 || at + size > this.bytes.byteLength) damaged(`${what} lies outside the message metadata`);
  }

  /** Where the forward offset stored at `at` points. */
  private follow(at: number, what: string): number {
    this.need(at, 4, what);
    const rel = this.view.getInt32(at, true);
    if (rel <= 0) damaged(`${what} is not a forward offset`);
    return at + rel;
  }

  private tableAt(pos: number, what: string): Table {
    if (--this.tablesLeft < 0) damaged('the metadata holds more tables than its size allows (shared or looping)');
    this.need(pos, 4, what);
    const vtable = pos - this.view.getInt32(pos, true);
    this.need(vtable, 4, `the vtable of ${what}`);
    const vtableSize = this.view.getInt16(vtable, true);
    if (vtableSize < 4 || vtableSize % 2 !== 0) damaged(`the vtable of ${what} has size ${vtableSize}`);
    this.need(vtable, vtableSize, `the vtable of ${what}`);
    return { pos, vtable, vtableSize };
  }

  root(): Table {
    return this.tableAt(this.follow(0, 'the message table'), 'the message table');
  }

  /** Where field `slot` of `t` lies, checked to hold `size` bytes; 0 when absent (so its default applies). */
  private field(t: Table, slot: number, size: number, what: string): number {
    const entry = 4 + 2 * slot;
    if (entry >= t.vtableSize) return 0;
    const rel = this.view.getInt16(t.vtable + entry, true);
    if (rel === 0) return 0;
    if (rel < 4) damaged(`${what} overlaps its table's header`);
    this.need(t.pos + rel, size, what);
    return t.pos + rel;
  }

  has(t: Table, slot: number, what: string): boolean {
    return this.field(t, slot, 1, what) !== 0;
  }

  uint8(t: Table, slot: number, fallback: number, what: string): number {
    const at = this.field(t, slot, 1, what);
    return at === 0 ? fallback : this.view.getUint8(at);
  }

  int16(t: Table, slot: number, fallback: number, what: string): number {
    const at = this.field(t, slot, 2, what);
    return at === 0 ? fallback : this.view.getInt16(at, true);
  }

  int32(t: Table, slot: number, fallback: number, what: string): number {
    const at = this.field(t, slot, 4, what);
    return at === 0 ? fallback : this.view.getInt32(at, true);
  }

  int64(t: Table, slot: number, what: string): number {
    const at = this.field(t, slot, 8, what);
    return at === 0 ? 0 : int64At(this.view, at);
  }

  table(t: Table, slot: number, what: string): Table | undefined {
    const at = this.field(t, slot, 4, what);
    return at === 0 ? undefined : this.tableAt(this.follow(at, what), what);
  }

  vector(t: Table, slot: number, elementSize: number, what: string): Vec | undefined {
    const at = this.field(t, slot, 4, what);
    if (at === 0) return undefined;
    const start = this.follow(at, what);
    this.need(start, 4, what);
    const length = this.view.getInt32(start, true);
    if (length < 0) damaged(`${what} claims ${length} entries`);
    // Checked before anyone loops over it: a vector claiming 2^31 entries fails here, in constant time.
    if (length * elementSize > this.bytes.byteLength - start - 4) {
      damaged(`${what} claims ${length} entries, more than the message metadata holds`);
    }
    return { start: start + 4, length };
  }

  /** Entry `i` of a vector of tables. */
  tableIn(v: Vec, i: number, what: string): Table {
    return this.tableAt(this.follow(v.start + 4 * i, what), what);
  }

  string(t: Table, slot: number, what: string): string | undefined {
    const v = this.vector(t, slot, 1, what);
    if (v === undefined) return undefined;
    this.stringBytesLeft -= v.length;
    if (this.stringBytesLeft < 0) damaged('the metadata holds more string bytes than its size (shared strings)');
    return Buffer.from(this.bytes.buffer, this.bytes.byteOffset + v.start, v.length).toString('utf8');
  }

  /** int64 pairs of a vector of 16-byte structs (FieldNode, Buffer). */
  pair(v: Vec, i: number): [number, number] {
    const at = v.start + 16 * i;
    return [int64At(this.view, at), int64At(this.view, at + 8)];
  }
}

/** Walks a vector of KeyValue tables as Arrow JS will decode it, so every string in it is bounds-checked. */
export function checkCustomMetadata(fb: Flatbuffer, t: Table, slot: number, where: string): void {
  const entries = fb.vector(t, slot, 4, `${where} custom metadata`);
  for (let i = 0; i < (entries?.length ?? 0); i++) {
    const kv = fb.tableIn(entries as Vec, i, `${where} custom metadata entry ${i}`);
    fb.string(kv, 0, `${where} custom metadata key ${i}`);
    fb.string(kv, 1, `${where} custom metadata value ${i}`);
  }
}
