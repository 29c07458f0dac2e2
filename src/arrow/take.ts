import type { Data, DataType, RecordBatch, Schema } from 'apache-arrow';
import { arrow } from './arrow.js';

const { Type } = arrow;

/**
 * Rows `start` to `end` (exclusive) of a column's data, counted as Arrow JS counts them: from the data's first
 * row, whatever its offset.
 */
export type Run = readonly [data: Data, start: number, end: number];

type Offsets = Int32Array | BigInt64Array;

/** The types `takeData` copies; rows of any other stay where they are (see `takeColumns`). */
function canTake(type: DataType): boolean {
  switch (type.typeId) {
    case Type.Bool:
    case Type.Int:
    case Type.Float:
    case Type.Date:
    case Type.Timestamp:
    case Type.Time:
    case Type.Duration:
    case Type.Utf8:
    case Type.LargeUtf8:
    case Type.Binary:
    case Type.LargeBinary:
    case Type.FixedSizeBinary:
      return true;
    case Type.FixedSizeList:
    case Type.List:
    case Type.Struct:
      return type.children.every((child) => canTake(child.type));
    default:
      return false;
  }
}

const lengthOf = (runs: readonly Run[]) => runs.reduce((n, [, start, end]) => n + end - start, 0);

/** Calls `each(data, row, i)` for every row of `runs`, `i` counting rows across them. */
function forEachRow(runs: readonly Run[], each: (data: Data, row: number, i: number) => void): void {
  let i = 0;
  for (const [data, start, end] of runs) for (let row = start; row < end; row++) each(data, row, i++);
}

const setBit = (bits: Uint8Array, i: number) => {
  bits[i >> 3] = (bits[i >> 3] ?? 0) | (1 << (i & 7));
};

/**
 * The rows of `runs`, in that order, as one new column of `type`. Arrow JS indexes values and value offsets
 * from a data's first row but validity and boolean bits from its offset; each is read the way Arrow JS reads it.
 */
function takeData(type: DataType, runs: readonly Run[]): Data {
  const length = lengthOf(runs);
  const bitmap = new Uint8Array((length + 7) >> 3);
  let nullCount = 0;
  forEachRow(runs, (data, row, i) => {
    if (data.getValid(row)) setBit(bitmap, i);
    else nullCount++;
  });
  const base = { type, length, nullCount, nullBitmap: nullCount === 0 ? undefined : bitmap };
  // One call for every type: makeData's props are typed per type, which a switch on typeId cannot narrow.
  const make = (props: object): Data => arrow.makeData({ ...base, ...props } as never);
  switch (type.typeId) {
    case Type.Bool: {
      const bits = new Uint8Array((length + 7) >> 3);
      forEachRow(runs, (data, row, i) => {
        const at = data.offset + row;
        if (((data.values as Uint8Array)[at >> 3] ?? 0) & (1 << (at & 7))) setBit(bits, i);
      });
      return make({ data: bits });
    }
    case Type.Utf8:
    case Type.LargeUtf8:
    case Type.Binary:
    case Type.LargeBinary: {
      const large = type.typeId === Type.LargeUtf8 || type.typeId === Type.LargeBinary;
      const offsets = large ? new BigInt64Array(length + 1) : new Int32Array(length + 1);
      const spans = runs.map(([data, start, end]) => spanOf(data, start, end));
      const bytes = new Uint8Array(spans.reduce((n, [from, to]) => n + to - from, 0));
      let at = 0;
      let i = 0;
      runs.forEach(([data, start, end], r) => {
        const source = data.valueOffsets as Offsets;
        const [from, to] = spans[r] as [number, number];
        bytes.set((data.values as Uint8Array).subarray(from, to), at);
        for (let row = start; row < end; row++) {
          const next = at + Number(source[row + 1]) - from;
          offsets[++i] = (large ? BigInt(next) : next) as never;
        }
        at += to - from;
      });
      return make({ valueOffsets: offsets as never, data: bytes });
    }
    case Type.FixedSizeList: {
      const size = (type as InstanceType<typeof arrow.FixedSizeList>).listSize;
      const items = runs.map(([data, start, end]) => [data.children[0] as Data, start * size, end * size] as const);
      return make({ child: takeData(childType(type), items) });
    }
    case Type.List: {
      const offsets = new Int32Array(length + 1);
      let i = 0;
      const items = runs.map(([data, start, end]) => {
        const source = data.valueOffsets as Int32Array;
        for (let row = start; row < end; row++) {
          offsets[i + 1] = (offsets[i] ?? 0) + (source[row + 1] ?? 0) - (source[row] ?? 0);
          i++;
        }
        return [data.children[0] as Data, ...spanOf(data, start, end)] as const;
      });
      return make({ valueOffsets: offsets, child: takeData(childType(type), items) });
    }
    case Type.Struct:
      return make({
        children: type.children.map((field, j) =>
          takeData(
            field.type,
            runs.map(([data, start, end]) => [data.children[j] as Data, start, end] as const),
          ),
        ),
      });
    default: {
      // Fixed width: `stride` array elements per row.
      const first = runs[0]?.[0];
      const stride = first?.stride ?? 1;
      const Values = (first?.values ?? new Uint8Array(0)).constructor as Uint8ArrayConstructor;
      const values = new Values(length * stride);
      let at = 0;
      for (const [data, start, end] of runs) {
        values.set((data.values as Uint8Array).subarray(start * stride, end * stride), at);
        at += (end - start) * stride;
      }
      return make({ data: values as never });
    }
  }
}

const childType = (type: DataType): DataType => (type.children[0] as { type: DataType }).type;

/** Where rows `start` to `end` of variable-width data lie in its values (or child). */
function spanOf(data: Data, start: number, end: number): [number, number] {
  const offsets = data.valueOffsets as Offsets;
  return [Number(offsets[start]), Number(offsets[end])];
}

/**
 * The columns of `schema` over runs of rows of several batches, copied into one column each (found by name in
 * each batch, whose column order may differ): an answer of rows gathered from many places then encodes as one
 * IPC message rather than one per run. Undefined when a column's type cannot be copied.
 */
export function takeColumns(
  schema: Schema,
  runs: readonly (readonly [batch: RecordBatch, start: number, end: number])[],
): Data[] | undefined {
  if (!schema.fields.every((f) => canTake(f.type))) return undefined;
  const positions = new Map<Schema, Map<string, number>>();
  const columnOf = (batch: RecordBatch, name: string): Data => {
    let byName = positions.get(batch.schema);
    if (byName === undefined) {
      byName = new Map(batch.schema.fields.map((f, i) => [f.name, i] as const));
      positions.set(batch.schema, byName);
    }
    return batch.data.children[byName.get(name) ?? -1] as Data;
  };
  return schema.fields.map((field) =>
    takeData(
      field.type,
      runs.map(([batch, start, end]) => [columnOf(batch, field.name), start, end] as const),
    ),
  );
}
