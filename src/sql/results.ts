import {
  type DuckDBArrayType,
  type DuckDBDataChunk,
  type DuckDBDecimalType,
  type DuckDBListType,
  type DuckDBStructType,
  type DuckDBType,
  DuckDBTypeId,
  DuckDBVector,
} from '@duckdb/node-api';
import duckdb from '@duckdb/node-bindings';
import type { Data, DataType, Field, RecordBatch, Schema } from 'apache-arrow';
import { arrow } from '../arrow/arrow.js';
import { arrowType } from './types.js';

/** Fixed-width DuckDB types whose vector bytes are already the Arrow value buffer. */
const BYTES: Readonly<Partial<Record<DuckDBTypeId, number>>> = {
  [DuckDBTypeId.TINYINT]: 1,
  [DuckDBTypeId.SMALLINT]: 2,
  [DuckDBTypeId.INTEGER]: 4,
  [DuckDBTypeId.BIGINT]: 8,
  [DuckDBTypeId.UTINYINT]: 1,
  [DuckDBTypeId.USMALLINT]: 2,
  [DuckDBTypeId.UINTEGER]: 4,
  [DuckDBTypeId.UBIGINT]: 8,
  [DuckDBTypeId.FLOAT]: 4,
  [DuckDBTypeId.DOUBLE]: 8,
  [DuckDBTypeId.DATE]: 4,
  [DuckDBTypeId.TIMESTAMP_S]: 8,
  [DuckDBTypeId.TIMESTAMP_MS]: 8,
  [DuckDBTypeId.TIMESTAMP]: 8,
  [DuckDBTypeId.TIMESTAMP_NS]: 8,
  [DuckDBTypeId.TIMESTAMP_TZ]: 8,
  [DuckDBTypeId.TIME]: 8,
  [DuckDBTypeId.TIME_NS]: 8,
  [DuckDBTypeId.HUGEINT]: 16,
};

/** The Arrow validity bitmap and null count of a vector's first `n` rows (DuckDB's mask is the same bits). */
function validityOf(vector: duckdb.Vector, n: number): { nullBitmap?: Uint8Array; nullCount: number } {
  const mask = duckdb.vector_get_validity(vector, Math.ceil(n / 64) * 8) as Uint8Array | null;
  if (!mask) return { nullCount: 0 };
  let valid = 0;
  for (let i = 0; i < n; i++) if (((mask[i >> 3] ?? 0) >> (i & 7)) & 1) valid++;
  // `slice`: the bindings' buffer is DuckDB's own memory, freed with the chunk.
  return valid === n ? { nullCount: 0 } : { nullBitmap: mask.slice(0, Math.ceil(n / 8)), nullCount: n - valid };
}

/**
 * Copies a vector's fixed-width data into a typed array of its own: the bindings' buffer is a view of
 * DuckDB's memory, which goes when the chunk does.
 */
function fixed<T>(vector: duckdb.Vector, bytes: number, make: (buffer: ArrayBuffer, offset: number) => T): T {
  const own = duckdb.vector_get_data(vector, bytes).slice();
  return make(own.buffer as ArrayBuffer, own.byteOffset);
}

