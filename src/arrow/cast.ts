import type { Data, DataType, Field } from 'apache-arrow';
import { arrow } from './arrow.js';
import { intRange, UNITS_PER_SECOND, ValueError } from './from-json.js';

const { Type, Precision } = arrow;

/** A column of `n` nulls of any type. */
export function nullData(type: DataType, n: number): Data {
  const allNull = { length: n, nullCount: n, nullBitmap: new Uint8Array(Math.ceil(n / 8)) };
  // Arrow JS's builders append no child values for a null list entry; Arrow (and Lance) require
  // `listSize` child slots per entry, null or not, and a child per struct field of the struct's length.
  if (type.typeId === Type.FixedSizeList) {
    const list = type as InstanceType<typeof arrow.FixedSizeList>;
    const child = list.children[0]?.type as DataType;
    return arrow.makeData({ ...allNull, type: list, child: filler(child, n * list.listSize) });
  }
  if (type.typeId === Type.Struct) {
    const struct = type as InstanceType<typeof arrow.Struct>;
    return arrow.makeData({ ...allNull, type: struct, children: struct.children.map((f) => nullData(f.type, n)) });
  }
  const builder = arrow.makeBuilder({ type, nullValues: [null, undefined] });
  for (let i = 0; i < n; i++) builder.append(null);
  return builder.finish().flush();
}

/** Child slots under null parents: zeros where the type is a plain number (a vector's floats), else nulls. */
function filler(type: DataType, n: number): Data {
  if (type.typeId === Type.Float || type.typeId === Type.Int) {
    const numeric = type as InstanceType<typeof arrow.Float>;
    return arrow.makeData({ type: numeric, length: n, nullCount: 0, data: new numeric.ArrayType(n) as never });
  }
  return nullData(type, n);
}

// Arrow JS slices value and offset buffers along with Data: index them from 0; `offset` is for validity bits.
const sameType = (a: DataType, b: DataType): boolean => a.typeId === b.typeId && String(a) === String(b);

const isNumeric = (t: DataType) => t.typeId === Type.Int || t.typeId === Type.Float;
const isString = (t: DataType) => t.typeId === Type.Utf8 || t.typeId === Type.LargeUtf8;
const isBinary = (t: DataType) => t.typeId === Type.Binary || t.typeId === Type.LargeBinary;

function firstNull(data: Data): number {
  for (let i = 0; i < data.length; i++) if (!data.getValid(i)) return i;
  return -1;
}

/** The value at `i` of a numeric column as number or bigint (half floats decoded). */
function numericAt(data: Data, i: number): number | bigint {
  const raw = (data.values as ArrayLike<number | bigint>)[i] as number | bigint;
  const type = data.type as DataType;
  if (type.typeId === Type.Float && (type as InstanceType<typeof arrow.Float>).precision === Precision.HALF) {
    return arrow.util.uint16ToFloat64(raw as number);
  }
  return raw;
}

function castNumeric(data: Data, target: DataType, path: string): Data {
  const n = data.length;
  const fail = (i: number, v: number | bigint): never => {
    throw new ValueError(i, path, `${String(v)} cannot be stored as ${String(target)} without loss`);
  };
  if (target.typeId === Type.Int) {
    const t = target as InstanceType<typeof arrow.Int>;
    const [lo, hi] = intRange(t);
    const out = new t.ArrayType(n);
    for (let i = 0; i < n; i++) {
      if (!data.getValid(i)) continue;
      const v = numericAt(data, i);
      if (typeof v === 'number' && !Number.isInteger(v)) fail(i, v);
      const big = typeof v === 'bigint' ? v : BigInt(v);
      if (big < lo || big > hi) fail(i, v);
      out[i] = (t.bitWidth === 64 ? big : Number(big)) as never;
    }
    return arrow.makeData({
      type: t,
      length: n,
      nullCount: data.nullCount,
      nullBitmap: rebasedBitmap(data),
      data: out,
    });
  }
  const t = target as InstanceType<typeof arrow.Float>;
  const out =
    t.precision === Precision.HALF
      ? new Uint16Array(n)
      : t.precision === Precision.SINGLE
        ? new Float32Array(n)
        : new Float64Array(n);
  for (let i = 0; i < n; i++) {
    if (!data.getValid(i)) continue;
    const v = numericAt(data, i);
    const num = Number(v);
    if (typeof v === 'bigint' && BigInt(num) !== v) fail(i, v);
    if (t.precision === Precision.HALF) {
      const half = arrow.util.float64ToUint16(num);
      if (!Number.isNaN(num) && arrow.util.uint16ToFloat64(half) !== num) fail(i, v);
      out[i] = half;
    } else {
      if (t.precision === Precision.SINGLE && !Number.isNaN(num) && Math.fround(num) !== num) fail(i, v);
      out[i] = num;
    }
  }
  return arrow.makeData({ type: t, length: n, nullCount: data.nullCount, nullBitmap: rebasedBitmap(data), data: out });
}

