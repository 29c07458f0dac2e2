import type { Data, DataType, Field } from 'apache-arrow';
import { arrow } from './arrow.js';

const { Type, TimeUnit, Precision } = arrow;

/** A value that does not fit its column; `index` is the position among the values given. */
export class ValueError extends Error {
  constructor(
    readonly index: number,
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

const encoder = new TextEncoder();
/** Strict base64 (RFC 4648, padded): Node's decoder silently skips what it does not understand. */
export const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}:\d{2})$/;
const DECIMAL_INT = /^-?\d+$/;
const MS_PER_DAY = 86_400_000;

/** The smallest and largest value of an Arrow integer type. */
export function intRange(type: DataType): [bigint, bigint] {
  const t = type as InstanceType<typeof arrow.Int>;
  const bits = BigInt(t.bitWidth);
  return t.isSigned ? [-(2n ** (bits - 1n)), 2n ** (bits - 1n) - 1n] : [0n, 2n ** bits - 1n];
}

const describe = (value: unknown): string => {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `"${value.length > 40 ? `${value.slice(0, 40)}…` : value}"`;
  if (typeof value === 'object') return 'an object';
  return String(value);
};

/** Days since the epoch of a `YYYY-MM-DD` that names a real date, else undefined. */
export function parseDate(text: string): number | undefined {
  const m = DATE.exec(text);
  if (m === null) return undefined;
  const ms = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  if (new Date(ms).toISOString().slice(0, 10) !== text) return undefined;
  return ms / MS_PER_DAY;
}

/** Units per second of each Arrow time unit. */
export const UNITS_PER_SECOND: Readonly<Record<number, bigint>> = {
  [TimeUnit.SECOND]: 1n,
  [TimeUnit.MILLISECOND]: 1000n,
  [TimeUnit.MICROSECOND]: 1_000_000n,
  [TimeUnit.NANOSECOND]: 1_000_000_000n,
};

/** An RFC 3339 timestamp → integer count of `unit` since the epoch; undefined when unparsable or inexact. */
export function parseTimestamp(text: string, unit: number): bigint | undefined {
  const m = RFC3339.exec(text);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as number[];
  const ms = Date.UTC(year ?? 0, (month ?? 1) - 1, day ?? 1, hour ?? 0, minute ?? 0, second ?? 0);
  const check = new Date(ms).toISOString();
  if (check.slice(0, 19) !== `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}`) return undefined;
  const fraction = (m[7] ?? '').padEnd(9, '0');
  let nanos = BigInt(ms / 1000) * 1_000_000_000n + BigInt(fraction);
  const zone = m[8] ?? 'Z';
  if (zone !== 'Z' && zone !== 'z') {
    const sign = zone.startsWith('-') ? -1n : 1n;
    const offsetMinutes = BigInt(Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6)));
    nanos -= sign * offsetMinutes * 60_000_000_000n;
  }
  const per = 1_000_000_000n / (UNITS_PER_SECOND[unit] ?? 1000n);
  if (nanos % per !== 0n) return undefined;
  return nanos / per;
}

/** A JSON integer (or, for 64-bit columns, a decimal string) as a bigint, or undefined. */
function integerOf(value: unknown, allowString: boolean): bigint | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : undefined;
  if (allowString && typeof value === 'string' && DECIMAL_INT.test(value)) return BigInt(value);
  return undefined;
}

const SPECIAL_FLOATS: Readonly<Record<string, number>> = {
  NaN: Number.NaN,
  Infinity: Infinity,
  '-Infinity': -Infinity,
};

function floatOf(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value === 'string') return SPECIAL_FLOATS[value];
  return undefined;
}

interface Column {
  type: DataType;
  nullable: boolean;
  path: string;
  /** Elements whose parent is null: they are null whatever the column's nullability. */
  parentNull?: Uint8Array;
}

/**
 * JSON values → Arrow `Data` of one column, checking every value (docs/api.md). Throws `ValueError` at the first
 * value that does not fit, with its index and the column path (`tags[2]`, `address.city`).
 */
export function dataFromJson(field: Field, values: readonly unknown[]): Data {
  return build({ type: field.type, nullable: field.nullable, path: field.name }, values);
}