/** The first `n` rows of a DuckDB vector of `type` as Arrow data of `arrowType(type)`. */
function vectorToData(vector: duckdb.Vector, type: DuckDBType, n: number): Data {
  const target = arrowType(type);
  const { nullBitmap, nullCount } = validityOf(vector, n);
  const id = type.typeId;
  const width = BYTES[id];
  if (width !== undefined) {
    // The Arrow value array of the target type (HUGEINT's decimal is 32-bit words, four per value).
    const ArrayType = (
      target as unknown as {
        ArrayType: { new (b: ArrayBuffer, o: number, l: number): ArrayBufferView; BYTES_PER_ELEMENT: number };
      }
    ).ArrayType;
    const data = fixed(
      vector,
      n * width,
      (buffer, offset) => new ArrayType(buffer, offset, (n * width) / ArrayType.BYTES_PER_ELEMENT),
    );
    return arrow.makeData({ type: target as never, length: n, nullCount, nullBitmap, data: data as never });
  }
  switch (id) {
    case DuckDBTypeId.BOOLEAN: {
      const bytes = duckdb.vector_get_data(vector, n);
      const bits = new Uint8Array(Math.ceil(n / 8));
      for (let i = 0; i < n; i++) if (bytes[i]) bits[i >> 3] = (bits[i >> 3] ?? 0) | (1 << (i & 7));
      return arrow.makeData({ type: target as never, length: n, nullCount, nullBitmap, data: bits });
    }
    case DuckDBTypeId.VARCHAR:
    case DuckDBTypeId.BLOB:
      return stringData(vector, target, n, nullBitmap, nullCount);
    case DuckDBTypeId.DECIMAL:
      return decimalData(vector, type as DuckDBDecimalType, target, n, nullBitmap, nullCount);
    case DuckDBTypeId.SQLNULL:
      return arrow.makeData({ type: new arrow.Null(), length: n });
    case DuckDBTypeId.LIST:
      return listData(vector, type as DuckDBListType, target, n, nullBitmap, nullCount);
    case DuckDBTypeId.ARRAY: {
      const t = type as DuckDBArrayType;
      const child = vectorToData(duckdb.array_vector_get_child(vector), t.valueType, n * t.length);
      return arrow.makeData({
        type: target as InstanceType<typeof arrow.FixedSizeList>,
        length: n,
        nullCount,
        nullBitmap,
        child,
      });
    }
    case DuckDBTypeId.STRUCT: {
      const t = type as DuckDBStructType;
      const children = t.entryTypes.map((entry, k) =>
        vectorToData(duckdb.struct_vector_get_child(vector, k), entry, n),
      );
      return arrow.makeData({ type: target as never, length: n, nullCount, nullBitmap, children });
    }
    default:
      return textData(vector, type, n);
  }
}

function stringData(
  vector: duckdb.Vector,
  target: DataType,
  n: number,
  nullBitmap: Uint8Array | undefined,
  nullCount: number,
): Data {
  // duckdb_string_t: {length u32, then 12 inline bytes | 4-byte prefix and a pointer}.
  const raw = duckdb.vector_get_data(vector, n * 16);
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const valid = (i: number) => nullBitmap === undefined || ((nullBitmap[i >> 3] ?? 0) >> (i & 7)) & 1;
  const offsets = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) offsets[i + 1] = (offsets[i] ?? 0) + (valid(i) ? view.getUint32(i * 16, true) : 0);
  const bytes = new Uint8Array(offsets[n] ?? 0);
  for (let i = 0; i < n; i++) {
    if (!valid(i)) continue;
    const length = view.getUint32(i * 16, true);
    const at = offsets[i] ?? 0;
    if (length <= 12) bytes.set(raw.subarray(i * 16 + 4, i * 16 + 4 + length), at);
    else bytes.set(duckdb.get_data_from_pointer(raw.buffer as ArrayBuffer, raw.byteOffset + i * 16 + 8, length), at);
  }
  return arrow.makeData({
    type: target as never,
    length: n,
    nullCount,
    nullBitmap,
    valueOffsets: offsets,
    data: bytes,
  });
}

function decimalData(
  vector: duckdb.Vector,
  type: DuckDBDecimalType,
  target: DataType,
  n: number,
  nullBitmap: Uint8Array | undefined,
  nullCount: number,
): Data {
  const width = type.width <= 4 ? 2 : type.width <= 9 ? 4 : type.width <= 18 ? 8 : 16;
  const raw = duckdb.vector_get_data(vector, n * width);
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const out = new DataView(new ArrayBuffer(n * 16));
  for (let i = 0; i < n; i++) {
    if (width === 16) {
      out.setBigUint64(i * 16, view.getBigUint64(i * 16, true), true);
      out.setBigInt64(i * 16 + 8, view.getBigInt64(i * 16 + 8, true), true);
      continue;
    }
    const value =
      width === 8
        ? view.getBigInt64(i * 8, true)
        : BigInt(width === 4 ? view.getInt32(i * 4, true) : view.getInt16(i * 2, true));
    out.setBigInt64(i * 16, value, true);
    out.setBigInt64(i * 16 + 8, value < 0n ? -1n : 0n, true);
  }
  const words = new Uint32Array(out.buffer);
  return arrow.makeData({ type: target as never, length: n, nullCount, nullBitmap, data: words });
}

