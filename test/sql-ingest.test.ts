import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { BatchAppender } from '../src/sql/ingest.js';

/**
 * The loader writes DuckDB's vector memory directly, and the binding copies without bounds checks: a column
 * whose buffer is shorter than its length must be an error, never a read past the buffer (a crash).
 */
let instance: DuckDBInstance;
beforeAll(async () => {
  instance = await DuckDBInstance.create(':memory:');
});
afterAll(() => instance?.closeSync());

test('a column shorter than its row count is refused, not read past its end', async () => {
  const connection = await instance.connect();
  await connection.run('CREATE TABLE t (x DOUBLE)');
  const appender = await connection.createAppender('t');
  const field = new arrow.Field('x', new arrow.Float64(), true);
  // Arrow JS builds exactly this when `RecordBatch.select` skips a column: a length with no values behind it.
  const hollow = arrow.makeData({ type: new arrow.Float64(), length: 1024, nullCount: 0, data: new Float64Array(0) });
  const batch = new arrow.RecordBatch(
    new arrow.Schema([field]),
    arrow.makeData({ type: new arrow.Struct([field]), length: 1024, children: [hollow] }),
  );
  expect(() => new BatchAppender(appender).append(batch)).toThrow(/column buffer holds 0 bytes/);
  appender.closeSync();
  connection.closeSync();
});

test('whole batches go in exactly, nulls included', async () => {
  const connection = await instance.connect();
  await connection.run('CREATE TABLE u (x DOUBLE, s VARCHAR)');
  const appender = await connection.createAppender('u');
  const xs = Array.from({ length: 5000 }, (_, i) => (i % 7 === 0 ? null : i / 4));
  const ss = Array.from({ length: 5000 }, (_, i) => (i % 5 === 0 ? null : `s${i}`.repeat(i % 4)));
  const table = new arrow.Table({
    x: arrow.vectorFromArray(xs, new arrow.Float64()),
    s: arrow.vectorFromArray(ss, new arrow.Utf8()),
  });
  const into = new BatchAppender(appender);
  for (const batch of table.batches) into.append(batch);
  appender.closeSync();
  const rows = (await connection.runAndReadAll('SELECT x, s FROM u')).getRowObjectsJS();
  expect(rows.map((r) => r.x)).toEqual(xs);
  expect(rows.map((r) => r.s)).toEqual(ss);
  connection.closeSync();
});
