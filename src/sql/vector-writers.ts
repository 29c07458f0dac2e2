import { isUtf8 } from 'node:buffer';
import type { DuckDBDataChunk } from '@duckdb/node-api';
import duckdb from '@duckdb/node-bindings';
import type { Data, DataType, RecordBatch } from 'apache-arrow';
import { arrow } from '../arrow/arrow.js';
import { UNITS_PER_SECOND } from '../arrow/from-json.js';
import { dataToJson } from '../arrow/to-json.js';
import { MAX_DECIMAL_PRECISION } from './types.js';

// Arrow column data written straight into DuckDB vectors, a data chunk at a time.

const { Type, TimeUnit, Precision } = arrow;

/** Rows per DuckDB data chunk (its vector size, 2048). */
export const CHUNK_ROWS = duckdb.vector_size();

/** Bytes of a fixed-width Arrow value buffer that DuckDB stores the same way. */
const SAME_LAYOUT: ReadonlySet<number> = new Set([Type.Int, Type.Float, Type.Date]);

function copyTyped(vector: duckdb.Vector, values: ArrayBufferView, width: number, start: number, n: number): void {
  // The binding copies without bounds checks: a short buffer would read past its end (a crash, not an error).
  if (values.byteLength < (start + n) * width) {
    throw new Error(
      `column buffer holds ${values.byteLength} bytes; rows ${start}..${start + n} need ${(start + n) * width}`,
    );
  }
  duckdb.copy_data_to_vector(vector, 0, values.buffer as ArrayBuffer, values.byteOffset + start * width, n * width);
}

/** The DuckDB validity mask of rows [start, start + n) of `data`, when any of them is null. */
function writeValidity(vector: duckdb.Vector, data: Data, start: number, n: number): void {
  if (data.nullCount === 0) return;
  const words = Math.ceil(n / 64);
  const mask = new Uint8Array(words * 8);
  let anyNull = false;
  for (let i = 0; i < n; i++) {
    if (data.getValid(start + i)) mask[i >> 3] = (mask[i >> 3] ?? 0) | (1 << (i & 7));
    else anyNull = true;
  }
  if (!anyNull) return;
  duckdb.vector_ensure_validity_writable(vector);
  duckdb.copy_data_to_vector_validity(vector, 0, mask.buffer, 0, mask.byteLength);
}

