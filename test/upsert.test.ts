import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ReadOptions } from '../src/engine/rows/source.js';
import {
  activeLocalDatabase,
  type Client,
  onTableHandle,
  startStrata,
  type TestServer,
  upkeepPass,
} from './support/server.js';
import { readTable, tablesOf } from './support/tables.js';

/**
 * Primary keys and upsert (docs/api.md, Primary keys and Upsert): declared at creation, kept unique by every
 * write, and written by key in one commit. Uniqueness across nodes is in nodes-upsert.test.ts.
 */

let server: TestServer;
let api: Client;
let tables: ReturnType<typeof tablesOf>;
let tableNo = 0;

beforeAll(async () => {
  server = await startStrata({ STRATA_UPKEEP_INTERVAL_MS: '3600000' });
  api = await server.as('acme');
  await activeLocalDatabase(api, 'pk');
  tables = tablesOf(api, 'pk');
});
afterAll(() => server.close());

/** A new table keyed by `id` (i64), with a text column under a full-text index unless `searched` is false. */
async function keyedTable(searched = true): Promise<string> {
  const name = `items${tableNo++}`;
  const created = await tables.create({
    table_name: name,
    schema: [
      { name: 'id', type: 'i64' },
      { name: 'body', type: 'utf8' },
    ],
    indexes: { fts: searched ? ['body'] : [] },
    primary_key: 'id',
  });
  expect(created.status).toBe(200);
  return name;
}

/** Notes the options of every read by predicate of a table's rows until the function it returns is called. */
function recordingReads(handle: { rows: unknown }, reads: ReadOptions[]): () => void {
  const source = handle.rows as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const read = source.rowsWhere?.bind(handle.rows);
  source.rowsWhere = (where, columns, options) => {
    reads.push((options ?? {}) as ReadOptions);
    return read?.(where, columns, options) as Promise<unknown>;
  };
  return () => {
    delete source.rowsWhere;
  };
}

type Item = { id: number; body: string };
const byId = (rows: Record<string, unknown>[]) =>
  rows.map((r) => ({ id: Number(r.id), body: r.body as string })).sort((a, b) => a.id - b.id);
const stored = async (table: string): Promise<Item[]> => byId(await readTable(server, 'acme', 'pk', table));

describe('create_table primary_key', () => {
  test('is shown by create_table and /v1/schema (both encodings), made non-null and given a scalar index', async () => {
    const name = await keyedTable();
    const schema = await tables.schema(name);
    expect(schema.status).toBe(200);
    expect(schema.json).toEqual([
      { name: 'id', type: 'i64', nullable: false, primary_key: true, indexes: [{ kind: 'scalar', type: 'btree' }] },
      { name: 'body', type: 'utf8', nullable: true, indexes: [{ kind: 'fts', analyzer: 'ascii_lower' }] },
    ]);
    const ipc = await tables.schema(name, 'ipc');
    expect(ipc.json).toMatchObject({ primary_key: 'id', indexes: { scalar: [{ column: 'id', type: 'btree' }] } });
    const plain = await tables.create({ table_name: 'plain', schema: [{ name: 'id', type: 'i64' }] });
    expect(plain.json).toMatchObject({ primary_key: null });
  });

  test('gives a binary or large_utf8 key a bitmap index, and keeps a scalar index declared on the key', async () => {
    for (const type of ['binary', 'large_utf8']) {
      const made = await tables.create({ table_name: `k_${type}`, schema: [{ name: 'k', type }], primary_key: 'k' });
      expect(made.json).toMatchObject({ primary_key: 'k', indexes: { scalar: [{ column: 'k', type: 'bitmap' }] } });
      expect((await tables.upsert(`k_${type}`, [{ k: 'YQ==' }, { k: 'Yg==' }])).json).toEqual({
        inserted: 2,
        updated: 0,
      });
      expect((await tables.upsert(`k_${type}`, [{ k: 'YQ==' }])).json).toEqual({ inserted: 0, updated: 1 });
    }
    // Lance builds no BTREE of large_utf8: asking for one is a 400, not a failure to build it.
    const btree = await tables.create({
      table_name: 'big_btree',
      schema: [{ name: 'k', type: 'large_utf8' }],
      indexes: { scalar: [{ column: 'k', kind: 'btree' }] },
    });
    expect(btree.status).toBe(400);
    expect(btree.json.error).toContain('column "k" is large_utf8; a btree index needs');
    const declared = await tables.create({
      table_name: 'declared',
      schema: [{ name: 'k', type: 'utf8' }],
      indexes: { scalar: [{ column: 'k', kind: 'bitmap' }] },
      primary_key: 'k',
    });
    expect(declared.json).toMatchObject({ indexes: { scalar: [{ column: 'k', type: 'bitmap' }] } });
  });

  test.each([
    [{ name: 'id', type: 'i64' }, 'missing', /primary_key: column "missing" is not in the schema/],
    [{ name: 'score', type: 'f64' }, 'score', /column "score" is f64; a primary key is an integer, string or binary/],
    [{ name: 'tags', type: 'list', item: 'utf8' }, 'tags', /column "tags" is list; a primary key is an integer/],
    [{ name: 'day', type: 'date32' }, 'day', /column "day" is date32/],
    [
      { name: 'id', type: 'i64', nullable: true },
      'id',
      /column "id" is declared nullable; a primary key is never null/,
    ],
  ])('refuses %j keyed by %s with a 400 naming the column', async (column, key, message) => {
    const res = await tables.create({ table_name: `bad${tableNo++}`, schema: [column], primary_key: key });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
  });
});

