import { isUtf8 } from 'node:buffer';
import { BadRequest } from '../errors.js';

/**
 * Checks an Arrow IPC *stream* from a client completely before any Arrow JS decoder sees it. Arrow JS trusts
 * every length in a stream: a record batch that claims 2^31 rows, a flatbuffer vector that claims 2^31 entries,
 * or offsets that run past their buffer make it allocate until V8 dies, hang, or hand Lance bytes it refuses
 * later with a 500. Everything here reads the bytes in place, allocates only in proportion to the metadata,
 * and runs in time linear in the input; anything it cannot vouch for is a 400.
 *
 * The flatbuffers are read by hand, mirroring how Arrow JS's generated readers (flatbuffers 24, signed 32-bit
 * offsets) will read them, so that every read Arrow JS makes afterwards is one this file has bounds-checked.
 * Dictionary encoding is checked in full (dictionary batches against their value field, indices against the
 * dictionary's length), since Lance stores dictionary columns. Refused outright, because Arrow JS 18 cannot read
 * them or Lance cannot store them: compressed bodies, unions, LargeList, list and string views, run-end encoding,
 * 64-bit dictionary indices, big-endian data, metadata older than V4, month-day-nano intervals, and the IPC
 * file format.
 */

export interface IpcLimits {
  /** The most rows the whole stream may hold; no single column or child may be longer either. */
  maxRows: number;
  /** Names the stream in error messages; "the body" unless given. */
  subject?: string;
}

/**
 * The rows a body of `byteLength` bytes may claim. Every column with buffers costs at least a bit per row (Bool,
 * packed 8 to a byte), so only columns of Null type could honestly claim more; 1024 leaves room for tiny bodies.
 */
export function maxRowsFor(bytes: Uint8Array): number {
  return Math.max(1024, bytes.byteLength * 8);
}

/** Throws `BadRequest` naming the first thing wrong with `bytes` as an Arrow IPC stream. */
export function checkIpcStream(bytes: Uint8Array, limits: IpcLimits): void {
  try {
    checkStream(bytes, limits.maxRows);
  } catch (err) {
    if (err instanceof Damage) {
      throw new BadRequest(`${limits.subject ?? 'the body'} is not an Arrow IPC stream: ${err.message}`);
    }
    throw err;
  }
}

/** What is wrong with the stream; `checkIpcStream` turns it into a `BadRequest` with the subject prepended. */
class Damage extends Error {}

function damaged(message: string): never {
  throw new Damage(message);
}

// ── Wire constants (Message.fbs, Schema.fbs). Numbers, not Arrow JS's enums: these are the format's. ──

