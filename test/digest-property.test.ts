import type { RecordBatch, Table } from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { rowsDigest } from '../src/arrow/digest.js';

const { Field, Float32, FixedSizeList, Int64, Float64, Utf8, Bool, List, Binary } = arrow;

interface Row {
  id: bigint | null;
  score: number | null;
  name: string | null;
  flag: boolean | null;
  emb: number[] | null;
  tags: string[] | null;
  raw: Uint8Array | null;
}

const row: fc.Arbitrary<Row> = fc.record({
  id: fc.option(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })),
  score: fc.option(fc.double({ noNaN: true })),
  name: fc.option(fc.string({ maxLength: 12 })),
  flag: fc.option(fc.boolean()),
  emb: fc.option(fc.array(fc.float({ noNaN: true }), { minLength: 3, maxLength: 3 })),
  tags: fc.option(fc.array(fc.string({ maxLength: 4 }), { maxLength: 3 })),
  raw: fc.option(fc.uint8Array({ maxLength: 6 })),
});

function tableOf(rows: readonly Row[]): Table {
  const column = <K extends keyof Row>(key: K) => rows.map((r) => r[key]);
  return new arrow.Table({
    id: arrow.vectorFromArray(column('id'), new Int64()),
    score: arrow.vectorFromArray(column('score'), new Float64()),
    name: arrow.vectorFromArray(column('name'), new Utf8()),
    flag: arrow.vectorFromArray(column('flag'), new Bool()),
    emb: arrow.vectorFromArray(column('emb'), new FixedSizeList(3, new Field('item', new Float32(), true))),
    tags: arrow.vectorFromArray(column('tags'), new List(new Field('item', new Utf8(), true))),
    raw: arrow.vectorFromArray(column('raw'), new Binary()),
  });
}

/** The rows of `table` as one batch (a table of vectors made from arrays has one). */
function oneBatch(table: Table): RecordBatch[] {
  expect(table.batches).toHaveLength(1);
  return table.batches;
}

/** The same rows cut at `cuts`, as slices of one batch. */
function sliced(batch: RecordBatch, cuts: number[]): RecordBatch[] {
  const points = [...new Set([0, ...cuts.map((c) => c % (batch.numRows + 1)), batch.numRows])].sort((a, b) => a - b);
  return points.slice(1).map((end, i) => batch.slice(points[i] as number, end));
}

/** The same batches after an IPC round trip: fresh buffers, padded as IPC pads them. */
const reencoded = (batches: RecordBatch[]): RecordBatch[] =>
  arrow.tableFromIPC(arrow.tableToIPC(new arrow.Table(batches), 'stream')).batches;

describe('rowsDigest', () => {
  test('the same rows give the same digest however they are batched, sliced or encoded', () => {
    fc.assert(
      fc.property(
        fc.array(row, { minLength: 1, maxLength: 30 }),
        fc.array(fc.nat(), { maxLength: 4 }),
        (rows, cuts) => {
          const [whole] = oneBatch(tableOf(rows));
          if (whole === undefined) return;
          const expected = rowsDigest([whole]);
          expect(rowsDigest(sliced(whole, cuts)), 'sliced').toBe(expected);
          expect(rowsDigest(reencoded(sliced(whole, cuts))), 'sliced and encoded').toBe(expected);
          expect(rowsDigest(reencoded([whole])), 'encoded').toBe(expected);
          // Batches made row group by row group, as a reader of a file makes them.
          const groups = sliced(whole, cuts).map((b) => oneBatch(tableOf(rowsOf(b)))[0]);
          expect(rowsDigest(groups.filter((b): b is RecordBatch => b !== undefined)), 'rebuilt').toBe(expected);
        },
      ),
      { numRuns: 300 },
    );
  });

  test('where one section ends and the next begins is part of the digest: nulls here and values there differ', () => {
    const of = (a: (number | null)[], b: (number | null)[]) =>
      rowsDigest(
        new arrow.Table({
          a: arrow.vectorFromArray(a, new Float64()),
          b: arrow.vectorFromArray(b, new Float64()),
        }).batches,
      );

    expect(of([null, 1], [7, 0])).not.toBe(of([0, 0], [7, null]));
    expect(of([null, null], [1, 2])).not.toBe(of([0, 0], [null, null]));
  });

  test('rows that differ in any value, null or order give another digest', () => {
    fc.assert(
      fc.property(fc.array(row, { minLength: 2, maxLength: 20 }), fc.nat(), row, (rows, at, other) => {
        const changed = rows.slice();
        changed[at % rows.length] = other;
        const same = JSON.stringify(changed, bigintsAsText) === JSON.stringify(rows, bigintsAsText);
        const a = rowsDigest(oneBatch(tableOf(rows)));
        const b = rowsDigest(oneBatch(tableOf(changed)));
        if (!same) expect(b).not.toBe(a);
        const swapped = [rows[1] as Row, rows[0] as Row, ...rows.slice(2)];
        if (JSON.stringify(swapped, bigintsAsText) !== JSON.stringify(rows, bigintsAsText)) {
          expect(rowsDigest(oneBatch(tableOf(swapped)))).not.toBe(a);
        }
      }),
      { numRuns: 300 },
    );
  });
});

const bigintsAsText = (_: string, v: unknown) =>
  typeof v === 'bigint' ? `${v}n` : v instanceof Uint8Array ? Array.from(v) : v;

/** A batch's rows back as `Row`s, to build the same rows again from scratch. */
function rowsOf(batch: RecordBatch): Row[] {
  return Array.from({ length: batch.numRows }, (_, i) => {
    const value = (name: string) => batch.getChild(name)?.get(i) ?? null;
    const list = (name: string) => {
      const v = value(name);
      return v === null ? null : Array.from(v as Iterable<unknown>);
    };
    return {
      id: value('id') as bigint | null,
      score: value('score') as number | null,
      name: value('name') as string | null,
      flag: value('flag') as boolean | null,
      emb: list('emb') as number[] | null,
      tags: list('tags') as string[] | null,
      raw: value('raw') as Uint8Array | null,
    };
  });
}