function listData(
  vector: duckdb.Vector,
  type: DuckDBListType,
  target: DataType,
  n: number,
  nullBitmap: Uint8Array | undefined,
  nullCount: number,
): Data {
  const entries = fixed(vector, n * 16, (buffer, offset) => new BigUint64Array(buffer, offset, n * 2));
  const size = duckdb.list_vector_get_size(vector);
  const child = vectorToData(duckdb.list_vector_get_child(vector), type.valueType, size);
  const offsets = new Int32Array(n + 1);
  let contiguous = true;
  for (let i = 0; i < n; i++) {
    const valid = nullBitmap === undefined || ((nullBitmap[i >> 3] ?? 0) >> (i & 7)) & 1;
    const length = valid ? Number(entries[i * 2 + 1]) : 0;
    if (valid && Number(entries[i * 2]) !== offsets[i]) contiguous = false;
    offsets[i + 1] = (offsets[i] ?? 0) + length;
  }
  if (contiguous) {
    return arrow.makeData({ type: target as never, length: n, nullCount, nullBitmap, valueOffsets: offsets, child });
  }
  // Lists sharing or reordering their items: gather them (rare; results of some list functions).
  const items = new arrow.Vector([child]);
  const rows = Array.from({ length: n }, (_, i) => {
    const valid = nullBitmap === undefined || ((nullBitmap[i >> 3] ?? 0) >> (i & 7)) & 1;
    if (!valid) return null;
    const from = Number(entries[i * 2]);
    return Array.from({ length: Number(entries[i * 2 + 1]) }, (_, j) => items.get(from + j));
  });
  return arrow.vectorFromArray(rows, target).data[0] as Data;
}

/** A column as DuckDB's own text of each value. */
function textData(vector: duckdb.Vector, type: DuckDBType, n: number): Data {
  const values = DuckDBVector.create(vector, n, type);
  const text = Array.from({ length: n }, (_, i) => {
    const value = values.getItem(i);
    return value === null ? null : String(value);
  });
  return arrow.vectorFromArray(text, new arrow.Utf8()).data[0] as Data;
}

/** One DuckDB result chunk as an Arrow record batch of `schema`. */
export function chunkToBatch(chunk: DuckDBDataChunk, types: readonly DuckDBType[], schema: Schema): RecordBatch {
  const n = chunk.rowCount;
  const columns = types.map((type, c) => vectorToData(duckdb.data_chunk_get_vector(chunk.chunk, c), type, n));
  const data = arrow.makeData({ type: new arrow.Struct(schema.fields as Field[]), length: n, children: columns });
  return new arrow.RecordBatch(schema, data);
}

/** The i64 form of a HUGEINT (decimal 38,0) column when all its values fit, so JSON gets numbers. */
export function narrowHugeints(
  schema: Schema,
  types: readonly DuckDBType[],
  batches: RecordBatch[],
): { schema: Schema; rows: RecordBatch[] } {
  const huge = types.flatMap((t, c) => (t.typeId === DuckDBTypeId.HUGEINT ? [c] : []));
  const fits = huge.filter((c) =>
    batches.every((batch) => {
      const words = (batch.data.children[c] as Data).values as Uint32Array;
      for (let i = 0; i < words.length; i += 4) {
        const sign = (words[i + 1] ?? 0) >>> 31 ? 0xffffffff : 0;
        if (words[i + 2] !== sign || words[i + 3] !== sign) return false;
      }
      return true;
    }),
  );
  if (fits.length === 0) return { schema, rows: batches };
  const fields = (schema.fields as Field[]).map((f, c) =>
    fits.includes(c) ? new arrow.Field(f.name, new arrow.Int64(), f.nullable) : f,
  );
  const narrowed = new arrow.Schema(fields);
  return {
    schema: narrowed,
    rows: batches.map((batch) => {
      const children = (batch.data.children as Data[]).map((child, c) => {
        if (!fits.includes(c)) return child;
        const words = child.values as Uint32Array;
        const out = new BigInt64Array(child.length);
        const view = new DataView(words.buffer, words.byteOffset, words.byteLength);
        for (let i = 0; i < child.length; i++) out[i] = view.getBigInt64(i * 16, true);
        return arrow.makeData({
          type: new arrow.Int64(),
          length: child.length,
          nullCount: child.nullCount,
          nullBitmap: child.nullBitmap,
          data: out,
        });
      });
      const data = arrow.makeData({ type: new arrow.Struct(fields), length: batch.numRows, children });
      return new arrow.RecordBatch(narrowed, data);
    }),
  };
}
