import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Connection, connect, type Table as LanceTable } from '@lancedb/lancedb';
import type { Table as ArrowTable } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { RowKeys, readByKeys, rowIdsOf } from '../src/engine/lance/row-keys.js';
import { ROW_KEY } from '../src/engine/tables/schema.js';
import { rowKeysOf } from '../src/engine/writes/rows.js';

let dir: string;
let connection: Connection;
let lance: LanceTable;

const schema = new arrow.Schema([new arrow.Field(ROW_KEY, new arrow.Int64(), false)]);
const rowsWithKeys = (from: number, n: number) =>
  new arrow.Table({ [ROW_KEY]: arrow.makeVector(BigInt64Array.from({ length: n }, (_, i) => BigInt(from + i))) });

/** Every row's id and key, read from Lance itself. */
async function truth(): Promise<{ ids: bigint[]; keys: bigint[] }> {
  const rows = await lance.query().select([ROW_KEY]).withRowId().toArrow();
  return { ids: rowIdsOf(rows), keys: Array.from(rows.getChild(ROW_KEY)?.toArray() as BigInt64Array) };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'strata-rowkeys-'));
  connection = await connect(dir, { readConsistencyInterval: 0 });
  lance = await connection.createEmptyTable('t', schema);
  // Three appends: three fragments, keys not in row-id order within the last one.
  await lance.add(rowsWithKeys(0, 100));
  await lance.add(rowsWithKeys(100, 50));
  await lance.add(new arrow.Table({ [ROW_KEY]: arrow.makeVector(BigInt64Array.from([500n, 300n, 400n])) }));
});
afterAll(() => {
  lance?.close();
  connection?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('row keys by Lance row id', () => {
  test('answers each id with its row key, in the order asked, across fragments', async () => {
    const { ids, keys } = await truth();
    const cache = new RowKeys(lance);
    const order = ids.map((_, i) => i).reverse();
    expect(await cache.of(order.map((i) => ids[i] as bigint))).toEqual(order.map((i) => keys[i]));
    // Answered by id; the buckets load behind the answer, for the next search.
    expect(cache.bucketCount).toBe(0);
    await cache.loaded();
    expect(cache.bucketCount).toBe(3);
    expect(await cache.of(order.map((i) => ids[i] as bigint))).toEqual(order.map((i) => keys[i]));
  });

  test('loads keys of every size whole, in both halves of their 64 bits', async () => {
    // Row keys count up from zero (-1 stands for no row here).
    const keys = [0n, 2n ** 40n + 7n, 2n ** 32n - 1n, 2n ** 63n - 1n, 2n ** 32n, 3n * 2n ** 32n + 5n];
    const own = await connection.createEmptyTable('halves', schema);
    try {
      await own.add(new arrow.Table({ [ROW_KEY]: arrow.makeVector(BigInt64Array.from(keys.slice(0, 3))) }));
      await own.add(new arrow.Table({ [ROW_KEY]: arrow.makeVector(BigInt64Array.from(keys.slice(3))) }));
      const rows = await own.query().select([ROW_KEY]).withRowId().toArrow();
      const ids = rowIdsOf(rows);
      const cache = new RowKeys(own);
      await cache.of(ids);
      await cache.loaded();
      expect(cache.bucketCount).toBe(2);
      expect(await cache.of(ids)).toEqual(Array.from(rows.getChild(ROW_KEY)?.toArray() as BigInt64Array));
      expect((await cache.of(ids)).sort()).toEqual([...keys].sort());
    } finally {
      own.close();
    }
  });

  test('a lookup on a table that cannot be read fails, and leaves no failure unhandled', async () => {
    const closed = await connection.openTable('t');
    const { ids } = await truth();
    closed.close();
    await expect(new RowKeys(closed).of(ids.slice(0, 3))).rejects.toThrow();
  });

  test('a row deleted before its bucket loads has no key; moved rows are found under their new ids', async () => {
    const { ids: before } = await truth();
    const cache = new RowKeys(lance);
    await lance.delete(`${ROW_KEY} = 120`);
    const [gone] = await cache.of([before[120] as bigint]);
    expect(gone).toBeUndefined();

    await lance.optimize();
    const { ids, keys } = await truth();
    expect(ids).not.toEqual(before.filter((_, i) => i !== 120));
    expect(await cache.of(ids)).toEqual(keys);
  });

  test('trim lets go of buckets no search asked for, once the cache holds over twice the rows', async () => {
    await lance.add(rowsWithKeys(1000, 70_000)); // past the slack a small table gets
    const cache = new RowKeys(lance);
    const { ids } = await truth();
    await cache.of(ids);
    await cache.loaded();
    const held = cache.bucketCount;
    cache.trim(ids.length);
    expect(cache.bucketCount).toBe(held); // within twice the rows: kept
    await cache.of(ids.slice(0, 1));
    cache.trim(1);
    expect(cache.bucketCount).toBe(1); // over: only the bucket asked for since the last trim is kept
  });

  test('warm loads every bucket above those held, and nothing while no search uses the map', async () => {
    const cache = new RowKeys(lance);
    await cache.warm();
    expect(cache.bucketCount).toBe(0);

    const { ids: before } = await truth();
    const [lowest] = [...before].sort((a, b) => Number(a - b));
    await cache.of([lowest as bigint]);
    await cache.loaded();
    await lance.add(rowsWithKeys(100_000, 10)); // a fragment numbered above all others
    await cache.warm();
    const { ids, keys } = await truth();
    const buckets = new Set(ids.map((id) => id >> 32n));
    expect(cache.bucketCount).toBe(buckets.size);
    expect(await cache.of(ids)).toEqual(keys);
    expect(cache.bucketCount).toBe(buckets.size); // nothing left to load
  });
});

describe('row keys looked up by searches at once', () => {
  test('keeps the keys of the ids it knew when it began, and lets go only of a bucket it found lacking a row', async () => {
    const table = await connection.createTable('raced', rowsWithKeys(0, 10));
    await table.add(rowsWithKeys(100, 5));
    try {
      const ids = rowIdsOf(await table.query().select([ROW_KEY]).withRowId().toArrow());
      const [first, , , , fifth] = ids;
      const other = ids[10] as bigint;
      // Each lookup's read by id waits for its own gate.
      const gates: (() => void)[] = [];
      const held = new Proxy(table, {
        get(target, prop, receiver) {
          if (prop !== 'takeRowIds') return Reflect.get(target, prop, receiver);
          return (rowIds: bigint[]) => {
            const gate = new Promise<void>((resolve) => gates.push(resolve));
            const taken = target.takeRowIds(rowIds).select([ROW_KEY]).withRowId();
            const toArrow = async () => {
              await gate;
              return taken.toArrow();
            };
            return { select: () => ({ withRowId: () => ({ toArrow }) }) };
          };
        },
      });
      const cache = new RowKeys(held);
      // A asks for an id of the first fragment before its bucket is loaded; its read waits.
      const a = cache.of([first as bigint]);
      // C asks for the same: its read ends at once, and the bucket loads.
      const c = cache.of([first as bigint]);
      await new Promise((resolve) => setTimeout(resolve, 20));
      gates[1]?.();
      await c;
      await cache.loaded();
      // B knows the first fragment's ids now, not the second's; its read waits.
      const b = cache.of([fifth as bigint, other]);
      await new Promise((resolve) => setTimeout(resolve, 20));
      // A's read ends (it had found that bucket absent, not lacking a row), then B's.
      gates[0]?.();
      expect(await a).toEqual([0n]);
      gates[2]?.();
      expect(await b).toEqual([4n, 100n]);
    } finally {
      table.close();
    }
  });
});

describe('rows read by key', () => {
  const keysRead = (tables: ArrowTable[]) =>
    tables.flatMap((t) => Array.from(rowKeysOf(t))).sort((a, b) => Number(a - b));

  test('by the ids a search saw, leaving out deleted rows and finding moved ones by key', async () => {
    const moving = await connection.createEmptyTable('moving', schema);
    await moving.add(rowsWithKeys(0, 20));
    await moving.add(rowsWithKeys(20, 20));
    const seen = await moving.query().select([ROW_KEY]).withRowId().toArrow();
    const ids = new Map(
      Array.from(seen.getChild(ROW_KEY)?.toArray() as BigInt64Array).map((key, i) => [
        key,
        rowIdsOf(seen)[i] as bigint,
      ]),
    );
    const wanted = [3n, 25n, 7n, 39n];

    expect(keysRead(await readByKeys(moving, wanted, [ROW_KEY], ids))).toEqual([3n, 7n, 25n, 39n]);
    // Row 7 replaced (deleted, written again under its key): its old id names nothing, its key the new row.
    await moving.delete(`${ROW_KEY} = 7`);
    await moving.add(rowsWithKeys(7, 1));
    const afterDelete = await readByKeys(moving, [25n, 7n], [ROW_KEY], ids);
    expect(keysRead(afterDelete)).toEqual([7n, 25n]);
    // Compaction moves every row: the ids seen name nothing now, and the keys find the rows.
    await moving.delete(`${ROW_KEY} = 25`);
    await moving.optimize();
    expect(keysRead(await readByKeys(moving, wanted, [ROW_KEY], ids))).toEqual([3n, 7n, 39n]);
    moving.close();
  });
});
