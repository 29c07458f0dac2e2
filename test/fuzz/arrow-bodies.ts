import type { Data, DataType, Field, RecordBatch, Schema } from 'apache-arrow';
import fc from 'fast-check';
import { arrow } from '../../src/arrow/arrow.js';
import { dataFromJson } from '../../src/arrow/from-json.js';
import { schemaOnlyStream } from '../../src/arrow/ipc.js';
import { ipcOf } from '../support/tables.js';
import { hostileNames, weighted } from './hostile.js';
import { validValue } from './values.js';

/** A request body and a few words on how it was made, for the failure report. */
export interface MadeBody {
  bytes: Uint8Array;
  note: string;
}

const { TimeUnit } = arrow;

/** Types beside the spellings of API.md §4: casts that must work, and types that must be refused cleanly. */
const OTHER_TYPES: readonly (() => DataType)[] = [
  () => new arrow.Int8(),
  () => new arrow.Int32(),
  () => new arrow.Int64(),
  () => new arrow.Uint64(),
  () => new arrow.Float16(),
  () => new arrow.Float32(),
  () => new arrow.Float64(),
  () => new arrow.Utf8(),
  () => new arrow.LargeUtf8(),
  () => new arrow.Binary(),
  () => new arrow.Bool(),
  () => new arrow.DateDay(),
  () => new arrow.DateMillisecond(),
  () => new arrow.Timestamp(TimeUnit.SECOND, 'UTC'),
  () => new arrow.Timestamp(TimeUnit.NANOSECOND, 'UTC'),
  () => new arrow.Timestamp(TimeUnit.MILLISECOND, 'Europe/Paris'),
  () => new arrow.Timestamp(TimeUnit.MICROSECOND),
  () => new arrow.Dictionary(new arrow.Utf8(), new arrow.Int32()),
  () => new arrow.Null(),
  () => new arrow.TimeMillisecond(),
  () => new arrow.DurationMillisecond(),
  () => new arrow.FixedSizeBinary(4),
  () => new arrow.List(new arrow.Field('item', new arrow.Float64(), true)),
  () => new arrow.FixedSizeList(3, new arrow.Field('item', new arrow.Float32(), true)),
  () => new arrow.FixedSizeList(3, new arrow.Field('item', new arrow.Float64(), true)),
  () => new arrow.FixedSizeList(8, new arrow.Field('item', new arrow.Float16(), true)),
  () => new arrow.Struct([new arrow.Field('a', new arrow.Int32(), true)]),
  () =>
    new arrow.Map_(
      new arrow.Field(
        'entries',
        new arrow.Struct([
          new arrow.Field('key', new arrow.Utf8(), false),
          new arrow.Field('value', new arrow.Int32()),
        ]) as never,
        false,
      ),
    ),
];

const otherType = (index: number): DataType => (OTHER_TYPES[index % OTHER_TYPES.length] as () => DataType)();

/** Deterministic filler values for a column of any type, from a small seed (fast-check picks the seed). */
function fillerValues(type: DataType, n: number, seed: number): unknown[] {
  let state = seed >>> 0 || 1;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state;
  };
  const one = (t: DataType): unknown => {
    const r = next();
    if (r % 11 === 0) return null;
    switch (t.typeId) {
      case arrow.Type.Int: {
        const bits = (t as InstanceType<typeof arrow.Int>).bitWidth;
        const v = (r % 200) - 100;
        return bits === 64 ? BigInt((t as InstanceType<typeof arrow.Int>).isSigned ? v : Math.abs(v)) : v;
      }
      case arrow.Type.Float:
        return (r % 1000) / 7;
      case arrow.Type.Utf8:
      case arrow.Type.LargeUtf8:
      case arrow.Type.Dictionary:
        return ['apple', 'banana', 'Über', ''][r % 4];
      case arrow.Type.Binary:
      case arrow.Type.LargeBinary:
        return new Uint8Array([r & 255, (r >> 8) & 255]);
      case arrow.Type.FixedSizeBinary:
        return new Uint8Array([r & 255, 1, 2, 3]);
      case arrow.Type.Bool:
        return r % 2 === 0;
      case arrow.Type.Date:
        return new Date((r % 20_000) * 86_400_000);
      case arrow.Type.Timestamp:
      case arrow.Type.Time:
        return r % 86_400_000;
      case arrow.Type.Duration:
        return BigInt(r % 1000);
      case arrow.Type.Null:
        return null;
      case arrow.Type.List:
        return [1, 2].map(() => one((t as InstanceType<typeof arrow.List>).children[0]?.type as DataType));
      case arrow.Type.FixedSizeList: {
        const list = t as InstanceType<typeof arrow.FixedSizeList>;
        return Array.from({ length: list.listSize }, () => (next() % 100) / 10);
      }
      case arrow.Type.Struct:
        return { a: r % 100 };
      case arrow.Type.Map:
        return new Map([['k', r % 10]]);
      default:
        return null;
    }
  };
  return Array.from({ length: n }, () => one(type));
}

