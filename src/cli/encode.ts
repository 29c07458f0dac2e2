import type { Data, DataType, Field, RecordBatch, Schema } from 'apache-arrow';
import { arrow } from '../arrow/arrow.js';
import { LoadError } from './errors.js';

const { Type } = arrow;

/** Where a group's rows are in their file, for errors that name a row. */
export interface GroupPlace {
  file: string;
  /** The file row (0-based) of the group's first row. */
  start: number;
}

/**
 * A group of rows as the one IPC stream `strata load` sends: one record batch, its buffers written afresh, with
 * zeros under every null. The same rows then give the same bytes on every run, whatever chunks DuckDB read them
 * in, so a re-run's request matches the one that landed (DuckDB's vectors hold leftover bytes under nulls).
 * Lists of floats become the vectors `schema` asks for, each checked for its length.
 */
export function encodeGroup(schema: Schema, batches: readonly RecordBatch[], place: GroupPlace): Uint8Array {
  const rows = batches.reduce((n, batch) => n + batch.numRows, 0);
  const children = (schema.fields as Field[]).map((field, c) =>
    rebuild(
      batches.map((batch) => batch.data.children[c] as Data),
      field.type as DataType,
      { ...place, column: field.name },
    ),
  );
  const data = arrow.makeData({ type: new arrow.Struct(schema.fields as Field[]), length: rows, children });
  return arrow.tableToIPC(new arrow.Table([new arrow.RecordBatch(schema, data)]), 'stream');
}

interface Place extends GroupPlace {
  column: string;
}

const lengthOf = (pieces: readonly Data[]) => pieces.reduce((n, piece) => n + piece.length, 0);

/** The pieces' validity as one fresh bitmap (no bitmap when nothing is null). */
function validity(pieces: readonly Data[], rows: number): { nullBitmap?: Uint8Array; nullCount: number } {
  if (pieces.every((piece) => piece.nullCount === 0)) return { nullCount: 0 };
  const bits = new Uint8Array(Math.ceil(rows / 8));
  let at = 0;
  let nulls = 0;
  for (const piece of pieces) {
    for (let i = 0; i < piece.length; i++, at++) {
      if (piece.getValid(i)) bits[at >> 3] = (bits[at >> 3] ?? 0) | (1 << (at & 7));
      else nulls++;
    }
  }
  return nulls === 0 ? { nullCount: 0 } : { nullBitmap: bits, nullCount: nulls };
}

const isValid = (bits: Uint8Array | undefined, i: number) => bits === undefined || ((bits[i >> 3] ?? 0) >> (i & 7)) & 1;

/** The pieces of one column as one Data of `type`, contiguous, with zeros under its nulls. */
function rebuild(pieces: readonly Data[], type: DataType, place: Place): Data {
  const length = lengthOf(pieces);
  const { nullBitmap, nullCount } = validity(pieces, length);
  switch (type.typeId) {
    case Type.Bool: {
      const bits = new Uint8Array(Math.ceil(length / 8));
      let at = 0;
      for (const piece of pieces) {
        const values = piece.values as Uint8Array;
        for (let i = 0; i < piece.length; i++, at++) {
          const bit = piece.offset + i;
          if (isValid(nullBitmap, at) && ((values[bit >> 3] ?? 0) >> (bit & 7)) & 1) {
            bits[at >> 3] = (bits[at >> 3] ?? 0) | (1 << (at & 7));
          }
        }
      }
      return arrow.makeData({ type: type as never, length, nullCount, nullBitmap, data: bits });
    }
    case Type.Utf8:
    case Type.Binary: {
      const offsets = new Int32Array(length + 1);
      let at = 0;
      for (const piece of pieces) {
        const from = piece.valueOffsets as Int32Array;
        for (let i = 0; i < piece.length; i++, at++) {
          const size = isValid(nullBitmap, at) ? (from[i + 1] ?? 0) - (from[i] ?? 0) : 0;
          offsets[at + 1] = (offsets[at] ?? 0) + size;
        }
      }
      const bytes = new Uint8Array(offsets[length] ?? 0);
      at = 0;
      for (const piece of pieces) {
        const from = piece.valueOffsets as Int32Array;
        const values = piece.values as Uint8Array;
        for (let i = 0; i < piece.length; i++, at++) {
          if (!isValid(nullBitmap, at)) continue;
          bytes.set(values.subarray(from[i] ?? 0, from[i + 1] ?? 0), offsets[at] ?? 0);
        }
      }
      return arrow.makeData({ type: type as never, length, nullCount, nullBitmap, valueOffsets: offsets, data: bytes });
    }
    case Type.List: {
      const offsets = new Int32Array(length + 1);
      const items: Data[] = [];
      let at = 0;
      for (const piece of pieces) {
        const from = piece.valueOffsets as Int32Array;
        const child = piece.children[0] as Data;
        const first = at;
        let gapless = true;
        for (let i = 0; i < piece.length; i++, at++) {
          const valid = isValid(nullBitmap, at);
          if (!valid && from[i + 1] !== from[i]) gapless = false;
          offsets[at + 1] = (offsets[at] ?? 0) + (valid ? (from[i + 1] ?? 0) - (from[i] ?? 0) : 0);
        }
        // Null lists usually hold no items, and then the piece's items are one run; otherwise row by row.
        if (gapless) items.push(child.slice(from[0] ?? 0, (from[piece.length] ?? 0) - (from[0] ?? 0)));
        else {
          for (let i = 0; i < piece.length; i++) {
            const size = (offsets[first + i + 1] ?? 0) - (offsets[first + i] ?? 0);
            if (size > 0) items.push(child.slice(from[i] ?? 0, size));
          }
        }
      }
      const itemType = (type.children[0] as Field).type as DataType;
      const child = rebuild(items, itemType, place);
      return arrow.makeData({ type: type as never, length, nullCount, nullBitmap, valueOffsets: offsets, child });
    }
    case Type.FixedSizeList:
      return vectors(pieces, type as InstanceType<typeof arrow.FixedSizeList>, length, nullBitmap, nullCount, place);
    default:
      return fixedWidth(pieces, type, length, nullBitmap, nullCount);
  }
}

