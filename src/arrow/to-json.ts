import type { Data, DataType, RecordBatch, Table } from 'apache-arrow';
import { ResultTooLarge } from '../errors.js';
import { arrow } from './arrow.js';
import { UNITS_PER_SECOND } from './from-json.js';

const { Type, Precision } = arrow;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const decoder = new TextDecoder();

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** 64-bit integers stay numbers while exact (±2^53) and become decimal strings beyond (docs/api.md). */
function int64(value: bigint): number | string {
  return value <= MAX_SAFE && value >= -MAX_SAFE ? Number(value) : value.toString();
}

function float(value: number): number | string {
  if (Number.isFinite(value)) return value;
  return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
}

/** Floor division and its non-negative remainder. */
function divide(value: bigint, by: bigint): [bigint, bigint] {
  let quotient = value / by;
  let rest = value % by;
  if (rest < 0n) {
    rest += by;
    quotient -= 1n;
  }
  return [quotient, rest];
}

const two = (n: number): string => String(n).padStart(2, '0');

/**
 * `YYYY-MM-DD` of a day count since 1970-01-01, in the proleptic Gregorian calendar, for any day an Arrow
 * date or timestamp can hold (JS `Date` stops at ±275,760 years). Years outside 0000–9999 are written as
 * ISO 8601 writes them: a sign and at least six digits. The civil-from-days algorithm of H. Hinnant.
 */
function isoDate(days: bigint): string {
  const z = days + 719_468n;
  const [era, doe] = divide(z, 146_097n);
  const yoe = (doe - doe / 1460n + doe / 36_524n - doe / 146_096n) / 365n;
  const doy = doe - (365n * yoe + yoe / 4n - yoe / 100n);
  const mp = (5n * doy + 2n) / 153n;
  const day = Number(doy - (153n * mp + 2n) / 5n + 1n);
  const month = Number(mp < 10n ? mp + 3n : mp - 9n);
  const year = yoe + era * 400n + (month <= 2 ? 1n : 0n);
  const y =
    year >= 0n && year <= 9999n
      ? year.toString().padStart(4, '0')
      : `${year < 0n ? '-' : '+'}${(year < 0n ? -year : year).toString().padStart(6, '0')}`;
  return `${y}-${two(month)}-${two(day)}`;
}

/** RFC 3339 in UTC with `Z`, with as many fraction digits as the unit carries. */
function formatTimestamp(value: bigint, unit: number): string {
  const per = UNITS_PER_SECOND[unit] ?? 1000n;
  const [seconds, fraction] = divide(value, per);
  const [days, secondOfDay] = divide(seconds, 86_400n);
  const s = Number(secondOfDay);
  const iso = `${isoDate(days)}T${two(Math.floor(s / 3600))}:${two(Math.floor(s / 60) % 60)}:${two(s % 60)}`;
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
        if (!isValid(i)) {
          out[i] = null;
          continue;
        }
        const v = BigInt(values[i] ?? 0);
        out[i] = days ? isoDate(v) : formatTimestamp(v, arrow.TimeUnit.MILLISECOND);
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

/** The longest string V8 makes (2^29 − 24 UTF-16 units), less room for the envelope. */
export const MAX_JSON_TEXT = 2 ** 29 - 64;

/**
 * The `{"data": [row, ...]}` text of rows, as a row-returning endpoint answers in JSON, row by row so that a
 * text longer than `maxChars` (or than V8 can hold) is refused as soon as it passes the bound.
 */
export function jsonText(source: Table | readonly RecordBatch[], maxChars = MAX_JSON_TEXT): string {
  const bound = Math.min(maxChars, MAX_JSON_TEXT);
  const tooLarge = () => new ResultTooLarge(bound, 'the reply as JSON');
  const parts: string[] = [];
  let length = 0;
  const batches = Array.isArray(source) ? (source as readonly RecordBatch[]) : (source as Table).batches;
  try {
    // A batch at a time: the row objects of one batch, not of the whole reply, are alive at once.
    for (const batch of batches) {
      for (const row of rowsToJson([batch])) {
        const text = JSON.stringify(row);
        length += text.length + 1;
        if (length > bound) throw tooLarge();
        parts.push(text);
      }
    }
  } catch (err) {
    // A single value past V8's string limit fails as it is decoded or stringified.
    const code = (err as { code?: unknown }).code;
    if (err instanceof RangeError || code === 'ERR_STRING_TOO_LONG') throw tooLarge();
    throw err;
  }
  return `{"data":[${parts.join(',')}]}`;
}
