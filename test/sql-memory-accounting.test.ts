import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import type { RecordBatch, Vector } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { StrataError } from '../src/errors.js';
import { statusOf } from '../src/http/errors.js';
import { copyBytesEstimate } from '../src/sql/copies.js';
import { RowGroupFeed } from '../src/sql/feed.js';
import { openLockedInstance } from '../src/sql/lockdown.js';
import { SqlMemoryBudget } from '../src/sql/memory-budget.js';

const MIB = 1024 * 1024;

describe('what a load reserves covers what DuckDB then holds', () => {
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

  const held = async () =>
    Number(
      (
        await loader.runAndReadAll(
          `SELECT coalesce(sum(memory_usage_bytes), 0)::DOUBLE FROM duckdb_memory() WHERE tag IN ('IN_MEMORY_TABLE', 'OVERFLOW_STRINGS')`,
        )
      ).getRows()[0]?.[0],
    );

  function batches(rows: number, dim: number, text: number): RecordBatch[] {
    const out: RecordBatch[] = [];
    for (let start = 0; start < rows; start += 8192) {
      const n = Math.min(8192, rows - start);
      const columns: Record<string, Vector> = {
        id: arrow.vectorFromArray(
          Array.from({ length: n }, (_, k) => BigInt(start + k)),
          new arrow.Int64(),
        ),
        x: arrow.vectorFromArray(
          Array.from({ length: n }, (_, k) => (k % 11 === 0 ? null : k / 3)),
          new arrow.Float64(),
        ),
      };
      if (text > 0)
        columns.s = arrow.vectorFromArray(
          Array.from({ length: n }, (_, k) => `${start + k}:`.padEnd(text, 'x')),
          new arrow.Utf8(),
        );
      if (dim > 0) {
        const values = Float32Array.from({ length: n * dim }, (_, i) => i % 13);
        const type = new arrow.FixedSizeList(dim, new arrow.Field('item', new arrow.Float32(), true));
        const child = arrow.makeData({ type: new arrow.Float32(), length: n * dim, data: values });
        columns.v = arrow.makeVector(arrow.makeData({ type, length: n, child }));
      }
      out.push(new arrow.Table(columns).batches[0] as RecordBatch);
    }
    return out;
  }

  const shapes = [
    { shape: '10 rows of numbers', rows: 10, dim: 0, text: 0 },
    { shape: '20k rows with 8-d vectors', rows: 20_000, dim: 8, text: 0 },
    { shape: '300k rows of numbers', rows: 300_000, dim: 0, text: 0 },
    { shape: '200k rows with 8-character text', rows: 200_000, dim: 0, text: 8 },
    { shape: '100k rows with 300-character text', rows: 100_000, dim: 0, text: 300 },
    { shape: '30k rows with 384-d vectors and text', rows: 30_000, dim: 384, text: 20 },
  ];
  test.each(shapes)('$shape', async ({ rows, dim, text }) => {
    const name = `t_${rows}_${dim}_${text}`;
    const columns = [
      'id BIGINT',
      'x DOUBLE',
      ...(text > 0 ? ['s VARCHAR'] : []),
      ...(dim > 0 ? [`v FLOAT[${dim}]`] : []),
    ];
    await loader.run(`CREATE TABLE ${name} (${columns.join(', ')})`);
    const data = batches(rows, dim, text);
    const before = await held();

    await feed.insert(name, data);

    const added = (await held()) - before;
    const estimate = copyBytesEstimate(data);
    expect(added).toBeGreaterThan(0);
    expect(estimate).toBeGreaterThanOrEqual(added);
    // Erring high, but not so far that the budget refuses loads that fit.
    expect(estimate).toBeLessThan(2 * added + 2 * MIB);
    await loader.run(`DROP TABLE ${name}`);
  });
});

describe('the node budget', () => {
  /** A database's copies as the budget sees them, whose letting go is recorded. */
  function holder(log: string[], name: string, state: { busy: boolean }) {
    return {
      idle: () => !state.busy,
      letGo: async () => {
        log.push(name);
        return 0;
      },
    };
  }

  test('a load that does not fit lets go of the least recently used idle databases, only as many as it needs', async () => {
    const budget = SqlMemoryBudget.ofMb(100);
    const log: string[] = [];
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => budget.open(holder(log, name, { busy: false }), 100));
    if (a === undefined || b === undefined || c === undefined || d === undefined) throw new Error('four accounts');
    c.settle(30 * MIB);
    c.lastUsedMs = 1;
    a.settle(30 * MIB);
    a.lastUsedMs = 2;
    b.settle(30 * MIB);
    b.lastUsedMs = 3;

    await d.reserve(50 * MIB, 'table "t"');

    expect(log).toEqual(['c', 'a']);
    expect(budget.usedBytes).toBe(80 * MIB);
    expect(budget.evictions).toBe(2);
  });

  test('when only busy databases hold it, the load is 503 sql_memory_busy with Retry-After and nothing is let go', async () => {
    const budget = SqlMemoryBudget.ofMb(100);
    const log: string[] = [];
    const busy = budget.open(holder(log, 'busy', { busy: true }), 100);
    const idle = budget.open(holder(log, 'idle', { busy: false }), 100);
    busy.settle(80 * MIB);
    idle.settle(10 * MIB);

    const refused = await idle.reserve(20 * MIB, 'table "t"').catch((err: unknown) => err);

    expect(refused).toBeInstanceOf(StrataError);
    expect(refused).toMatchObject({ kind: 'unavailable', code: 'sql_memory_busy', retryAfterS: 1 });
    expect(statusOf(refused as StrataError)).toBe(503);
    expect((refused as Error).message).toBe(
      'loading table "t" into SQL needs 20 MiB more, and this node\'s 100 MiB for SQL copies (STRATA_SQL_NODE_MEMORY_MB) is taken: 10 MiB by this database, 80 MiB by databases running statements; retry shortly',
    );
    expect(log).toEqual([]);
    expect(budget.usedBytes).toBe(90 * MIB);
  });

  test('a database never reserves past its own DuckDB limit, which spills the rest of a copy to disk', async () => {
    const budget = SqlMemoryBudget.ofMb(100);
    const own = budget.open(holder([], 'own', { busy: false }), 64);
    own.settle(60 * MIB);

    await own.reserve(500 * MIB, 'table "huge"');

    expect(budget.usedBytes).toBe(64 * MIB);
  });

  test('a closed database leaves the budget', async () => {
    const budget = SqlMemoryBudget.ofMb(100);
    const gone = budget.open(holder([], 'gone', { busy: true }), 100);
    gone.settle(90 * MIB);
    gone.close();

    await budget.open(holder([], 'next', { busy: false }), 100).reserve(90 * MIB, 'table "t"');

    expect(budget.usedBytes).toBe(90 * MIB);
  });
});