describe('upsert', () => {
  test('inserts new keys and replaces the rows of keys the table holds, answering the counts', async () => {
    const name = await keyedTable();
    const first = await tables.upsert(name, [
      { id: 1, body: 'apple' },
      { id: 2, body: 'pear' },
      { id: 3, body: 'plum' },
    ]);
    expect(first.status).toBe(200);
    expect(first.json).toEqual({ inserted: 3, updated: 0 });
    expect(first.headers.get('x-strata-table-version')).toMatch(/^\d+$/);
    const second = await tables.upsert(name, [
      { id: 3, body: 'cherry' },
      { id: 4, body: 'fig' },
      { id: 1, body: 'banana' },
    ]);
    expect(second.json).toEqual({ inserted: 1, updated: 2 });
    expect(await stored(name)).toEqual([
      { id: 1, body: 'banana' },
      { id: 2, body: 'pear' },
      { id: 3, body: 'cherry' },
      { id: 4, body: 'fig' },
    ]);
    // Search sees the replaced rows' new text only.
    const hits = async (q: string) =>
      (
        await api.request<{ data: { id: number }[] }>(
          'POST',
          '/v1/hybrid_search/pk',
          { table_name: name, text_query: q, text_field: 'body', k: 10, projection: ['id'] },
          { accept: 'application/json' },
        )
      ).json.data.map((r) => Number(r.id));
    expect(await hits('apple')).toEqual([]);
    expect(await hits('banana')).toEqual([1]);
  });

  test('refuses two rows with one key in a body with a 400 naming both rows, and writes nothing', async () => {
    const name = await keyedTable();
    await tables.upsert(name, [{ id: 1, body: 'kept' }]);
    const res = await tables.upsert(name, [
      { id: 5, body: 'a' },
      { id: 1, body: 'b' },
      { id: 5, body: 'c' },
    ]);
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/rows 0 and 2 both have id = 5/);
    expect(await stored(name)).toEqual([{ id: 1, body: 'kept' }]);
  });

  test('refuses a row without its key, and a table without a primary key, with a 400', async () => {
    const name = await keyedTable();
    const missing = await tables.upsert(name, [{ id: 1, body: 'a' }, { body: 'b' }]);
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatch(/row 1, column "id"/);
    await tables.create({ table_name: 'nokey', schema: [{ name: 'id', type: 'i64' }] });
    const nokey = await tables.upsert('nokey', [{ id: 1 }]);
    expect(nokey.status).toBe(400);
    expect(nokey.json.error).toMatch(/table "nokey" has no primary key/);
    expect(await stored(name)).toEqual([]);
  });

  test('with an Idempotency-Key, a repeat answers the first counts and writes nothing', async () => {
    const name = await keyedTable();
    await tables.upsert(name, [{ id: 1, body: 'one' }]);
    const body = [
      { id: 1, body: 'uno' },
      { id: 2, body: 'dos' },
    ];
    const first = await tables.upsert(name, body, { 'idempotency-key': 'upsert-1' });
    await tables.upsert(name, [{ id: 1, body: 'changed since' }]);
    const again = await tables.upsert(name, body, { 'idempotency-key': 'upsert-1' });
    expect(again.status).toBe(200);
    expect(again.json).toEqual(first.json);
    expect(again.json).toEqual({ inserted: 1, updated: 1 });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await stored(name)).toEqual([
      { id: 1, body: 'changed since' },
      { id: 2, body: 'dos' },
    ]);
  });

  test('finds string keys exactly, quotes and backslashes included, and binary keys', async () => {
    await tables.create({
      table_name: 'named',
      schema: [
        { name: 'k', type: 'utf8' },
        { name: 'v', type: 'i32' },
      ],
      primary_key: 'k',
    });
    const keys = ["it's", 'a\\b', 'ü', "''", 'K', 'k', ' k'];
    expect(
      (
        await tables.upsert(
          'named',
          keys.map((k, v) => ({ k, v })),
        )
      ).json,
    ).toEqual({ inserted: 7, updated: 0 });
    const again = await tables.upsert(
      'named',
      keys.map((k, v) => ({ k, v: v + 100 })),
    );
    expect(again.json).toEqual({ inserted: 0, updated: 7 });
    const rows = await readTable(server, 'acme', 'pk', 'named');
    expect(rows.map((r) => [r.k, r.v]).sort()).toEqual(keys.map((k, v) => [k, v + 100]).sort());

    await tables.create({
      table_name: 'blobs',
      schema: [
        { name: 'k', type: 'binary' },
        { name: 'v', type: 'i32' },
      ],
      primary_key: 'k',
    });
    const blobs = ['AAE=', 'AAI=', ''].map((k, v) => ({ k, v }));
    expect((await tables.upsert('blobs', blobs)).json).toEqual({ inserted: 3, updated: 0 });
    expect(
      (
        await tables.upsert('blobs', [
          { k: '', v: 9 },
          { k: 'AAM=', v: 8 },
        ])
      ).json,
    ).toEqual({
      inserted: 1,
      updated: 1,
    });
    const dup = await tables.append('blobs', [{ k: 'AAE=', v: 1 }]);
    expect(dup.status).toBe(409);
    expect(dup.json.error).toMatch(/row 0 has k = "AAE="/);
  });

  test('finds integer keys that run in order (read as a range) and keys far apart (read as a list) alike', async () => {
    const name = await keyedTable();
    const dense = Array.from({ length: 50 }, (_, i) => ({ id: 1000 + i, body: 'dense' }));
    const sparse = [-(2 ** 53) + 1, -5, 7, 2 ** 40, 2 ** 53 - 1].map((id) => ({ id, body: 'sparse' }));
    expect((await tables.upsert(name, [...dense, ...sparse])).json).toEqual({ inserted: 55, updated: 0 });
    // A range over the dense keys holds rows the body does not name: they are neither updated nor counted.
    const some = dense.filter((_, i) => i % 3 === 0).map((r) => ({ ...r, body: 'again' }));
    expect((await tables.upsert(name, some)).json).toEqual({ inserted: 0, updated: some.length });
    expect(
      (
        await tables.upsert(
          name,
          sparse.map((r) => ({ ...r, body: 'again' })),
        )
      ).json,
    ).toEqual({
      inserted: 0,
      updated: 5,
    });
    const rows = await stored(name);
    expect(rows).toHaveLength(55);
    expect(rows.filter((r) => r.body === 'again')).toHaveLength(some.length + 5);
  });

  test('a body of a thousand rows or more, which Lance merges by a join over every key, lands the same way', async () => {
    const name = await keyedTable();
    const first = Array.from({ length: 2000 }, (_, i) => ({ id: i, body: 'first' }));
    expect((await tables.append(name, first)).status).toBe(200);
    await upkeepPass(server, 'pk');
    // Held keys spread over the table and new ones, with a one-row upsert's fragment outside the index between.
    expect((await tables.upsert(name, [{ id: 1, body: 'one' }])).json).toEqual({ inserted: 0, updated: 1 });
    const body = Array.from({ length: 1500 }, (_, i) => ({ id: i < 1000 ? i * 2 : 5000 + i, body: 'second' }));
    expect((await tables.upsert(name, body)).json).toEqual({ inserted: 500, updated: 1000 });
    const rows = await stored(name);
    expect(rows).toHaveLength(2500);
    expect(new Set(rows.map((r) => r.id)).size).toBe(2500);
    const bodyOf = new Map(rows.map((r) => [r.id, r.body]));
    expect([bodyOf.get(0), bodyOf.get(1), bodyOf.get(3), bodyOf.get(1998), bodyOf.get(6499)]).toEqual([
      'second',
      'one',
      'first',
      'second',
      'second',
    ]);
  });

  test('concurrent upserts of the same keys leave one row per key', async () => {
    const name = await keyedTable();
    const writes = Array.from({ length: 6 }, (_, w) =>
      tables.upsert(
        name,
        Array.from({ length: 20 }, (_, id) => ({ id, body: `w${w}` })),
      ),
    );
    const answers = await Promise.all(writes);
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(200));
    expect(answers.reduce((n, a) => n + a.json.inserted, 0)).toBe(20);
    const rows = await stored(name);
    expect(rows.map((r) => r.id)).toEqual(Array.from({ length: 20 }, (_, id) => id));
    // Every row holds one write's body whole: upserts do not interleave.
    expect(new Set(rows.map((r) => r.body)).size).toBe(1);
  });
});