/** Numbers, dates and timestamps: their bytes copied, zeros under nulls. */
function fixedWidth(
  pieces: readonly Data[],
  type: DataType,
  length: number,
  nullBitmap: Uint8Array | undefined,
  nullCount: number,
): Data {
  const ArrayType = (type as unknown as { ArrayType: new (length: number) => ArrayBufferView }).ArrayType;
  const stride = (type as unknown as { stride?: number }).stride ?? 1;
  const out = new ArrayType(length * stride);
  const bytes = new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  const width = out.byteLength / Math.max(length, 1);
  let at = 0;
  for (const piece of pieces) {
    const values = piece.values as ArrayBufferView;
    bytes.set(new Uint8Array(values.buffer, values.byteOffset, piece.length * width), at * width);
    at += piece.length;
  }
  if (nullBitmap !== undefined) {
    for (let i = 0; i < length; i++) if (!isValid(nullBitmap, i)) bytes.fill(0, i * width, (i + 1) * width);
  }
  return arrow.makeData({ type: type as never, length, nullCount, nullBitmap, data: out as never });
}

/** Vectors from lists of floats (or from vectors): each of the declared length, with no null element. */
function vectors(
  pieces: readonly Data[],
  type: InstanceType<typeof arrow.FixedSizeList>,
  length: number,
  nullBitmap: Uint8Array | undefined,
  nullCount: number,
  place: Place,
): Data {
  const dim = type.listSize;
  const out = new Float32Array(length * dim);
  let at = 0;
  for (const piece of pieces) {
    const fixed = piece.type.typeId === Type.FixedSizeList;
    const offsets = piece.valueOffsets as Int32Array | undefined;
    const items = piece.children[0] as Data;
    const floats = new arrow.Vector([items]);
    for (let i = 0; i < piece.length; i++, at++) {
      if (!isValid(nullBitmap, at)) continue;
      const from = fixed ? i * dim : (offsets?.[i] ?? 0);
      const size = fixed ? dim : (offsets?.[i + 1] ?? 0) - from;
      const row = () => Array.from({ length: size }, (_, k) => floats.get(from + k) as number | null);
      if (size !== dim) {
        throw new LoadError(
          `${rowName(place, at)}, column "${place.column}": a vector of ${size} numbers (${preview(row())}); the column's vectors have ${dim}`,
        );
      }
      for (let k = 0; items.nullCount > 0 && k < dim; k++) {
        if (!items.getValid(from + k)) {
          throw new LoadError(
            `${rowName(place, at)}, column "${place.column}": element ${k} of the vector (${preview(row())}) is null`,
          );
        }
      }
      out.set((items.values as Float32Array).subarray(from, from + dim), at * dim);
    }
  }
  const child = arrow.makeData({ type: new arrow.Float32(), length: length * dim, data: out });
  return arrow.makeData({ type, length, nullCount, nullBitmap, child });
}

/** A row as the user counts them: from 1, after any header. */
export const rowName = (place: GroupPlace, index: number) => `${place.file}: row ${place.start + index + 1}`;

const preview = (values: readonly (number | null)[]) => {
  const shown = values.slice(0, 8).map(String).join(', ');
  return `[${shown}${values.length > 8 ? ', …' : ''}]`;
};
