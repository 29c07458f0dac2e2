import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import type { RecordBatch } from 'apache-arrow';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { ROW_GROUP_ROWS, RowGroupFeed } from '../src/sql/feed.js';
import { openLockedInstance } from '../src/sql/lockdown.js';

/**
 * The loader writes DuckDB's vector memory directly from several DuckDB threads, and the binding copies
 * without bounds checks: every row must go in exactly once, and a column whose buffer is shorter than its
 * length must be an error, never a read past the buffer (a crash).
 */
let instance: DuckDBInstance;
let loader: DuckDBConnection;
let feed: RowGroupFeed;
beforeAll(async () => {
  ({ instance, loader } = await openLockedInstance({ memoryMb: 1024, threads: 2 }));
  feed = RowGroupFeed.register(loader, 2);
});
afterAll(() => {
  loader?.closeSync();
  instance?.closeSync();
});

test('a column shorter than its row count is refused, not read past its end', async () => {
  await loader.run('CREATE TABLE t (x DOUBLE)');
  const field = new arrow.Field('x', new arrow.Float64(), true);
  // Arrow JS builds exactly this when `RecordBatch.select` skips a column: a length with no values behind it.
  const hollow = arrow.makeData({ type: new arrow.Float64(), length: 1024, nullCount: 0, data: new Float64Array(0) });
  const batch = new arrow.RecordBatch(
    new arrow.Schema([field]),
    arrow.makeData({ type: new arrow.Struct([field]), length: 1024, children: [hollow] }),
  );
  await expect(feed.insert('t', [batch])).rejects.toThrow(/column buffer holds 0 bytes/);
  expect((await loader.runAndReadAll('SELECT count(*) FROM t')).getRows()).toEqual([[0n]]);
});

test('batches of any size, across row groups and threads, go in exactly once, nulls included', async () => {
  await loader.run('CREATE TABLE u (i BIGINT, x DOUBLE, s VARCHAR, v FLOAT[2])');
  const total = 2 * ROW_GROUP_ROWS + 12_345;
  const batches: RecordBatch[] = [];
  // Uneven batch sizes, so lanes start and end inside batches.
  for (let start = 0, size = 777; start < total; start += size, size = (size * 7) % 40_000 || 1) {
    const n = Math.min(size, total - start);
    const ids = Array.from({ length: n }, (_, k) => start + k);
    batches.push(
      new arrow.Table({
        i: arrow.vectorFromArray(
          ids.map((i) => BigInt(i)),
          new arrow.Int64(),
        ),
        x: arrow.vectorFromArray(
          ids.map((i) => (i % 7 === 0 ? null : i / 4)),
          new arrow.Float64(),
        ),
        s: arrow.vectorFromArray(
          ids.map((i) => (i % 5 === 0 ? null : `s${i}`.repeat(i % 4))),
          new arrow.Utf8(),
        ),
        v: arrow.vectorFromArray(
          ids.map((i) => [i, -i]),
          new arrow.FixedSizeList(2, new arrow.Field('item', new arrow.Float32(), true)),
        ),
      }).batches[0] as RecordBatch,
    );
  }
  await feed.insert('u', batches);
  const summary = await loader.runAndReadAll(
    `SELECT count(*), count(DISTINCT i), min(i), max(i),
            bool_and((x IS NULL) = (i % 7 = 0) AND (x IS NULL OR x = i / 4)),
            bool_and((s IS NULL) = (i % 5 = 0) AND (s IS NULL OR s = repeat('s' || i, (i % 4)::INT))),
            bool_and(v[1] = i AND v[2] = -i)
     FROM u`,
  );
  expect(summary.getRows()).toEqual([[BigInt(total), BigInt(total), 0n, BigInt(total - 1), true, true, true]]);
});

test('short and long strings, multibyte text and binaries read back byte for byte; text that is not UTF-8 is NULL', async () => {
  await loader.run('CREATE TABLE w (i INTEGER, s VARCHAR, b BLOB)');
  // 12 bytes is the most DuckDB keeps inside a string's slot: around it, in ASCII and in two-byte characters.
  const texts = ['', 'a', 'abcdefghijkl', 'abcdefghijklm', 'éééééé', 'éééééé1', 'ü'.repeat(40), 'x'.repeat(5000)];
  const blobs = texts.map((_, k) => Uint8Array.from({ length: k * 3 }, (_, j) => (j * 97 + k) % 256));
  const rows = 3000;
  const text = (i: number) => texts[i % texts.length] as string;
  const blob = (i: number) => blobs[i % blobs.length] as Uint8Array;
  const encoder = new TextEncoder();
  const textBytes = Array.from({ length: rows }, (_, i) =>
    i === 2049 ? Uint8Array.from([0x61, 0xff, 0x62]) : encoder.encode(text(i)),
  );
  const column = (values: Uint8Array[], text: boolean) => {
    const valueOffsets = new Int32Array(values.length + 1);
    const data = new Uint8Array(values.reduce((n, v) => n + v.length, 0));
    values.forEach((v, i) => {
      data.set(v, valueOffsets[i] as number);
      valueOffsets[i + 1] = (valueOffsets[i] as number) + v.length;
    });
    const props = { length: values.length, nullCount: 0, valueOffsets, data };
    return text
      ? arrow.makeData({ type: new arrow.Utf8(), ...props })
      : arrow.makeData({ type: new arrow.Binary(), ...props });
  };
  const fields = [
    new arrow.Field('i', new arrow.Int32(), false),
    new arrow.Field('s', new arrow.Utf8(), true),
    new arrow.Field('b', new arrow.Binary(), true),
  ];
  const ids = arrow.makeData({
    type: new arrow.Int32(),
    length: rows,
    data: Int32Array.from({ length: rows }, (_, i) => i),
  });
  const batch = new arrow.RecordBatch(
    new arrow.Schema(fields),
    arrow.makeData({
      type: new arrow.Struct(fields),
      length: rows,
      children: [
        ids,
        column(textBytes, true),
        column(
          Array.from({ length: rows }, (_, i) => blob(i)),
          false,
        ),
      ],
    }),
  );
  await feed.insert('w', [batch]);
  const back = await loader.runAndReadAll('SELECT i, s, b FROM w ORDER BY i');
  const got = back.getRows();
  expect(got).toHaveLength(rows);
  for (const [i, s, b] of got as [number, string | null, { bytes: Uint8Array }][]) {
    expect(s).toBe(i === 2049 ? null : text(i));
    expect(Array.from(b.bytes)).toEqual(Array.from(blob(i)));
  }
  // Strings written into their slots compare, group and hash like strings DuckDB made itself.
  const grouped = await loader.runAndReadAll(
    `SELECT count(DISTINCT s), bool_and(s = ${`CASE i % 8 ${texts.map((t, k) => `WHEN ${k} THEN '${t}'`).join(' ')} END`} OR s IS NULL) FROM w`,
  );
  expect(grouped.getRows()).toEqual([[BigInt(texts.length), true]]);
});

test('user SQL cannot read the feed: it serves only the statement holding the load token', async () => {
  await expect(loader.run(`SELECT * FROM ${RowGroupFeed.FUNCTION}('guess')`)).rejects.toThrow(
    /internal to the service/,
  );
});