describe('a table with a primary key', () => {
  test('refuses an append of a key it holds, or of one key twice, with 409 duplicate_key, writing nothing', async () => {
    const name = await keyedTable();
    await tables.append(name, [
      { id: 1, body: 'a' },
      { id: 2, body: 'b' },
    ]);
    const held = await tables.append(name, [
      { id: 3, body: 'c' },
      { id: 2, body: 'again' },
    ]);
    expect(held.status).toBe(409);
    expect(held.json.code).toBe('duplicate_key');
    expect(held.json.error).toMatch(/row 1 has id = 2, which another row of the table holds already/);
    const twice = await tables.append(name, [
      { id: 7, body: 'c' },
      { id: 7, body: 'd' },
    ]);
    expect(twice.status).toBe(409);
    expect(twice.json.code).toBe('duplicate_key');
    expect(twice.json.error).toMatch(/rows 0 and 1 both have id = 7/);
    expect(await stored(name)).toEqual([
      { id: 1, body: 'a' },
      { id: 2, body: 'b' },
    ]);
  });

  test('lets an update keep or swap the keys of the rows it replaces, and refuses one taking another row’s', async () => {
    const name = await keyedTable();
    await tables.append(name, [
      { id: 1, body: 'a' },
      { id: 2, body: 'b' },
      { id: 3, body: 'c' },
    ]);
    const taken = await tables.update(name, 'id = 1', [{ id: 3, body: 'x' }]);
    expect(taken.status).toBe(409);
    expect((taken.json as { code: string }).code).toBe('duplicate_key');
    const swapped = await tables.update(name, 'id IN (1, 2)', [
      { id: 2, body: 'was a' },
      { id: 1, body: 'was b' },
    ]);
    expect(swapped.status).toBe(200);
    expect(await stored(name)).toEqual([
      { id: 1, body: 'was b' },
      { id: 2, body: 'was a' },
      { id: 3, body: 'c' },
    ]);
  });

  test('a node writing a keyed table alone finds keys through the index and among the rows it wrote since', async () => {
    const name = await keyedTable(false);
    const rows = (from: number, n: number, body = 'a') =>
      Array.from({ length: n }, (_, i) => ({ id: from + i, body: `${body}${from + i}` }));
    expect((await tables.append(name, rows(0, 100))).status).toBe(200);
    await upkeepPass(server, 'pk');
    expect((await tables.append(name, rows(100, 10))).status).toBe(200);
    const model = new Map([...rows(0, 110)].map((r) => [r.id, r.body]));
    const reads: ReadOptions[] = [];
    await onTableHandle(server, 'pk', name, async (handle) => {
      expect(handle.fresh.usable('key')).toBe(true);
      // The last append's rows and nothing else: the folded ones went, and no row itself is held, only its key.
      expect(handle.fresh.size).toBe(10);
      const stop = recordingReads(handle, reads);
      try {
        // An indexed key and a fresh one are replaced, a new one inserted.
        const upserted = await tables.upsert(name, [
          { id: 5, body: 'u5' },
          { id: 105, body: 'u105' },
          { id: 200, body: 'n200' },
        ]);
        expect(upserted.json).toEqual({ inserted: 1, updated: 2 });
        for (const [id, body] of [
          [5, 'u5'],
          [105, 'u105'],
          [200, 'n200'],
        ] as const)
          model.set(id, body);
        for (const id of [7, 107, 200, 5]) expect((await tables.append(name, [{ id, body: 'dup' }])).status).toBe(409);
        expect((await tables.remove(name, 'id = 105 OR id = 8')).status).toBe(200);
        model.delete(105);
        model.delete(8);
        for (const id of [105, 8]) expect((await tables.append(name, [{ id, body: `again${id}` }])).status).toBe(200);
        model.set(105, 'again105');
        model.set(8, 'again8');
        // A replace that moves a row to a new key frees the old one.
        expect((await tables.update(name, 'id = 6', [{ id: 300, body: 'moved' }])).status).toBe(200);
        model.delete(6);
        model.set(300, 'moved');
        expect((await tables.append(name, [{ id: 300, body: 'dup' }])).status).toBe(409);
        expect((await tables.append(name, [{ id: 6, body: 'back' }])).status).toBe(200);
        model.set(6, 'back');
      } finally {
        stop();
      }
    });
    expect(reads.some((options) => options.indexedOnly === true)).toBe(true);
    const want = [...model].map(([id, body]) => ({ id, body })).sort((a, b) => a.id - b.id);
    expect(await stored(name)).toEqual(want);
  });

  test('an update or delete naming key values finds its rows as keyed writes find keys, not by reading every row', async () => {
    const name = await keyedTable();
    const rows = (from: number, n: number) =>
      Array.from({ length: n }, (_, i) => ({ id: from + i, body: `a${from + i}` }));
    expect((await tables.append(name, rows(0, 100))).status).toBe(200);
    await upkeepPass(server, 'pk');
    expect((await tables.append(name, rows(100, 10))).status).toBe(200);
    const model = new Map(rows(0, 110).map((r) => [r.id, r.body]));
    const reads: ReadOptions[] = [];
    await onTableHandle(server, 'pk', name, async (handle) => {
      const stop = recordingReads(handle, reads);
      try {
        // A fresh row and an indexed one, by equality; two swapped by an IN list; one to a key another row holds.
        for (const id of [105, 5]) {
          expect((await tables.update(name, `id = ${id}`, [{ id, body: `u${id}` }])).json).toMatchObject({
            matched: 1,
          });
          model.set(id, `u${id}`);
        }
        const swapped = await tables.update(name, 'id IN (101, 1)', [
          { id: 101, body: 'was 1' },
          { id: 1, body: 'was 101' },
        ]);
        expect(swapped.status).toBe(200);
        model.set(1, 'was 101');
        model.set(101, 'was 1');
        const taken = await tables.update(name, 'id = 2', [{ id: 103, body: 'x' }]);
        expect((taken.json as { code: string }).code).toBe('duplicate_key');
        const counted = await tables.update(name, 'id IN (3, 999)', [{ id: 3, body: 'y' }]);
        expect(counted.json).toMatchObject({ matched: 1 });
        model.set(3, 'y');
        const mismatch = await tables.update(name, 'id = 999', [{ id: 999, body: 'z' }]);
        expect((mismatch.json as { code: string }).code).toBe('row_count_mismatch');
        const deleted = await tables.remove(name, 'id IN (4, 104, 999)');
        expect(deleted.json).toMatchObject({ matched: 2, n_tombstoned: 2 });
        model.delete(4);
        model.delete(104);
        expect((await tables.append(name, [{ id: 104, body: 'back' }])).status).toBe(200);
        model.set(104, 'back');
      } finally {
        stop();
      }
    });
    expect(reads.length).toBeGreaterThan(0);
    expect(reads.every((options) => options.indexedOnly === true)).toBe(true);
    const want = [...model].map(([id, body]) => ({ id, body })).sort((a, b) => a.id - b.id);
    expect(await stored(name)).toEqual(want);
  });

  test('an update or delete naming the one key literal Lance refuses answers 400, as on any other column', async () => {
    const created = await tables.create({
      table_name: 'minimum',
      schema: [
        { name: 'id', type: 'i64' },
        { name: 'm', type: 'i64' },
      ],
      primary_key: 'id',
    });
    expect(created.status).toBe(200);
    const MIN = '-9223372036854775808';
    expect((await tables.append('minimum', [{ id: MIN, m: MIN }])).status).toBe(200);
    for (const column of ['m', 'id']) {
      const deleted = await tables.remove('minimum', `${column} = ${MIN}`);
      expect(deleted.status).toBe(400);
      const updated = await tables.update('minimum', `${column} = ${MIN}`, [{ id: MIN, m: 0 }]);
      expect(updated.status).toBe(400);
    }
    expect(await readTable(server, 'acme', 'pk', 'minimum')).toEqual([{ id: MIN, m: MIN }]);
  });

  test('ends with the rows a model of the table holds, after any sequence of writes (property)', async () => {
    type Op =
      | { kind: 'upsert'; rows: Item[] }
      | { kind: 'append'; rows: Item[] }
      | { kind: 'update'; id: number; body: string }
      | { kind: 'delete'; below: number }
      | { kind: 'delete_ids'; ids: number[] }
      | { kind: 'fold' };
    const item = fc.record({ id: fc.integer({ min: 0, max: 12 }), body: fc.constantFrom('x', 'y', 'z w') });
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ kind: fc.constant('upsert' as const), rows: fc.array(item, { minLength: 1, maxLength: 5 }) }),
      fc.record({ kind: fc.constant('append' as const), rows: fc.array(item, { minLength: 1, maxLength: 3 }) }),
      fc.record({ kind: fc.constant('update' as const), id: fc.integer({ min: 0, max: 12 }), body: fc.string() }),
      fc.record({ kind: fc.constant('delete' as const), below: fc.integer({ min: 0, max: 4 }) }),
      fc.record({
        kind: fc.constant('delete_ids' as const),
        ids: fc.array(fc.integer({ min: 0, max: 12 }), { minLength: 1, maxLength: 3 }),
      }),
      // Upkeep folds the rows in: keys are then found through the index, and the rows written since beside it.
      fc.record({ kind: fc.constant('fold' as const) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 12 }), async (ops) => {
        const name = await keyedTable();
        const model = new Map<number, string>();
        for (const o of ops) {
          const ids = 'rows' in o ? o.rows.map((r) => r.id) : [];
          const distinct = new Set(ids).size === ids.length;
          if (o.kind === 'upsert') {
            const res = await tables.upsert(name, o.rows);
            expect(res.status).toBe(distinct ? 200 : 400);
            if (distinct) {
              const updated = o.rows.filter((r) => model.has(r.id)).length;
              expect(res.json).toEqual({ inserted: o.rows.length - updated, updated });
              for (const r of o.rows) model.set(r.id, r.body);
            }
          } else if (o.kind === 'append') {
            const res = await tables.append(name, o.rows);
            const free = distinct && o.rows.every((r) => !model.has(r.id));
            expect(res.status).toBe(free ? 200 : 409);
            if (free) for (const r of o.rows) model.set(r.id, r.body);
          } else if (o.kind === 'update') {
            const res = await tables.update(name, `id = ${o.id}`, model.has(o.id) ? [{ id: o.id, body: o.body }] : []);
            expect(res.status).toBe(200);
            if (model.has(o.id)) model.set(o.id, o.body);
          } else if (o.kind === 'fold') {
            await upkeepPass(server, 'pk');
          } else if (o.kind === 'delete_ids') {
            const res = await tables.remove(name, `id IN (${o.ids.join(', ')})`);
            expect(res.json).toMatchObject({ matched: new Set(o.ids.filter((id) => model.has(id))).size });
            for (const id of o.ids) model.delete(id);
          } else {
            expect((await tables.remove(name, `id < ${o.below}`)).status).toBe(200);
            for (const id of [...model.keys()]) if (id < o.below) model.delete(id);
          }
        }
        const want = [...model].map(([id, body]) => ({ id, body })).sort((a, b) => a.id - b.id);
        expect(await stored(name)).toEqual(want);
      }),
      { numRuns: 15 },
    );
  }, 120_000);
});
