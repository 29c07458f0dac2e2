import type { Data, DataType, RecordBatch, Table } from 'apache-arrow';
import { arrow } from './arrow.js';
import { UNITS_PER_SECOND } from './from-json.js';

const { Type, Precision } = arrow;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const MS_PER_DAY = 86_400_000;
const decoder = new TextDecoder();

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** 64-bit integers stay numbers while exact (±2^53) and become decimal strings beyond (API.md §7). */
function int64(value: bigint): number | string {
  return value <= MAX_SAFE && value >= -MAX_SAFE ? Number(value) : value.toString();
}

function float(value: number): number | string {
  if (Number.isFinite(value)) return value;
  return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
}

/** RFC 3339 in UTC with `Z`, with as many fraction digits as the unit carries. */
export function formatTimestamp(value: bigint, unit: number): string {
  const per = UNITS_PER_SECOND[unit] ?? 1000n;
  let seconds = value / per;
  let fraction = value % per;
  if (fraction < 0n) {
    fraction += per;
    seconds -= 1n;
  }
  const iso = new Date(Number(seconds) * 1000).toISOString().slice(0, 19);
  const digits = per.toString().length - 1;
  return digits === 0 ? `${iso}Z` : `${iso}.${fraction.toString().padStart(digits, '0')}Z`;
}

