import { crc32 } from 'node:zlib';
import type { Data, RecordBatch } from 'apache-arrow';
import { arrow } from './arrow.js';

const { Type } = arrow;

const bigintsAsText = (_: string, v: unknown) => (typeof v === 'bigint' ? String(v) : v);

/** A CRC-32 fed in pieces: the same bytes in any split give the same value. */
class Crc {
  value = 0;
  bytes(view: ArrayBufferView): void {
    // zlib's crc32 of an empty view over an empty buffer answers 0, forgetting the running value.
    if (view.byteLength === 0) return;
    this.value = crc32(new Uint8Array(view.buffer, view.byteOffset, view.byteLength), this.value);
  }
  number(n: number): void {
    this.bytes(Float64Array.of(n));
  }
  /**
   * A run of bytes given in pieces, its length first: what comes before and after it can never be read as part of
   * it, so two different streams of sections are two different byte streams.
   */
  section(pieces: readonly ArrayBufferView[]): void {
    let total = 0;
    for (const piece of pieces) total += piece.byteLength;
    this.number(total);
    for (const piece of pieces) this.bytes(piece);
  }
}

/** A column's piece in one batch, and how many of the column's values come before it. */
interface Piece {
  data: Data;
  base: number;
}

/** The runs of consecutive valid rows of `data`, as [first, count]. */
function validRuns(data: Data): [number, number][] {
  if (data.nullCount <= 0) return data.length === 0 ? [] : [[0, data.length]];
  const runs: [number, number][] = [];
  for (let i = 0; i < data.length; i++) {
    if (!data.getValid(i)) continue;
    const last = runs[runs.length - 1];
    if (last !== undefined && last[0] + last[1] === i) last[1]++;
    else runs.push([i, 1]);
  }
  return runs;
}

/** Each value's length from the offsets, 0 for a null (whose offsets may span anything). */
function lengths(data: Data): Float64Array {
  const offsets = data.valueOffsets;
  const out = new Float64Array(data.length);
  for (let i = 0; i < data.length; i++) {
    if (data.nullCount <= 0 || data.getValid(i)) out[i] = Number(offsets[i + 1]) - Number(offsets[i]);
  }
  return out;
}

/** The child values under the valid rows of each piece (`width` child values a row, or by offsets), as pieces. */
function childPieces(pieces: readonly Piece[], child: (data: Data) => Data, width: number | 'offsets'): Piece[] {
  const out: Piece[] = [];
  let base = 0;
  for (const { data } of pieces) {
    const values = child(data);
    for (const [first, count] of validRuns(data)) {
      const from = width === 'offsets' ? Number(data.valueOffsets[first]) : first * width;
      const to = width === 'offsets' ? Number(data.valueOffsets[first + count]) : (first + count) * width;
      out.push({ data: values.slice(from, to - from), base });
      base += to - from;
    }
  }
  return out;
}

/**
 * Feeds a column, given as its pieces in batch order, to `crc` in a form that depends only on the values it
 * holds, not on how its rows were split into batches, sliced or padded, nor on what the buffers hold under a
 * null: its type, the positions of its nulls, then its values (lengths before bytes for variable-width ones),
 * then its children under its valid rows, each the same way, each section led by its length.
 */
function feed(crc: Crc, pieces: readonly Piece[]): void {
  const type = pieces[0]?.data.type;
  if (type === undefined) return;
  crc.section([Buffer.from(String(type))]);
  const nulls: number[] = [];
  for (const { data, base } of pieces) {
    if (data.nullCount > 0) for (let i = 0; i < data.length; i++) if (!data.getValid(i)) nulls.push(base + i);
  }
  crc.section([Float64Array.from(nulls)]);
  switch (type.typeId) {
    case Type.Null:
      return;
    case Type.Bool:
      crc.section(
        pieces.map(({ data }) => {
          const bits = new Uint8Array(data.length);
          for (let i = 0; i < data.length; i++) {
            const at = data.offset + i;
            if (data.nullCount <= 0 || data.getValid(i)) bits[i] = ((data.values[at >> 3] as number) >> (at & 7)) & 1;
          }
          return bits;
        }),
      );
      return;
    case Type.Utf8:
    case Type.Binary:
    case Type.LargeUtf8:
    case Type.LargeBinary:
      crc.section(pieces.map(({ data }) => lengths(data)));
      crc.section(
        pieces.flatMap(({ data }) => {
          const offsets = data.valueOffsets;
          return validRuns(data).map(([first, count]) =>
            (data.values as Uint8Array).subarray(Number(offsets[first]), Number(offsets[first + count])),
          );
        }),
      );
      return;
    case Type.List:
    case Type.Map:
      crc.section(pieces.map(({ data }) => lengths(data)));
      // Arrow JS leaves a list's child whole when it slices the list: the offsets say which values are a row's.
      feed(
        crc,
        childPieces(pieces, (data) => data.children[0] as Data, 'offsets'),
      );
      return;
    case Type.FixedSizeList:
    case Type.Struct: {
      const width =
        type.typeId === Type.FixedSizeList ? (type as InstanceType<typeof arrow.FixedSizeList>).listSize : 1;
      const children = pieces[0]?.data.children.length ?? 0;
      for (let c = 0; c < children; c++)
        feed(
          crc,
          childPieces(pieces, (data) => data.children[c] as Data, width),
        );
      return;
    }
    default: {
      const fixed = pieces.every(
        ({ data }) => data.valueOffsets === undefined && data.dictionary === undefined && data.values !== undefined,
      );
      if (!fixed) {
        // Anything else (dictionaries, unions): its values as text, slowly; no table of the service has them.
        const values = pieces.flatMap(({ data }) => arrow.makeVector(data).toArray() as unknown[]);
        crc.section([Buffer.from(JSON.stringify(values, bigintsAsText))]);
        return;
      }
      crc.section(
        pieces.map(({ data }) => {
          // Fixed-width values, `stride` elements a row: a slice's buffer starts at its first row already, and the
          // buffer may run past the last one (IPC pads it). What lies under a null is zeroed in a copy.
          let values = data.values.subarray(0, data.length * data.stride);
          if (data.nullCount > 0) {
            values = values.slice();
            const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
            const rowBytes = data.stride * values.BYTES_PER_ELEMENT;
            for (let i = 0; i < data.length; i++)
              if (!data.getValid(i)) bytes.fill(0, i * rowBytes, (i + 1) * rowBytes);
          }
          return values;
        }),
      );
    }
  }
}

/**
 * A digest of rows by what they hold, not by how they were sent: the same rows of the same schema give the same
 * digest whether they came as JSON or Arrow, in one batch or many, sliced or not. An Idempotency-Key is matched
 * on it, so a client that encodes the same rows again (a re-run of a load) is recognised.
 */
export function rowsDigest(batches: readonly RecordBatch[]): string {
  const crc = new Crc();
  const columns = batches[0]?.numCols ?? 0;
  let rows = 0;
  for (const batch of batches) rows += batch.numRows;
  crc.number(rows);
  for (let c = 0; c < columns; c++) {
    crc.number(c);
    let base = 0;
    feed(
      crc,
      batches.map((batch) => {
        const piece = { data: batch.data.children[c] as Data, base };
        base += batch.numRows;
        return piece;
      }),
    );
  }
  return `${rows}:${crc.value.toString(16)}`;
}