function columnOf(type: DataType, n: number, seed: number): Data {
  try {
    return arrow.vectorFromArray(fillerValues(type, n, seed), type).data[0] as Data;
  } catch {
    return arrow.vectorFromArray(fillerValues(new arrow.Utf8(), n, seed), new arrow.Utf8()).data[0] as Data;
  }
}

function batchOf(fields: Field[], columns: Data[], n: number): RecordBatch {
  const schema = new arrow.Schema(fields);
  return new arrow.RecordBatch(
    schema,
    arrow.makeData({ type: new arrow.Struct(fields), length: n, nullCount: 0, children: columns }),
  );
}

/** A batch of the table's own columns from JSON rows the schema accepts; a column that will not convert goes null. */
function validBatch(schema: Schema, rows: Record<string, unknown>[]): RecordBatch {
  const columns = schema.fields.map((field) => {
    try {
      return dataFromJson(
        field,
        rows.map((row) => row[field.name]),
      );
    } catch {
      return columnOf(field.type, rows.length, 7);
    }
  });
  return batchOf(schema.fields, columns, rows.length);
}

/** How the columns of a valid stream are changed before it is written. */
type Drift =
  | { kind: 'same' }
  | { kind: 'reorder' }
  | { kind: 'drop'; which: number }
  | { kind: 'extra'; name: string; type: number }
  | { kind: 'retype'; which: number; type: number }
  | { kind: 'rename'; which: number; name: string }
  | { kind: 'non-null'; which: number };

function applyDrift(batch: RecordBatch, drift: Drift, seed: number, driftType: DataType): RecordBatch {
  const fields = [...batch.schema.fields];
  const columns = fields.map((_, i) => batch.data.children[i] as Data);
  const n = batch.numRows;
  const at = (which: number) => which % Math.max(1, fields.length);
  switch (drift.kind) {
    case 'same':
      return batch;
    case 'reorder':
      return batchOf([...fields].reverse(), [...columns].reverse(), n);
    case 'drop': {
      const i = at(drift.which);
      return batchOf(
        fields.filter((_, j) => j !== i),
        columns.filter((_, j) => j !== i),
        n,
      );
    }
    case 'extra': {
      const type = driftType;
      return batchOf([...fields, new arrow.Field(drift.name, type, true)], [...columns, columnOf(type, n, seed)], n);
    }
    case 'retype': {
      const i = at(drift.which);
      const type = driftType;
      const old = fields[i] as Field;
      fields[i] = new arrow.Field(old.name, type, true);
      columns[i] = columnOf(type, n, seed);
      return batchOf(fields, columns, n);
    }
    case 'rename': {
      const i = at(drift.which);
      const old = fields[i] as Field;
      fields[i] = new arrow.Field(drift.name, old.type, old.nullable);
      return batchOf(fields, columns, n);
    }
    case 'non-null': {
      const i = at(drift.which);
      const old = fields[i] as Field;
      fields[i] = new arrow.Field(old.name, old.type, !old.nullable);
      return batchOf(fields, columns, n);
    }
  }
}

const drifts: fc.Arbitrary<Drift> = weighted<Drift>(
  [6, fc.constant({ kind: 'same' })],
  [1, fc.constant({ kind: 'reorder' })],
  [1, fc.record({ kind: fc.constant('drop'), which: fc.nat() })],
  [1, fc.record({ kind: fc.constant('extra'), name: fc.oneof(hostileNames, fc.constant('extra')), type: fc.nat() })],
  [2, fc.record({ kind: fc.constant('retype'), which: fc.nat(), type: fc.nat() })],
  [1, fc.record({ kind: fc.constant('rename'), which: fc.nat(), name: hostileNames })],
  [1, fc.record({ kind: fc.constant('non-null'), which: fc.nat() })],
);

/** Where each message of an IPC stream lies: its length word, flatbuffer metadata and body. */
interface Span {
  start: number;
  metaStart: number;
  metaEnd: number;
  bodyEnd: number;
}

function spansOf(bytes: Uint8Array): Span[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const spans: Span[] = [];
  let pos = 0;
  while (pos + 8 <= bytes.length && view.getUint32(pos, true) === 0xffffffff) {
    const length = view.getInt32(pos + 4, true);
    if (length <= 0) break;
    const metaStart = pos + 8;
    const metaEnd = metaStart + length;
    const message = arrow.Message.decode(bytes.subarray(metaStart, metaEnd));
    const bodyEnd = metaEnd + Number(message.bodyLength);
    spans.push({ start: pos, metaStart, metaEnd, bodyEnd });
    pos = bodyEnd;
  }
  return spans;
}

