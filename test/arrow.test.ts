import type { Field, RecordBatch } from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { castData } from '../src/arrow/cast.js';
import { writableBatches } from '../src/arrow/ipc.js';
import { takeColumns } from '../src/arrow/take.js';
import { rowsToJson } from '../src/arrow/to-json.js';
import { schemaFromFields } from '../src/engine/tables/schema.js';
import { batchFromJson, batchOf } from '../src/engine/writes/rows.js';

const schema = schemaFromFields([
  { name: 'i', type: 'i64' },
  { name: 'n', type: 'i32' },
  { name: 'b', type: 'bool' },
  { name: 'f', type: 'f32' },
  { name: 's', type: 'utf8' },
  { name: 'ls', type: 'large_utf8' },
  { name: 'bin', type: 'binary' },
  { name: 'd', type: 'date32' },
  { name: 't', type: 'timestamp_us' },
  { name: 'v', type: 'vector', dim: 2 },
  { name: 'l', type: 'list', item: 'i16' },
]);

const rows = Array.from({ length: 11 }, (_, i) => ({
  i: i % 3 === 0 ? null : i * 1000,
  n: 5 - i,
  b: i % 2 === 0,
  f: i / 4,
  s: i % 4 === 1 ? null : `row ${i}`,
  ls: 'é'.repeat(i),
  bin: Buffer.from([i, i + 1]).toString('base64'),
  d: `2024-01-${String(i + 1).padStart(2, '0')}`,
  t: `2024-01-01T00:00:00.${String(i).padStart(6, '0')}Z`,
  v: i % 5 === 2 ? null : [i, -i],
  l: Array.from({ length: i % 3 }, (_, j) => i + j),
}));

describe('Arrow ⇄ JSON on sliced data', () => {
  const batch = batchFromJson(schema, rows);

  test('any slice converts to exactly its rows, directly and through IPC (property)', () => {
    fc.assert(
      fc.property(fc.nat(rows.length), fc.nat(rows.length), (a, b) => {
        const [start, end] = a <= b ? [a, b] : [b, a];
        const slice = batch.slice(start, end);
        expect(rowsToJson([slice])).toEqual(rows.slice(start, end));
        const back = arrow.tableFromIPC(arrow.tableToIPC(new arrow.Table(writableBatches([slice])), 'stream'));
        expect(rowsToJson(back)).toEqual(rows.slice(start, end));
      }),
    );
  });

  test('casts read sliced columns from their first row', () => {
    const ints = arrow.vectorFromArray([1, 2, 3, 4, 5], new arrow.Int32()).data[0];
    const target = new arrow.Field('x', new arrow.Int64(), true);
    const sliced = ints?.slice(2, 3);
    if (sliced === undefined) throw new Error('no data');

    const cast = castData(sliced, target);

    expect(Array.from(cast.values as BigInt64Array)).toEqual([3n, 4n, 5n]);
  });
});

describe('copying rows gathered from several batches into one (takeColumns)', () => {
  const batch = batchFromJson(schema, rows);
  // Sliced batches too: Arrow JS counts values from a slice's first row but validity bits from its offset.
  const sources = [batch, batch.slice(3, 11), batch.slice(1, 7), batchFromJson(schema, rows.slice(4))];
  const firstRow = [0, 3, 1, 4];

  test('any runs of any sources come out as exactly their rows, through IPC too (property)', () => {
    const run = fc
      .nat(sources.length - 1)
      .chain((s) =>
        fc
          .tuple(fc.nat((sources[s] as RecordBatch).numRows), fc.nat((sources[s] as RecordBatch).numRows))
          .map(([a, b]) => [s, Math.min(a, b), Math.max(a, b)] as const),
      );
    fc.assert(
      fc.property(fc.array(run, { maxLength: 8 }), (runs) => {
        const columns = takeColumns(
          schema,
          runs.map(([s, start, end]) => [sources[s] as RecordBatch, start, end] as const),
        );
        if (columns === undefined) throw new Error('every column type of the schema can be copied');
        const expected = runs.flatMap(([s, start, end]) =>
          rows.slice((firstRow[s] ?? 0) + start, (firstRow[s] ?? 0) + end),
        );
        const taken = batchOf(schema, expected.length, columns);
        expect(rowsToJson([taken])).toEqual(expected);
        const back = arrow.tableFromIPC(arrow.tableToIPC(new arrow.Table([taken]), 'stream'));
        expect(rowsToJson(back)).toEqual(expected);
      }),
    );
  });

  test('columns are found by name in each batch, whatever their order there', () => {
    const reordered = new arrow.RecordBatch({
      s: batch.getChild('s')?.data[0],
      i: batch.getChild('i')?.data[0],
    } as never);
    const wanted = new arrow.Schema([schema.fields[0] as Field, schema.fields[4] as Field]);
    const columns = takeColumns(wanted, [
      [reordered, 2, 4],
      [batch, 0, 1],
    ]);
    expect(rowsToJson([batchOf(wanted, 3, columns ?? [])])).toEqual(
      [rows[2], rows[3], rows[0]].map((r) => ({ i: r?.i, s: r?.s })),
    );
  });

  test('a type it cannot copy is reported, not mangled', () => {
    const dictionary = new arrow.Schema([
      new arrow.Field('d', new arrow.Dictionary(new arrow.Utf8(), new arrow.Int32())),
    ]);
    expect(takeColumns(dictionary, [])).toBeUndefined();
  });
});