/** The validity bitmap re-based to offset 0, or undefined when nothing is null. */
export function rebasedBitmap(data: Data): Uint8Array | undefined {
  if (data.nullCount === 0) return undefined;
  const out = new Uint8Array(Math.ceil(data.length / 8));
  for (let i = 0; i < data.length; i++) if (data.getValid(i)) out[i >> 3] = (out[i >> 3] ?? 0) | (1 << (i & 7));
  return out;
}

function castVariable(data: Data, target: DataType): Data {
  const n = data.length;
  const offsets = data.valueOffsets as Int32Array | BigInt64Array;
  const start = Number(offsets[0]);
  const end = Number(offsets[n]);
  const large = target.typeId === Type.LargeUtf8 || target.typeId === Type.LargeBinary;
  const out = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
  for (let i = 0; i <= n; i++) {
    const v = Number(offsets[i]) - start;
    out[i] = (large ? BigInt(v) : v) as never;
  }
  const bytes = (data.values as Uint8Array).subarray(start, end);
  return arrow.makeData({
    type: target as never,
    length: n,
    nullCount: data.nullCount,
    nullBitmap: rebasedBitmap(data),
    valueOffsets: out as never,
    data: bytes,
  });
}

function castTimestamp(data: Data, target: InstanceType<typeof arrow.Timestamp>, path: string): Data {
  const source = data.type as InstanceType<typeof arrow.Timestamp>;
  const from = UNITS_PER_SECOND[source.unit] ?? 1000n;
  const to = UNITS_PER_SECOND[target.unit] ?? 1000n;
  const n = data.length;
  const out = new BigInt64Array(n);
  const values = data.values as BigInt64Array;
  for (let i = 0; i < n; i++) {
    if (!data.getValid(i)) continue;
    const v = (values[i] ?? 0n) * to;
    if (v % from !== 0n) throw new ValueError(i, path, `timestamp cannot be stored in ${String(target)} without loss`);
    out[i] = v / from;
  }
  return arrow.makeData({
    type: target,
    length: n,
    nullCount: data.nullCount,
    nullBitmap: rebasedBitmap(data),
    data: out as never,
  });
}

/** UTC and "no zone" both mean UTC instants here; other zones must match exactly. */
const sameZone = (a: string | null | undefined, b: string | null | undefined) =>
  (a ?? 'UTC') === (b ?? 'UTC') || ((a ?? 'UTC').toUpperCase() === 'UTC' && (b ?? 'UTC').toUpperCase() === 'UTC');

/**
 * A column of an Arrow body → the table's type, only where no value changes (docs/api.md): widening ints, exact
 * float narrowing (f64 vectors into f32 columns), string/binary widths, timestamp units, list shapes, struct
 * fields by name. Anything else, or a null in a non-nullable column, throws `ValueError`.
 */