/** Rows [start, start + n) of an Arrow column into a DuckDB vector from its position 0. */
function writeColumn(vector: duckdb.Vector, data: Data, start: number, n: number): void {
  const type = data.type as DataType;
  writeValidity(vector, data, start, n);
  if (type.typeId === Type.Float && (type as InstanceType<typeof arrow.Float>).precision === Precision.HALF) {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = arrow.util.uint16ToFloat64((data.values as Uint16Array)[start + i] ?? 0);
    copyTyped(vector, out, 4, 0, n);
    return;
  }
  if (type.typeId === Type.Date && (type as InstanceType<typeof arrow.Date_>).unit !== arrow.DateUnit.DAY) {
    const out = new Int32Array(n);
    const ms = data.values as BigInt64Array | Int32Array;
    for (let i = 0; i < n; i++) out[i] = Math.floor(Number(ms[start + i] ?? 0) / 86_400_000);
    copyTyped(vector, out, 4, 0, n);
    return;
  }
  if (SAME_LAYOUT.has(type.typeId)) {
    const values = data.values as ArrayBufferView & { BYTES_PER_ELEMENT: number };
    copyTyped(vector, values, values.BYTES_PER_ELEMENT, start, n);
    return;
  }
  switch (type.typeId) {
    case Type.Bool: {
      const bytes = new Uint8Array(n);
      // Arrow JS keeps `offset` for bit-packed booleans (their buffer is not re-sliced).
      const bits = data.values as Uint8Array;
      for (let i = 0; i < n; i++) {
        const bit = data.offset + start + i;
        bytes[i] = ((bits[bit >> 3] ?? 0) >> (bit & 7)) & 1;
      }
      copyTyped(vector, bytes, 1, 0, n);
      return;
    }
    case Type.Timestamp:
    case Type.Time:
      writeTemporal(vector, data, start, n);
      return;
    case Type.Duration: {
      // INTERVAL is {months i32, days i32, micros i64}; a duration is all micros.
      const out = new DataView(new ArrayBuffer(n * 16));
      const per = UNITS_PER_SECOND[(type as InstanceType<typeof arrow.Duration>).unit] ?? 1000n;
      const values = data.values as BigInt64Array;
      for (let i = 0; i < n; i++) out.setBigInt64(i * 16 + 8, ((values[start + i] ?? 0n) * 1_000_000n) / per, true);
      duckdb.copy_data_to_vector(vector, 0, out.buffer, 0, n * 16);
      return;
    }
    case Type.Utf8:
    case Type.LargeUtf8:
    case Type.Binary:
    case Type.LargeBinary:
      writeStrings(vector, data, start, n, type.typeId === Type.Utf8 || type.typeId === Type.LargeUtf8);
      return;
    case Type.FixedSizeBinary: {
      const width = (type as InstanceType<typeof arrow.FixedSizeBinary>).byteWidth;
      const bytes = data.values as Uint8Array;
      for (let i = 0; i < n; i++) {
        if (!data.getValid(start + i)) continue;
        duckdb.vector_assign_string_element_len(
          vector,
          i,
          bytes.subarray((start + i) * width, (start + i + 1) * width),
        );
      }
      return;
    }
    case Type.Decimal:
      writeDecimal(vector, data, start, n);
      return;
    case Type.Dictionary: {
      // Rare in tables (schema_ipc only): decode through plain values of the dictionary's type.
      const t = type as InstanceType<typeof arrow.Dictionary>;
      const values = new arrow.Vector([data.slice(start, n)]).toArray() as unknown[];
      writeColumn(vector, arrow.vectorFromArray(values, t.dictionary).data[0] as Data, 0, n);
      return;
    }
    case Type.List:
      writeList(vector, data, start, n);
      return;
    case Type.FixedSizeList: {
      const size = (type as InstanceType<typeof arrow.FixedSizeList>).listSize;
      writeColumn(duckdb.array_vector_get_child(vector), data.children[0] as Data, start * size, n * size);
      return;
    }
    case Type.Struct:
      data.children.forEach((child, k) => {
        writeColumn(duckdb.struct_vector_get_child(vector, k), child, start, n);
      });
      return;
    default:
      throw new Error(`no SQL loader for Arrow ${String(type)}`);
  }
}

/** Bytes DuckDB keeps inside a string's 16-byte slot (`string_t`: u32 length, then the bytes, zero-padded). */
const INLINE_STRING_BYTES = 12;

/**
 * Strings and binaries: short ones written straight into the vector's slots (one call per row measured
 * 0.26 µs, a quarter of a second per million rows on the thread every load shares), longer ones through
 * DuckDB, which copies them to the vector's own heap. DuckDB turns text that is not UTF-8 into NULL; such a
 * chunk goes all through DuckDB, so it still does.
 */
function writeStrings(vector: duckdb.Vector, data: Data, start: number, n: number, text: boolean): void {
  const offsets = data.valueOffsets as Int32Array | BigInt64Array;
  const bytes = data.values as Uint8Array;
  const inline = !text || isUtf8(bytes.subarray(Number(offsets[start]), Number(offsets[start + n])));
  // The short ones go in with one copy of all slots; the rest are assigned after it, over their slots.
  const slots = new Uint8Array(n * 16);
  const lengths = new DataView(slots.buffer);
  const long: number[] = [];
  for (let i = 0; i < n; i++) {
    if (data.nullCount > 0 && !data.getValid(start + i)) continue;
    const from = Number(offsets[start + i]);
    const to = Number(offsets[start + i + 1]);
    if (inline && to - from <= INLINE_STRING_BYTES) {
      lengths.setUint32(i * 16, to - from, true);
      for (let b = from; b < to; b++) slots[i * 16 + 4 + b - from] = bytes[b] as number;
    } else {
      long.push(i);
    }
  }
  duckdb.copy_data_to_vector(vector, 0, slots.buffer, 0, slots.byteLength);
  for (const i of long) {
    duckdb.vector_assign_string_element_len(
      vector,
      i,
      bytes.subarray(Number(offsets[start + i]), Number(offsets[start + i + 1])),
    );
  }
}