function build(col: Column, values: readonly unknown[]): Data {
  const n = values.length;
  const bitmap = new Uint8Array(Math.ceil(n / 8));
  let nullCount = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v === null || v === undefined) {
      if (!col.nullable && col.parentNull?.[i] !== 1) {
        throw new ValueError(
          i,
          col.path,
          v === undefined ? 'is missing and the column is not nullable' : 'is null and the column is not nullable',
        );
      }
      nullCount++;
    } else {
      bitmap[i >> 3] = (bitmap[i >> 3] ?? 0) | (1 << (i & 7));
    }
  }
  const valid = (i: number) => values[i] !== null && values[i] !== undefined;
  const base = { type: col.type, length: n, nullCount, nullBitmap: nullCount === 0 ? undefined : bitmap };
  const fail = (i: number, expected: string): never => {
    throw new ValueError(i, col.path, `must be ${expected}, got ${describe(values[i])}`);
  };
  const type = col.type;

  switch (type.typeId) {
    case Type.Bool: {
      const bits = new Uint8Array(Math.ceil(n / 8));
      for (let i = 0; i < n; i++) {
        if (!valid(i)) continue;
        const v = values[i];
        if (typeof v !== 'boolean') fail(i, 'true or false');
        if (v === true) bits[i >> 3] = (bits[i >> 3] ?? 0) | (1 << (i & 7));
      }
      return arrow.makeData({ ...base, type: type as InstanceType<typeof arrow.Bool>, data: bits });
    }
    case Type.Int: {
      const [lo, hi] = intRange(type);
      const wide = (type as InstanceType<typeof arrow.Int>).bitWidth === 64;
      const out = new (type as InstanceType<typeof arrow.Int>).ArrayType(n);
      for (let i = 0; i < n; i++) {
        if (!valid(i)) continue;
        const v = integerOf(values[i], wide);
        if (v === undefined || v < lo || v > hi) {
          fail(i, `an integer from ${lo} to ${hi}${wide ? ' (a decimal string beyond 2^53)' : ''}`);
        }
        out[i] = (wide ? v : Number(v)) as never;
      }
      return arrow.makeData({ ...base, type: type as InstanceType<typeof arrow.Int>, data: out });
    }
    case Type.Float: {
      const precision = (type as InstanceType<typeof arrow.Float>).precision;
      const out =
        precision === Precision.HALF
          ? new Uint16Array(n)
          : precision === Precision.SINGLE
            ? new Float32Array(n)
            : new Float64Array(n);
      for (let i = 0; i < n; i++) {
        if (!valid(i)) continue;
        const v = floatOf(values[i]);
        if (v === undefined) fail(i, 'a number (or "NaN", "Infinity", "-Infinity")');
        out[i] = precision === Precision.HALF ? arrow.util.float64ToUint16(v as number) : (v as number);
      }
      return arrow.makeData({ ...base, type: type as InstanceType<typeof arrow.Float>, data: out });
    }
    case Type.Utf8:
    case Type.LargeUtf8:
    case Type.Binary:
    case Type.LargeBinary: {
      const text = type.typeId === Type.Utf8 || type.typeId === Type.LargeUtf8;
      const chunks: Uint8Array[] = [];
      let total = 0;
      for (let i = 0; i < n; i++) {
        if (!valid(i)) {
          chunks.push(new Uint8Array());
          continue;
        }
        const v = values[i];
        if (typeof v !== 'string') fail(i, text ? 'a string' : 'a base64 string');
        if (!text && !BASE64.test(v as string)) fail(i, 'a base64 string');
        const bytes = text ? encoder.encode(v as string) : Buffer.from(v as string, 'base64');
        chunks.push(bytes);
        total += bytes.length;
      }
      const large = type.typeId === Type.LargeUtf8 || type.typeId === Type.LargeBinary;
      const data = new Uint8Array(total);
      const offsets = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
      if (!large && total > 2 ** 31 - 1) fail(n - 1, 'under 2 GiB in one request for this column type');
      let at = 0;
      chunks.forEach((bytes, i) => {
        data.set(bytes, at);
        at += bytes.length;
        offsets[i + 1] = (large ? BigInt(at) : at) as never;
      });
      return arrow.makeData({ ...base, type: type as never, data, valueOffsets: offsets as never });
    }
    case Type.Date: {
      if ((type as InstanceType<typeof arrow.Date_>).unit !== arrow.DateUnit.DAY) break;
      const out = new Int32Array(n);
      for (let i = 0; i < n; i++) {
        if (!valid(i)) continue;
        const v = values[i];
        const days = typeof v === 'string' ? parseDate(v) : undefined;
        if (days === undefined) fail(i, 'a date "YYYY-MM-DD"');
        out[i] = days as number;
      }
      return arrow.makeData({ ...base, type: type as InstanceType<typeof arrow.DateDay>, data: out });
    }
    case Type.Timestamp: {
      const unit = (type as InstanceType<typeof arrow.Timestamp>).unit;
      const out = new BigInt64Array(n);
      for (let i = 0; i < n; i++) {
        if (!valid(i)) continue;
        const v = values[i];
        const parsed = typeof v === 'string' && !DECIMAL_INT.test(v) ? parseTimestamp(v, unit) : integerOf(v, true);
        if (parsed === undefined || parsed < -(2n ** 63n) || parsed >= 2n ** 63n) {
          fail(
            i,
            `an RFC 3339 timestamp (exact to the column's ${TimeUnit[unit].toLowerCase()}) or an integer count of them`,
          );
        }
        out[i] = parsed as bigint;
      }
      return arrow.makeData({ ...base, type: type as InstanceType<typeof arrow.Timestamp>, data: out as never });
    }
    case Type.FixedSizeList: {
      const list = type as InstanceType<typeof arrow.FixedSizeList>;
      const size = list.listSize;
      const child = list.children[0] as Field;
      const isVector = child.type.typeId === Type.Float;
      const flat: unknown[] = new Array(n * size);
      const parentNull = new Uint8Array(n * size);
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (!valid(i)) {
          parentNull.fill(1, i * size, (i + 1) * size);
          flat.fill(isVector ? 0 : null, i * size, (i + 1) * size);
          continue;
        }
        if (!Array.isArray(v) || v.length !== size) {
          fail(i, `an array of exactly ${size} ${isVector ? 'finite numbers' : 'values'}`);
        }
        const items = v as unknown[];
        for (let j = 0; j < size; j++) {
          const item = items[j];
          if (isVector && (typeof item !== 'number' || !Number.isFinite(item))) {
            throw new ValueError(
              i,
              col.path,
              `must be an array of exactly ${size} finite numbers; item ${j} is ${describe(item)}`,
            );
          }
          flat[i * size + j] = item;
        }
      }
      const childData = nested(
        { type: child.type, nullable: child.nullable, path: `${col.path}[]`, parentNull },
        flat,
        (j) => Math.floor(j / size),
      );
      return arrow.makeData({ ...base, type: list, child: childData });
    }
    case Type.List: {
      const list = type as InstanceType<typeof arrow.List>;
      const child = list.children[0] as Field;
      const offsets = new Int32Array(n + 1);
      const flat: unknown[] = [];
      const owners: number[] = [];
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (valid(i)) {
          if (!Array.isArray(v)) fail(i, 'an array');
          for (const item of v as unknown[]) {
            flat.push(item);
            owners.push(i);
          }
        }
        offsets[i + 1] = flat.length;
      }
      const childData = nested(
        { type: child.type, nullable: child.nullable, path: `${col.path}[]` },
        flat,
        (j) => owners[j] ?? 0,
      );
      return arrow.makeData({ ...base, type: list, valueOffsets: offsets, child: childData });
    }
    case Type.Struct: {
      const struct = type as InstanceType<typeof arrow.Struct>;
      const names = new Set(struct.children.map((f) => f.name));
      const parentNull = new Uint8Array(n);
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (!valid(i)) {
          parentNull[i] = 1;
          continue;
        }
        if (typeof v !== 'object' || Array.isArray(v)) fail(i, 'an object');
        for (const key of Object.keys(v as object)) {
          if (!names.has(key)) throw new ValueError(i, col.path, `has unknown field "${key}"`);
        }
      }
      const children = struct.children.map((f) =>
        nested(
          { type: f.type, nullable: f.nullable, path: `${col.path}.${f.name}`, parentNull },
          values.map((v) =>
            v === null || v === undefined || !Object.hasOwn(v as object, f.name)
              ? undefined
              : (v as Record<string, unknown>)[f.name],
          ),
          (j) => j,
        ),
      );
      return arrow.makeData({ ...base, type: struct, children });
    }
    default:
      break;
  }
  throw new ValueError(
    values.findIndex((v) => v !== null && v !== undefined),
    col.path,
    `is of type ${String(type)}, which JSON bodies cannot write; send an Arrow IPC stream`,
  );
}

/** Builds a child column, reporting errors at the index of the parent row that holds the bad item. */
function nested(col: Column, values: readonly unknown[], owner: (j: number) => number): Data {
  try {
    return build(col, values);
  } catch (err) {
    if (err instanceof ValueError) throw new ValueError(owner(err.index), err.path, err.message);
    throw err;
  }
}