export function castData(data: Data, target: Field, path: string = target.name): Data {
  const from = data.type as DataType;
  const to = target.type as DataType;
  if (!target.nullable && data.nullCount > 0) {
    throw new ValueError(firstNull(data), path, 'is null and the column is not nullable');
  }
  if (
    sameType(from, to) &&
    from.typeId !== Type.Struct &&
    from.typeId !== Type.List &&
    from.typeId !== Type.FixedSizeList
  ) {
    return data;
  }
  if (from.typeId === Type.Null) {
    return nullData(to, data.length);
  }
  if (isNumeric(from) && isNumeric(to)) return sameType(from, to) ? data : castNumeric(data, to, path);
  if ((isString(from) && isString(to)) || (isBinary(from) && isBinary(to))) return castVariable(data, to);
  if (from.typeId === Type.Timestamp && to.typeId === Type.Timestamp) {
    const t = to as InstanceType<typeof arrow.Timestamp>;
    if (sameZone((from as InstanceType<typeof arrow.Timestamp>).timezone, t.timezone))
      return castTimestamp(data, t, path);
  }
  if (to.typeId === Type.FixedSizeList && (from.typeId === Type.FixedSizeList || from.typeId === Type.List)) {
    return castToFixedList(data, target, path);
  }
  if (to.typeId === Type.List && from.typeId === Type.List) {
    const offsets = data.valueOffsets as Int32Array;
    const start = offsets[0] ?? 0;
    const end = offsets[data.length] ?? 0;
    const childField = (to as InstanceType<typeof arrow.List>).children[0] as Field;
    const child = castData((data.children[0] as Data).slice(start, end - start), childField, `${path}[]`);
    const rebased = Int32Array.from(offsets.subarray(0, data.length + 1), (o) => o - start);
    return arrow.makeData({
      type: to as InstanceType<typeof arrow.List>,
      length: data.length,
      nullCount: data.nullCount,
      nullBitmap: rebasedBitmap(data),
      valueOffsets: rebased,
      child,
    });
  }
  if (to.typeId === Type.Struct && from.typeId === Type.Struct) {
    const sourceFields = (from as InstanceType<typeof arrow.Struct>).children;
    const children = (to as InstanceType<typeof arrow.Struct>).children.map((field) => {
      const at = sourceFields.findIndex((f) => f.name === field.name);
      if (at < 0) {
        if (!field.nullable)
          throw new ValueError(0, `${path}.${field.name}`, 'is missing and the field is not nullable');
        return nullData(field.type, data.length);
      }
      return castData(data.children[at] as Data, field, `${path}.${field.name}`);
    });
    const unknown = sourceFields.find(
      (f) => !(to as InstanceType<typeof arrow.Struct>).children.some((t) => t.name === f.name),
    );
    if (unknown !== undefined) throw new ValueError(0, path, `has unknown field "${unknown.name}"`);
    return arrow.makeData({
      type: to as InstanceType<typeof arrow.Struct>,
      length: data.length,
      nullCount: data.nullCount,
      nullBitmap: rebasedBitmap(data),
      children,
    });
  }
  throw new ValueError(
    0,
    path,
    `is ${String(from)} in the body and ${String(to)} in the table; it cannot be converted without loss`,
  );
}

/**
 * Whether `values[0, end)` are all finite: NaN and ±Infinity times 0 are NaN, which a sum keeps. Four sums, no
 * branch and no call per item, as every float of every vector appended passes here.
 */
function allFinite(values: Float32Array | Float64Array, end: number): boolean {
  let a = 0;
  let b = 0;
  let c = 0;
  let d = 0;
  let j = 0;
  for (; j + 3 < end; j += 4) {
    a += (values[j] as number) * 0;
    b += (values[j + 1] as number) * 0;
    c += (values[j + 2] as number) * 0;
    d += (values[j + 3] as number) * 0;
  }
  for (; j < end; j++) a += (values[j] as number) * 0;
  return a + b + c + d === 0;
}

/**
 * Vectors hold finite numbers only (docs/api.md says so of JSON; Lance refuses NaN in a vector column outright).
 * Items of null rows are not looked at: they are filler.
 */