/** Timestamps as they are; times rescaled to the unit of the DuckDB type `duckdbType` chose. */
function writeTemporal(vector: duckdb.Vector, data: Data, start: number, n: number): void {
  const type = data.type as InstanceType<typeof arrow.Timestamp> | InstanceType<typeof arrow.Time>;
  const keepsUnit = type.typeId === Type.Timestamp || type.unit === TimeUnit.NANOSECOND;
  const values = data.values as BigInt64Array | Int32Array;
  if (keepsUnit && values instanceof BigInt64Array) {
    copyTyped(vector, values, 8, start, n);
    return;
  }
  const from = UNITS_PER_SECOND[type.unit] ?? 1000n;
  const out = new BigInt64Array(n);
  for (let i = 0; i < n; i++) out[i] = (BigInt(values[start + i] ?? 0) * 1_000_000n) / from;
  copyTyped(vector, out, 8, 0, n);
}

function writeDecimal(vector: duckdb.Vector, data: Data, start: number, n: number): void {
  const t = data.type as InstanceType<typeof arrow.Decimal>;
  if (t.precision > MAX_DECIMAL_PRECISION) {
    const text = dataToJson(data.slice(start, n));
    for (let i = 0; i < n; i++) {
      const value = text[i];
      if (typeof value === 'string') duckdb.vector_assign_string_element(vector, i, value);
    }
    return;
  }
  // DuckDB stores DECIMAL(p) in 2, 4, 8 or 16 bytes by precision; Arrow in 16 or 32 (little-endian words).
  const width = t.precision <= 4 ? 2 : t.precision <= 9 ? 4 : t.precision <= 18 ? 8 : 16;
  const wordsPer = t.bitWidth / 32;
  const words = data.values as Uint32Array;
  if (width === 16 && wordsPer === 4) {
    copyTyped(vector, words, 16, start, n);
    return;
  }
  const out = new DataView(new ArrayBuffer(n * width));
  for (let i = 0; i < n; i++) {
    const at = (start + i) * wordsPer;
    const low = (BigInt(words[at + 1] ?? 0) << 32n) | BigInt(words[at] ?? 0);
    const high = (BigInt(words[at + 3] ?? 0) << 32n) | BigInt(words[at + 2] ?? 0);
    if (width === 16) {
      out.setBigUint64(i * 16, low, true);
      out.setBigUint64(i * 16 + 8, high, true);
    } else if (width === 8) out.setBigInt64(i * 8, BigInt.asIntN(64, low), true);
    else if (width === 4) out.setInt32(i * 4, Number(BigInt.asIntN(32, low)), true);
    else out.setInt16(i * 2, Number(BigInt.asIntN(16, low)), true);
  }
  duckdb.copy_data_to_vector(vector, 0, out.buffer, 0, n * width);
}

function writeList(vector: duckdb.Vector, data: Data, start: number, n: number): void {
  const offsets = data.valueOffsets as Int32Array | BigInt64Array;
  const first = Number(offsets[start]);
  const count = Number(offsets[start + n]) - first;
  // list_entry_t: {offset u64, length u64} into the child vector, which holds this chunk's items from 0.
  const entries = new BigUint64Array(n * 2);
  for (let i = 0; i < n; i++) {
    entries[i * 2] = BigInt(Number(offsets[start + i]) - first);
    entries[i * 2 + 1] = BigInt(Number(offsets[start + i + 1]) - Number(offsets[start + i]));
  }
  duckdb.copy_data_to_vector(vector, 0, entries.buffer, 0, entries.byteLength);
  duckdb.list_vector_reserve(vector, count);
  duckdb.list_vector_set_size(vector, count);
  if (count > 0) writeColumn(duckdb.list_vector_get_child(vector), data.children[0] as Data, first, count);
}

/**
 * Rows [start, start + n) of a batch into a data chunk whose columns are the batch's, in order (n ≤ CHUNK_ROWS),
 * with the vectors' memory written directly (docs/architecture.md: never row by row).
 */
export function fillChunk(chunk: DuckDBDataChunk, batch: RecordBatch, start: number, n: number): void {
  const raw = chunk.chunk;
  duckdb.data_chunk_reset(raw);
  (batch.data.children as Data[]).forEach((column, c) => {
    writeColumn(duckdb.data_chunk_get_vector(raw, c), column, start, n);
  });
  duckdb.data_chunk_set_size(raw, n);
}