/** Damage done to valid stream bytes; positions are taken modulo what they index. */
export type Damage =
  | { kind: 'none' }
  | { kind: 'flip'; at: number[]; xor: number }
  | { kind: 'length-word'; message: number; value: number }
  | { kind: 'meta-int32'; message: number; at: number; value: number }
  | { kind: 'meta-int64'; message: number; at: number; value: bigint }
  | { kind: 'body-int64'; message: number; at: number; value: bigint }
  | { kind: 'truncate'; at: number }
  | { kind: 'splice'; at: number; from: number }
  | { kind: 'no-eos' }
  | { kind: 'garbage-tail'; bytes: Uint8Array }
  | { kind: 'repeat-message'; message: number };

const INT32_EDGES = [0, 1, -1, 7, 8, 0x7fffffff, -0x80000000, 0x10000, 0x7ffffff8];
const INT64_EDGES = [0n, 1n, -1n, 2n ** 63n - 1n, -(2n ** 63n), 2n ** 62n, 2n ** 32n, 2n ** 31n, 1n << 40n];

const damages: fc.Arbitrary<Damage> = weighted<Damage>(
  [2, fc.constant({ kind: 'none' })],
  [
    3,
    fc.record({
      kind: fc.constant('flip'),
      at: fc.array(fc.nat(), { minLength: 1, maxLength: 4 }),
      xor: fc.integer({ min: 1, max: 255 }),
    }),
  ],
  [2, fc.record({ kind: fc.constant('length-word'), message: fc.nat(), value: fc.constantFrom(...INT32_EDGES) })],
  [
    3,
    fc.record({
      kind: fc.constant('meta-int32'),
      message: fc.nat(),
      at: fc.nat(),
      value: fc.constantFrom(...INT32_EDGES),
    }),
  ],
  [
    4,
    fc.record({
      kind: fc.constant('meta-int64'),
      message: fc.nat(),
      at: fc.nat(),
      value: fc.constantFrom(...INT64_EDGES),
    }),
  ],
  [
    2,
    fc.record({
      kind: fc.constant('body-int64'),
      message: fc.nat(),
      at: fc.nat(),
      value: fc.constantFrom(...INT64_EDGES),
    }),
  ],
  [3, fc.record({ kind: fc.constant('truncate'), at: fc.nat() })],
  [2, fc.record({ kind: fc.constant('splice'), at: fc.nat(), from: fc.nat() })],
  [1, fc.constant({ kind: 'no-eos' })],
  [1, fc.record({ kind: fc.constant('garbage-tail'), bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }) })],
  [1, fc.record({ kind: fc.constant('repeat-message'), message: fc.nat() })],
);

function describeDamage(damage: Damage): string {
  const { kind, ...rest } = damage;
  const parts = Object.entries(rest).map(([k, v]) =>
    v instanceof Uint8Array ? `${k}=${v.length}B` : `${k}=${Array.isArray(v) ? v.join('/') : String(v)}`,
  );
  return [kind, ...parts].join(' ');
}

/** The stream with `damage` done to it; `other` is the stream a splice takes its tail from. */
export function damage(bytes: Uint8Array, damage: Damage, other: Uint8Array): Uint8Array {
  const out = new Uint8Array(bytes);
  const view = new DataView(out.buffer);
  const spans = spansOf(bytes);
  const span = (i: number) => spans[i % Math.max(1, spans.length)];
  const aligned = (lo: number, hi: number, at: number, step: number) => {
    const slots = Math.floor((hi - lo) / step);
    return slots <= 0 ? undefined : lo + (at % slots) * step;
  };
  switch (damage.kind) {
    case 'none':
      return out;
    case 'flip':
      for (const at of damage.at) if (out.length > 0) out[at % out.length] = (out[at % out.length] ?? 0) ^ damage.xor;
      return out;
    case 'length-word': {
      const s = span(damage.message);
      if (s !== undefined) view.setInt32(s.start + 4, damage.value, true);
      return out;
    }
    case 'meta-int32':
    case 'meta-int64': {
      const s = span(damage.message);
      const step = damage.kind === 'meta-int32' ? 4 : 8;
      const pos = s === undefined ? undefined : aligned(s.metaStart, s.metaEnd - step + 1, damage.at, step);
      if (pos === undefined) return out;
      if (damage.kind === 'meta-int32') view.setInt32(pos, damage.value, true);
      else view.setBigInt64(pos, damage.value, true);
      return out;
    }
    case 'body-int64': {
      const s = span(damage.message);
      const pos = s === undefined ? undefined : aligned(s.metaEnd, s.bodyEnd - 7, damage.at, 8);
      if (pos !== undefined) view.setBigInt64(pos, damage.value, true);
      return out;
    }
    case 'truncate':
      return out.subarray(0, damage.at % Math.max(1, out.length));
    case 'splice': {
      const head = out.subarray(0, damage.at % Math.max(1, out.length));
      const tail = other.subarray(damage.from % Math.max(1, other.length));
      return Buffer.concat([head, tail]);
    }
    case 'no-eos':
      return out.subarray(0, Math.max(0, out.length - 8));
    case 'garbage-tail':
      return Buffer.concat([out, damage.bytes]);
    case 'repeat-message': {
      const s = span(damage.message);
      if (s === undefined) return out;
      return Buffer.concat([out.subarray(0, s.bodyEnd), out.subarray(s.start, s.bodyEnd), out.subarray(s.bodyEnd)]);
    }
  }
}