const CONTINUATION = -1;
const ARROW_FILE_MAGIC = [0x41, 0x52, 0x52, 0x4f, 0x57, 0x31]; // "ARROW1"
const METADATA_V4 = 3;
const METADATA_V5 = 4;
const HEADER = { Schema: 1, DictionaryBatch: 2, RecordBatch: 3 } as const;
/** Schema.fbs's Type union: the ids this file reads (Arrow JS's own `Type` enum is not the wire format). */
const T = {
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
const typeName = (id: number) => Object.entries(T).find(([, v]) => v === id)?.[0] ?? OTHER_TYPES[id] ?? `type ${id}`;
/** Deeper nesting than any real schema; bounds the recursion here and in Arrow JS. */
const MAX_DEPTH = 64;
const SAFE = Number.MAX_SAFE_INTEGER;

/**
 * An int64 as a number: exact within ±2^53, otherwise ±Infinity so that every bound check refuses it (a Number
 * cannot hold it exactly, and no honest length or offset comes near).
 */
function int64At(view: DataView, at: number): number {
  const hi = view.getInt32(at + 4, true);
  if (hi >= 0x200000 || hi < -0x200000) return hi < 0 ? -Number.POSITIVE_INFINITY : Number.POSITIVE_INFINITY;
  return hi * 2 ** 32 + view.getUint32(at, true);
}

// ── Flatbuffers, bounds-checked ──

interface Table {
  pos: number;
  vtable: number;
  vtableSize: number;
}

interface Vec {
  start: number;
  length: number;
}

/**
 * One message's metadata. Offsets must point forward (flatbuffers' offsets are unsigned; Arrow JS reads them
 * signed, so a backward one could make a cycle). Tables and string bytes are counted against the metadata size:
 * a tree of distinct tables fits, while tables shared many times over (which Arrow JS would decode once per
 * reference) do not.
 */
class Flatbuffer {
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
function checkCustomMetadata(fb: Flatbuffer, t: Table, slot: number, where: string): void {
  const entries = fb.vector(t, slot, 4, `${where} custom metadata`);
  for (let i = 0; i < (entries?.length ?? 0); i++) {
    const kv = fb.tableIn(entries as Vec, i, `${where} custom metadata entry ${i}`);
    fb.string(kv, 0, `${where} custom metadata key ${i}`);
    fb.string(kv, 1, `${where} custom metadata value ${i}`);
  }
}

// ── Schema: what each field needs in a record batch ──

/** How a field is laid out in a record batch body. */
type Layout =
  | { kind: 'null' }
  | { kind: 'bool' }
  | { kind: 'fixed'; width: number; range?: 'safe' | 'safe-after-1000' }
  | { kind: 'bytes'; offsetWidth: 4 | 8; utf8: boolean }
  | { kind: 'list' }
  | { kind: 'fixed-list'; size: number }
  | { kind: 'struct' }
  /** Indices into dictionary `id`; the values arrive in dictionary batches, laid out as the value field. */
  | { kind: 'dictionary'; id: number; width: 1 | 2 | 4; signed: boolean };

interface FieldSpec {
  path: string;
  layout: Layout;
  children: FieldSpec[];
  /** Field nodes and buffers this field and its descendants take in every record batch. */
  nodes: number;
  buffers: number;
}

const TIME_UNITS = 4; // SECOND, MILLISECOND, MICROSECOND, NANOSECOND

function layoutOf(fb: Flatbuffer, f: Table, typeId: number, children: number, where: string): Layout {
  const params = (): Table =>
    fb.table(f, 3, `${where} type`) ?? damaged(`${where} is of type ${typeName(typeId)} but has no type parameters`);
  const leaf = (layout: Layout): Layout =>
    children === 0 ? layout : damaged(`${where}: type ${typeName(typeId)} cannot have child fields`);
  const oneChild = (layout: Layout): Layout =>
    children === 1 ? layout : damaged(`${where}: type ${typeName(typeId)} needs exactly one child field`);
  switch (typeId) {
    case T.Null:
      return leaf({ kind: 'null' });
    case T.Int: {
      const t = params();
      const bits = fb.int32(t, 0, 0, `${where} bit width`);
      fb.has(t, 1, `${where} signedness`);
      if (bits !== 8 && bits !== 16 && bits !== 32 && bits !== 64) damaged(`${where} has integer bit width ${bits}`);
      return leaf({ kind: 'fixed', width: bits / 8 });
    }
    case T.FloatingPoint: {
      const precision = fb.int16(params(), 0, 0, `${where} precision`);
      if (precision < 0 || precision > 2) damaged(`${where} has floating point precision ${precision}`);
      return leaf({ kind: 'fixed', width: 2 ** (precision + 1) });
    }
    case T.Binary:
    case T.Utf8:
    case T.LargeBinary:
    case T.LargeUtf8: {
      const large = typeId === T.LargeBinary || typeId === T.LargeUtf8;
      return leaf({ kind: 'bytes', offsetWidth: large ? 8 : 4, utf8: typeId === T.Utf8 || typeId === T.LargeUtf8 });
    }
    case T.Bool:
      return leaf({ kind: 'bool' });
    case T.Decimal: {
      const t = params();
      fb.int32(t, 0, 0, `${where} precision`);
      fb.int32(t, 1, 0, `${where} scale`);
      const bits = fb.int32(t, 2, 128, `${where} bit width`);
      // Arrow JS 18 reads decimals as 32-bit words; narrower decimals came to the format later.
      if (bits !== 128 && bits !== 256) damaged(`${where} has decimal bit width ${bits}; 128 and 256 are supported`);
      return leaf({ kind: 'fixed', width: bits / 8 });
    }
    case T.Date: {
      const unit = fb.int16(params(), 0, 1, `${where} unit`);
      if (unit !== 0 && unit !== 1) damaged(`${where} has date unit ${unit}`);
      // Arrow JS turns millisecond dates into Numbers and throws past ±2^53.
      return leaf(unit === 0 ? { kind: 'fixed', width: 4 } : { kind: 'fixed', width: 8, range: 'safe' });
    }
    case T.Time: {
      const t = params();
      const unit = fb.int16(t, 0, 1, `${where} unit`);
      const bits = fb.int32(t, 1, 32, `${where} bit width`);
      if (unit < 0 || unit >= TIME_UNITS || bits !== (unit < 2 ? 32 : 64)) {
        damaged(`${where} has time unit ${unit} with bit width ${bits}`);
      }
      return leaf({ kind: 'fixed', width: bits / 8 });
    }
    case T.Timestamp: {
      const t = params();
      const unit = fb.int16(t, 0, 0, `${where} unit`);
      fb.string(t, 1, `${where} time zone`);
      if (unit < 0 || unit >= TIME_UNITS) damaged(`${where} has time unit ${unit}`);
      // Arrow JS reads timestamps as Numbers of milliseconds and throws when that is not a safe integer.
      const range = unit < 2 ? 'safe' : unit === 2 ? 'safe-after-1000' : undefined;
      return leaf(range ? { kind: 'fixed', width: 8, range } : { kind: 'fixed', width: 8 });
    }
    case T.Interval: {
      const unit = fb.int16(params(), 0, 0, `${where} unit`);
      // Arrow JS 18 knows only YEAR_MONTH (4 bytes) and DAY_TIME (8 bytes).
      if (unit !== 0 && unit !== 1) damaged(`${where} has interval unit ${unit}, which is not supported`);
      return leaf({ kind: 'fixed', width: 4 * (unit + 1) });
    }
    case T.List:
      return oneChild({ kind: 'list' });
    case T.Struct:
      return { kind: 'struct' };
    case T.FixedSizeBinary: {
      const width = fb.int32(params(), 0, 0, `${where} byte width`);
      if (width < 0) damaged(`${where} has byte width ${width}`);
      return leaf({ kind: 'fixed', width });
    }
    case T.FixedSizeList: {
      const size = fb.int32(params(), 0, 0, `${where} list size`);
      if (size < 0) damaged(`${where} has list size ${size}`);
      return oneChild({ kind: 'fixed-list', size });
    }
    case T.Map:
      fb.has(params(), 0, `${where} keysSorted`);
      return oneChild({ kind: 'list' });
    case T.Duration: {
      const unit = fb.int16(params(), 0, 1, `${where} unit`);
      if (unit < 0 || unit >= TIME_UNITS) damaged(`${where} has time unit ${unit}`);
      return leaf({ kind: 'fixed', width: 8 });
    }
    default:
      return damaged(`${where} is of type ${typeName(typeId)}, which is not supported`);
  }
}

/** Buffers a field of each layout takes itself: validity first (except Null), then offsets and/or values. */
const OWN_BUFFERS: Record<Layout['kind'], number> = {
  null: 0,
  bool: 2,
  fixed: 2,
  bytes: 3,
  list: 2,
  'fixed-list': 1,
  struct: 1,
  dictionary: 2,
};

/** A stream's schema: its columns, and the value field of each dictionary id (as Arrow JS resolves them). */
interface SchemaSpec {
  fields: FieldSpec[];
  dictionaries: Map<number, FieldSpec>;
}

/** The index side of a dictionary-encoded field, as it appears in record batches. */
function dictionarySpec(fb: Flatbuffer, encoding: Table, path: string, where: string): FieldSpec {
  const id = fb.int64(encoding, 0, `${where} dictionary id`);
  if (!(Math.abs(id) <= SAFE)) damaged(`${where} has dictionary id ${id}`);
  fb.has(encoding, 2, `${where} dictionary ordering`);
  const index = fb.table(encoding, 1, `${where} dictionary index type`);
  const bits = index ? fb.int32(index, 0, 0, `${where} dictionary index bit width`) : 32;
  const signed = index ? fb.uint8(index, 1, 0, `${where} dictionary index signedness`) !== 0 : true;
  // Arrow JS 18 cannot look a BigInt index up in its dictionary ("Cannot mix BigInt and other types").
  if (bits !== 8 && bits !== 16 && bits !== 32)
    damaged(`${where} has ${bits}-bit dictionary indices; 8, 16 and 32 are supported`);
  return {
    path,
    layout: { kind: 'dictionary', id, width: (bits / 8) as 1 | 2 | 4, signed },
    children: [],
    nodes: 1,
    buffers: 2,
  };
}

function fieldSpec(
  fb: Flatbuffer,
  f: Table,
  path: string,
  depth: number,
  dictionaries: Map<number, FieldSpec>,
): FieldSpec {
  const where = `column "${path}"`;
  if (depth > MAX_DEPTH) damaged(`${where} nests deeper than ${MAX_DEPTH} levels`);
  fb.has(f, 1, `${where} nullable flag`);
  checkCustomMetadata(fb, f, 6, where);
  const encoding = fb.table(f, 4, `${where} dictionary encoding`);
  if (encoding) {
    const indices = dictionarySpec(fb, encoding, path, where);
    const { id } = indices.layout as { id: number };
    // As Arrow JS: a later field with a known id takes the first one's values, and its own type is not read.
    if (!dictionaries.has(id)) dictionaries.set(id, valueSpec(fb, f, path, depth, dictionaries, where));
    return indices;
  }
  return valueSpec(fb, f, path, depth, dictionaries, where);
}

/** A field as its values are laid out (for a dictionary-encoded field: the layout of its dictionary). */
function valueSpec(
  fb: Flatbuffer,
  f: Table,
  path: string,
  depth: number,
  dictionaries: Map<number, FieldSpec>,
  where: string,
): FieldSpec {
  const typeId = fb.uint8(f, 2, 0, `${where} type`);
  const kids = fb.vector(f, 5, 4, `${where} children`);
  const children: FieldSpec[] = [];
  for (let i = 0; i < (kids?.length ?? 0); i++) {
    const child = fb.tableIn(kids as Vec, i, `${where} child ${i}`);
    const name = fb.string(child, 0, `${where} child ${i} name`) ?? '';
    children.push(fieldSpec(fb, child, `${path}.${name}`, depth + 1, dictionaries));
  }
  const layout = layoutOf(fb, f, typeId, children.length, where);
  if (typeId === T.Map) {
    const entries = children[0] as FieldSpec;
    if (entries.layout.kind !== 'struct' || entries.children.length !== 2) {
      damaged(`${where}: a map's entries must be a struct of key and value`);
    }
  }
  return {
    path,
    layout,
    children,
    nodes: 1 + children.reduce((n, c) => n + c.nodes, 0),
    buffers: OWN_BUFFERS[layout.kind] + children.reduce((n, c) => n + c.buffers, 0),
  };
}

function schemaSpec(fb: Flatbuffer, schema: Table): SchemaSpec {
  if (fb.int16(schema, 0, 0, 'the schema endianness') !== 0)
    damaged('the schema is big-endian, which is not supported');
  checkCustomMetadata(fb, schema, 2, 'the schema');
  const fields = fb.vector(schema, 1, 4, 'the schema fields');
  const out: SchemaSpec = { fields: [], dictionaries: new Map() };
  for (let i = 0; i < (fields?.length ?? 0); i++) {
    const f = fb.tableIn(fields as Vec, i, `schema field ${i}`);
    out.fields.push(fieldSpec(fb, f, fb.string(f, 0, `schema field ${i} name`) ?? '', 0, out.dictionaries));
  }
  return out;
}

// ── Record batches ──

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

function checkRecordBatch(
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

// ── Messages ──

function startsWithFileMagic(bytes: Uint8Array): boolean {
  return ARROW_FILE_MAGIC.every((b, i) => bytes[i] === b);
}

/** What the messages so far have established; each message is checked against it. */
class StreamState {
  private schema: SchemaSpec | undefined;
  private rows = 0;
  private batches = 0;
  private dictionaryBatches = 0;
  private readonly dictionaryLengths = new Map<number, number>();

  constructor(private readonly maxRows: number) {}

  message(fb: Flatbuffer, headerType: number, header: Table, body: Uint8Array, where: string): void {
    if (headerType === HEADER.Schema) {
      if (this.schema) damaged(`${where} is a second schema`);
      // Arrow JS does not skip a schema message's body; it would read the body as the next message.
      if (body.byteLength !== 0) damaged(`${where} is a schema with a ${body.byteLength}-byte body`);
      this.schema = schemaSpec(fb, header);
      return;
    }
    const schema = this.schema ?? damaged(`${where} comes before any schema`);
    if (headerType === HEADER.RecordBatch) {
      const label = `record batch ${this.batches++}`;
      this.count(checkRecordBatch(fb, header, body, schema.fields, this.maxRows, label, this.dictionaryLengths));
    } else if (headerType === HEADER.DictionaryBatch) {
      const id = fb.int64(header, 0, `${where} dictionary id`);
      const label = `dictionary batch ${this.dictionaryBatches++} (id ${id})`;
      const values = schema.dictionaries.get(id) ?? damaged(`${label}: no column uses dictionary ${id}`);
      const data = fb.table(header, 1, `${label} data`) ?? damaged(`${label} has no record batch`);
      const isDelta = fb.uint8(header, 2, 0, `${label} delta flag`) !== 0;
      const n = checkRecordBatch(fb, data, body, [values], this.maxRows, label, this.dictionaryLengths);
      this.count(n);
      // As Arrow JS: a delta extends the dictionary, anything else replaces it.
      this.dictionaryLengths.set(id, isDelta ? (this.dictionaryLengths.get(id) ?? 0) + n : n);
    } else {
      damaged(`${where} has header type ${headerType}, which a stream of record batches cannot hold`);
    }
  }

  /** Dictionary values count too: like rows, each costs the body at least a bit unless its type is Null. */
  private count(rows: number): void {
    this.rows += rows;
    if (this.rows > this.maxRows) damaged(`its batches hold ${this.rows} rows; this body can hold ${this.maxRows}`);
  }

  finish(): void {
    if (!this.schema) damaged('it holds no schema');
  }
}

function checkStream(bytes: Uint8Array, maxRows: number): void {
  if (bytes.byteLength === 0) damaged('it is empty');
  if (startsWithFileMagic(bytes)) damaged('it is the Arrow IPC file format; send the stream format');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.byteLength;
  const state = new StreamState(maxRows);
  let at = 0;
  for (let index = 0; at < end; index++) {
    const where = `message ${index} (byte ${at})`;
    if (end - at < 4) damaged(`${end - at} stray bytes end the stream`);
    // Arrow JS also reads the pre-0.15 framing, a bare length without the continuation marker.
    let metadataLength = view.getInt32(at, true);
    let prefix = 4;
    if (metadataLength === CONTINUATION) {
      if (end - at < 8) damaged(`the stream ends inside ${where}'s length prefix`);
      metadataLength = view.getInt32(at + 4, true);
      prefix = 8;
    }
    if (metadataLength === 0) {
      if (at + prefix !== end) damaged(`${end - at - prefix} bytes follow the end-of-stream marker`);
      break;
    }
    const metaStart = at + prefix;
    if (metadataLength < 0 || metadataLength > end - metaStart) {
      damaged(`${where} claims ${metadataLength} bytes of metadata; ${end - metaStart} remain`);
    }
    const fb = new Flatbuffer(bytes.subarray(metaStart, metaStart + metadataLength));
    const message = fb.root();
    const version = fb.int16(message, 0, 0, `${where} version`);
    // Arrow JS reads older metadata with another buffer layout; nothing current writes it.
    if (version !== METADATA_V4 && version !== METADATA_V5) {
      damaged(`${where} has metadata version V${version + 1}; V4 and V5 are supported`);
    }
    const headerType = fb.uint8(message, 1, 0, `${where} header type`);
    const header = fb.table(message, 2, `${where} header`) ?? damaged(`${where} has no header`);
    const bodyLength = fb.int64(message, 3, `${where} body length`);
    const bodyStart = metaStart + metadataLength;
    if (!(bodyLength >= 0 && bodyLength <= end - bodyStart)) {
      damaged(`${where} claims a ${bodyLength}-byte body; ${end - bodyStart} bytes remain`);
    }
    state.message(fb, headerType, header, bytes.subarray(bodyStart, bodyStart + bodyLength), where);
    at = bodyStart + bodyLength;
  }
  state.finish();
}