function decimalString(words: Uint32Array, at: number, wordsPer: number, scale: number): string {
  let value = 0n;
  for (let w = wordsPer - 1; w >= 0; w--) value = (value << 32n) | BigInt(words[at * wordsPer + w] ?? 0);
  const bits = BigInt(wordsPer * 32);
  if (value >> (bits - 1n) === 1n) value -= 1n << bits;
  const negative = value < 0n;
  let digits = (negative ? -value : value).toString();
  if (scale > 0) {
    digits = digits.padStart(scale + 1, '0');
    digits = `${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
  } else if (scale < 0) {
    digits = digits + '0'.repeat(-scale);
  }
  return negative ? `-${digits}` : digits;
}

/** One column chunk → JSON values, one per row (null where invalid). */
export function dataToJson(data: Data): JsonValue[] {
  const n = data.length;
  const out: JsonValue[] = new Array(n);
  const type = data.type as DataType;
  // Arrow JS slices value and offset buffers when it slices Data; `offset` only still applies to validity
  // bits and to bit-packed booleans. Children of fixed-size lists and structs are sliced with the parent.
  const off = data.offset;
  const values = data.values as ArrayLike<number | bigint> & { subarray?: unknown };
  const isValid = (i: number) => data.nullCount === 0 || data.getValid(i);

  switch (type.typeId) {
    case Type.Null:
      return out.fill(null);
    case Type.Bool:
      for (let i = 0; i < n; i++) {
        const bit = off + i;
        out[i] = isValid(i) ? ((data.values[bit >> 3] ?? 0) & (1 << (bit & 7))) !== 0 : null;
      }
      return out;
    case Type.Int:
    case Type.Time:
    case Type.Duration:
      for (let i = 0; i < n; i++) {
        if (!isValid(i)) {
          out[i] = null;
          continue;
        }
        const v = values[i] as number | bigint;
        out[i] = typeof v === 'bigint' ? int64(v) : v;
      }
      return out;
    case Type.Float: {
      const half = (type as InstanceType<typeof arrow.Float>).precision === Precision.HALF;
      for (let i = 0; i < n; i++) {
        const raw = values[i] as number;
        out[i] = isValid(i) ? float(half ? arrow.util.uint16ToFloat64(raw) : raw) : null;
      }
      return out;
    }
    case Type.Utf8:
    case Type.LargeUtf8:
    case Type.Binary:
    case Type.LargeBinary: {
      const text = type.typeId === Type.Utf8 || type.typeId === Type.LargeUtf8;
      const offsets = data.valueOffsets as Int32Array | BigInt64Array;
      const bytes = data.values as Uint8Array;
      for (let i = 0; i < n; i++) {
        if (!isValid(i)) {
          out[i] = null;
          continue;
        }
        const slice = bytes.subarray(Number(offsets[i]), Number(offsets[i + 1]));
        out[i] = text
          ? decoder.decode(slice)
          : Buffer.from(slice.buffer, slice.byteOffset, slice.length).toString('base64');
      }
      return out;
    }
    case Type.FixedSizeBinary: {
      const width = (type as InstanceType<typeof arrow.FixedSizeBinary>).byteWidth;
      const bytes = data.values as Uint8Array;
      for (let i = 0; i < n; i++) {
        out[i] = isValid(i) ? Buffer.from(bytes.buffer, bytes.byteOffset + i * width, width).toString('base64') : null;
      }
      return out;
    }
    case Type.Date: {
      const days = (type as InstanceType<typeof arrow.Date_>).unit === arrow.DateUnit.DAY;
      for (let i = 0; i < n; i++) {
        const v = Number(values[i]);
        out[i] = isValid(i) ? new Date(days ? v * MS_PER_DAY : v).toISOString().slice(0, days ? 10 : 24) : null;
      }
      return out;
    }
    case Type.Timestamp: {
      const unit = (type as InstanceType<typeof arrow.Timestamp>).unit;
      const stamps = data.values as BigInt64Array;
      for (let i = 0; i < n; i++) out[i] = isValid(i) ? formatTimestamp(stamps[i] ?? 0n, unit) : null;
      return out;
    }
    case Type.Decimal: {
      const t = type as InstanceType<typeof arrow.Decimal>;
      const wordsPer = t.bitWidth / 32;
      for (let i = 0; i < n; i++) {
        out[i] = isValid(i) ? decimalString(data.values as Uint32Array, i, wordsPer, t.scale) : null;
      }
      return out;
    }
    case Type.FixedSizeList: {
      const size = (type as InstanceType<typeof arrow.FixedSizeList>).listSize;
      const child = data.children[0] as Data;
      const items = dataToJson(child.length === n * size ? child : child.slice(0, n * size));
      for (let i = 0; i < n; i++) out[i] = isValid(i) ? items.slice(i * size, (i + 1) * size) : null;
      return out;
    }
    case Type.List: {
      const offsets = data.valueOffsets as Int32Array | BigInt64Array;
      const start = Number(offsets[0]);
      const child = data.children[0] as Data;
      const items = dataToJson(child.slice(start, Number(offsets[n]) - start));
      for (let i = 0; i < n; i++) {
        out[i] = isValid(i) ? items.slice(Number(offsets[i]) - start, Number(offsets[i + 1]) - start) : null;
      }
      return out;
    }
    case Type.Struct: {
      const fields = (type as InstanceType<typeof arrow.Struct>).children;
      const columns = data.children.map((child) => dataToJson(child as Data));
      for (let i = 0; i < n; i++) {
        if (!isValid(i)) {
          out[i] = null;
          continue;
        }
        const row: { [key: string]: JsonValue } = {};
        fields.forEach((f, j) => {
          row[f.name] = columns[j]?.[i] ?? null;
        });
        out[i] = row;
      }
      return out;
    }
    case Type.Dictionary: {
      const dictionary = data.dictionary;
      const decoded = dictionary === undefined ? [] : dictionary.data.flatMap((chunk) => dataToJson(chunk as Data));
      for (let i = 0; i < n; i++) out[i] = isValid(i) ? (decoded[Number(values[i])] ?? null) : null;
      return out;
    }
    default:
      break;
  }
  // Anything else (map, union, interval): Arrow's own JSON-able reading of the value.
  const vector = arrow.makeVector(data);
  for (let i = 0; i < n; i++) {
    const v = vector.get(i) as unknown;
    out[i] =
      v === null || v === undefined
        ? null
        : (JSON.parse(JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x))) as JsonValue);
  }
  return out;
}

/** Record batches → row objects keyed by column name. */
export function rowsToJson(source: Table | readonly RecordBatch[]): Record<string, JsonValue>[] {
  const batches = Array.isArray(source) ? (source as readonly RecordBatch[]) : (source as Table).batches;
  const rows: Record<string, JsonValue>[] = [];
  for (const batch of batches) {
    const names = batch.schema.fields.map((f) => f.name);
    const columns = batch.data.children.map((child) => dataToJson(child as Data));
    for (let i = 0; i < batch.numRows; i++) {
      const row: Record<string, JsonValue> = {};
      names.forEach((name, j) => {
        row[name] = columns[j]?.[i] ?? null;
      });
      rows.push(row);
    }
  }
  return rows;
}

/** The `{"data": [row, ...]}` text of rows, as a row-returning endpoint answers in JSON. */
export function jsonText(source: Table | readonly RecordBatch[]): string {
  return JSON.stringify({ data: rowsToJson(source) });
}