/** Rows the schema accepts, `n` of them. */
const rowsFor = (schema: Schema, n: { min: number; max: number }) =>
  fc.array(fc.record(Object.fromEntries(schema.fields.map((f) => [f.name, validValue(f)]))), {
    minLength: n.min,
    maxLength: n.max,
  });

/**
 * Arrow IPC request bodies for a table: valid streams of its columns, streams whose columns drifted (casts,
 * other types, unknown or missing columns), then most of them damaged at the byte level.
 */
export function arrowRowsBody(schema: Schema, otherSchema: Schema): fc.Arbitrary<MadeBody> {
  const batches = fc.array(rowsFor(schema, { min: 0, max: 6 }), { minLength: 0, maxLength: 3 });
  const bulk = rowsFor(schema, { min: 200, max: 600 }).map((rows) => [rows]);
  return fc
    .record({
      batches: weighted([10, batches], [1, bulk]),
      drift: drifts,
      damage: damages,
      other: rowsFor(otherSchema, { min: 1, max: 3 }),
      seed: fc.nat(),
    })
    .map(({ batches, drift, damage: harm, other, seed }) => {
      // One type instance for every batch: a Dictionary made twice has two ids, and the batches would disagree.
      const driftType = otherType('type' in drift ? drift.type : 0);
      const drifted = (rows: Record<string, unknown>[]) => applyDrift(validBatch(schema, rows), drift, seed, driftType);
      const rows = batches.map((b) => b.length).join('+') || 'schema only';
      const note = `arrow ${rows} rows, drift ${drift.kind}${'type' in drift ? ` to ${driftType}` : ''}`;
      let stream: Uint8Array;
      try {
        stream = batches.length === 0 ? schemaOnlyStream(drifted([]).schema) : ipcOf(batches.map(drifted));
      } catch (err) {
        // Arrow JS would not write this drift; the valid stream is still worth damaging.
        stream = ipcOf([validBatch(schema, batches[0] ?? [])]);
        return {
          bytes: damage(stream, harm, stream),
          note: `${note} (unwritable: ${(err as Error).message}), damage ${describeDamage(harm)}`,
        };
      }
      const otherStream = ipcOf([validBatch(otherSchema, other)]);
      return { bytes: damage(stream, harm, otherStream), note: `${note}, damage ${describeDamage(harm)}` };
    });
}

/** A random Arrow schema for `schema_ipc`: the spellings, other types, odd and duplicate names. */
const ipcFields = fc.array(
  fc.record({
    name: fc.oneof(fc.constantFrom('id', 'ID', 'name', 'v', 'x y'), hostileNames),
    type: fc.nat(),
    nullable: fc.boolean(),
  }),
  { minLength: 0, maxLength: 6 },
);

/** `schema_ipc` values: base64 of valid schema streams, damaged ones, streams with batches, and non-base64. */
export const schemaIpcValue: fc.Arbitrary<MadeBody> = fc
  .record({ fields: ipcFields, damage: damages, withBatch: fc.boolean(), nested: fc.boolean() })
  .map(({ fields, damage: harm, withBatch, nested }) => {
    const made = fields.map((f) => new arrow.Field(f.name, otherType(f.type), f.nullable));
    if (nested) {
      made.push(
        new arrow.Field(
          'deep',
          new arrow.List(
            new arrow.Field('item', new arrow.Struct([new arrow.Field('k', new arrow.Utf8(), true)]), true),
          ),
          true,
        ),
      );
    }
    const schema = new arrow.Schema(made);
    const stream =
      withBatch && made.length > 0
        ? ipcOf([
            batchOf(
              made,
              made.map((f, i) => columnOf(f.type, 2, i)),
              2,
            ),
          ])
        : schemaOnlyStream(schema);
    const bytes = damage(stream, harm, stream);
    return {
      bytes,
      note: `schema_ipc ${made.map((f) => `${f.name}:${f.type}`).join(', ')}${withBatch ? ' +batch' : ''}, damage ${describeDamage(harm)}`,
    };
  });