function checkFiniteItems(list: Data, items: Data, size: number, path: string): void {
  const values = items.values as Float32Array | Float64Array | Uint16Array;
  const half = values instanceof Uint16Array;
  if (!half && list.nullCount === 0 && items.nullCount === 0 && allFinite(values, list.length * size)) return;
  // v - v is 0 for every finite number and NaN for NaN and ±Infinity.
  const finite = (v: number) => (half ? (v & 0x7c00) !== 0x7c00 : v - v === 0);
  for (let row = 0; row < list.length; row++) {
    if (!list.getValid(row)) continue;
    for (let j = row * size; j < (row + 1) * size; j++) {
      if (finite(values[j] as number) || (items.nullCount > 0 && !items.getValid(j))) continue;
      const v = values[j] ?? 0;
      throw new ValueError(
        row,
        path,
        `item ${j - row * size} is ${half ? 'not finite' : String(v)}; vectors hold finite numbers only`,
      );
    }
  }
}

/** The row of a list whose items hold item `index`, counted from the first row's first item. */
function rowOfItem(list: Data, index: number): number {
  const offsets = list.valueOffsets as Int32Array;
  const at = (offsets[0] ?? 0) + index;
  let row = 0;
  while (row + 1 < list.length && (offsets[row + 1] ?? 0) <= at) row++;
  return row;
}

/**
 * The items of a list's rows laid out `size` to a row, as a fixed-size list holds them: each valid row's items
 * where its row starts, zeros under a null row that held none.
 */
function spreadRows(items: Data, list: Data, size: number, path: string): Data {
  if (items.nullCount > 0) {
    throw new ValueError(0, path, `null rows must hold no items or exactly ${size} when items are null`);
  }
  const values = items.values as Float32Array | Float64Array | Uint16Array;
  const out = new (values.constructor as Float32ArrayConstructor)(list.length * size);
  const offsets = list.valueOffsets as Int32Array;
  const first = offsets[0] ?? 0;
  for (let row = 0; row < list.length; row++) {
    const from = (offsets[row] ?? 0) - first;
    if ((offsets[row + 1] ?? 0) - first - from === size) out.set(values.subarray(from, from + size), row * size);
  }
  return arrow.makeData({ type: items.type as InstanceType<typeof arrow.Float>, length: out.length, data: out });
}

function castToFixedList(data: Data, target: Field, path: string): Data {
  const to = target.type as InstanceType<typeof arrow.FixedSizeList>;
  const size = to.listSize;
  const n = data.length;
  const from = data.type as DataType;
  let child: Data;
  if (from.typeId === Type.FixedSizeList) {
    const width = (from as InstanceType<typeof arrow.FixedSizeList>).listSize;
    if (width !== size)
      throw new ValueError(0, path, `has ${width} items per row in the body; the column holds ${size}`);
    const whole = data.children[0] as Data;
    child = whole.length === n * size ? whole : whole.slice(0, n * size);
  } else {
    const offsets = data.valueOffsets as Int32Array;
    for (let i = 0; i < n; i++) {
      const len = (offsets[i + 1] ?? 0) - (offsets[i] ?? 0);
      if (data.getValid(i) && len !== size)
        throw new ValueError(i, path, `has ${len} items; the column holds exactly ${size}`);
      if (!data.getValid(i) && len !== 0 && len !== size) throw new ValueError(i, path, `null row spans ${len} items`);
    }
    const start = offsets[0] ?? 0;
    child = (data.children[0] as Data).slice(start, (offsets[n] ?? 0) - start);
  }
  const childField = to.children[0] as Field;
  // A null row of a list may hold no items, where a fixed-size list holds `size` for every row.
  const spread = child.length !== n * size;
  let cast: Data;
  try {
    cast = castData(child, childField, `${path}[]`);
  } catch (err) {
    if (!(err instanceof ValueError)) throw err;
    const row = spread ? rowOfItem(data, err.index) : Math.floor(err.index / size);
    throw new ValueError(row, err.path, err.message);
  }
  if (spread) cast = spreadRows(cast, data, size, path);
  if (cast.type.typeId === Type.Float) checkFiniteItems(data, cast, size, path);
  return arrow.makeData({
    type: to,
    length: n,
    nullCount: data.nullCount,
    nullBitmap: rebasedBitmap(data),
    child: cast,
  });
}
