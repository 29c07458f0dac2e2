import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { TableHandle } from '../src/engine/tables/tables.js';
import {
  activeLocalDatabase,
  type Client,
  onTableHandle,
  startStrata,
  type TestServer,
  upkeepPass,
} from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * Scalar indexes (docs/api.md, create_table `indexes.scalar`): declared, checked against the schema, built with the
 * table and folded by upkeep, and read through by filters, predicates and exact_match, fresh rows included.
 * Upkeep passes run by hand.
 */

let server: TestServer;
let api: Client;
beforeAll(async () => {
  server = await startStrata({ STRATA_UPKEEP_INTERVAL_MS: '3600000' });
  api = await server.as('acme');
  await activeLocalDatabase(api, 'sc');
});
afterAll(() => server.close());

const SCHEMA = [
  { name: 'id', type: 'i64', nullable: false },
  { name: 'tag', type: 'utf8' },
  { name: 'labels', type: 'list', item: 'utf8' },
  { name: 'flag', type: 'bool' },
  { name: 'price', type: 'f64' },
  { name: 'body', type: 'utf8' },
  { name: 'emb', type: 'vector', dim: 2 },
];

const onHandle = (table: string, check: (handle: TableHandle) => Promise<void>) =>
  onTableHandle(server, 'sc', table, check);

describe('declaring scalar indexes', () => {
  test('a kind is chosen by type when not given, shown beside the column and in the canonical form', async () => {
    const tables = tablesOf(api, 'sc');
    const created = await tables.create({
      table_name: 'declared',
      schema: SCHEMA,
      indexes: { scalar: ['id', 'labels', 'flag', { column: 'tag', kind: 'BITMAP' }, { column: 'price' }] },
    });
    expect(created.status).toBe(200);
    expect((created.json as { indexes: { scalar: unknown[] } }).indexes.scalar).toEqual([
      { column: 'id', type: 'btree' },
      { column: 'labels', type: 'label_list' },
      { column: 'flag', type: 'bitmap' },
      { column: 'tag', type: 'bitmap' },
      { column: 'price', type: 'btree' },
    ]);
    const schema = (await tables.schema('declared')).json as unknown as { name: string; indexes?: unknown[] }[];
    expect(schema.find((c) => c.name === 'id')?.indexes).toEqual([{ kind: 'scalar', type: 'btree' }]);
    expect(schema.find((c) => c.name === 'labels')?.indexes).toEqual([{ kind: 'scalar', type: 'label_list' }]);
    // Built with the table: the store lists one scalar index per declaration (and the row key's).
    await onHandle('declared', async (handle) => {
      const scalar = (await handle.rows.indexes()).filter((i) => i.type === 'scalar').flatMap((i) => i.columns);
      expect(scalar.sort()).toEqual(['_rowkey', 'flag', 'id', 'labels', 'price', 'tag']);
    });
  });

  test.each([
    [{ scalar: ['nope'] }, 'indexes.scalar[0]: column "nope" is not in the schema'],
    [{ scalar: ['emb'] }, 'indexes.scalar[0]: column "emb" is vector; a btree index needs'],
    [{ scalar: [{ column: 'price', kind: 'bitmap' }] }, 'column "price" is f64; a bitmap index needs'],
    [{ scalar: [{ column: 'tag', kind: 'label_list' }] }, 'column "tag" is utf8; a label_list index needs a list of'],
    [{ scalar: [{ column: 'labels', kind: 'btree' }] }, 'column "labels" is a list of utf8; a btree index needs'],
    [
      { scalar: [{ column: 'id', kind: 'hash' }] },
      'indexes.scalar[0].kind "hash" is not one of btree, bitmap, label_list',
    ],
    [{ scalar: ['id', 'id'] }, 'indexes.scalar[1]: column "id" already has a scalar index'],
    [{ scalar: [{ column: 'id', kind: 'btree', extra: 1 }] }, 'body.indexes.scalar[0]'],
  ])('%j is 400 naming the entry', async (indexes, message) => {
    const reply = await tablesOf(api, 'sc').create({ table_name: 'refused', schema: SCHEMA, indexes });
    expect(reply.status).toBe(400);
    expect((reply.json as { error: string }).error).toContain(message);
  });
});

describe('reading through scalar indexes', () => {
  test('filters, predicates and exact_match answer as a scan does, fresh rows and folds included', async () => {
    const tables = tablesOf(api, 'sc');
    expect(
      (
        await tables.create({
          table_name: 'items',
          schema: SCHEMA,
          indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'l2' }], scalar: ['id', 'tag', 'labels'] },
        })
      ).status,
    ).toBe(200);
    const live = new Map<number, { tag: string; labels: string[] }>();
    let seed = 5;
    const random = (n: number) => {
      seed = (seed * 48271) % 2147483647;
      return seed % n;
    };
    const row = (id: number) => {
      const value = { tag: `t${random(5)}`, labels: [`l${random(4)}`, `l${random(4)}`] };
      live.set(id, value);
      return { id, ...value, flag: id % 2 === 0, price: id / 4, body: `word${id % 3} common`, emb: [id % 7, 1] };
    };
    const ids = (filter: (v: { tag: string; labels: string[] }, id: number) => boolean) =>
      [...live]
        .filter(([id, v]) => filter(v, id))
        .map(([id]) => id)
        .sort((a, b) => a - b);
    const exact = async (field: string, value: string) => {
      const reply = await api.request<{ data: { id: number }[] }>(
        'POST',
        '/v1/exact_match/sc',
        { table_name: 'items', field_name: field, value, projection: ['id'] },
        { accept: 'application/json' },
      );
      return reply.json.data.map((r) => r.id).sort((a, b) => a - b);
    };
    const filtered = async (filter: string) => {
      const reply = await api.request<{ data: { id: number }[] }>(
        'POST',
        '/v1/hybrid_search/sc',
        { table_name: 'items', text_field: 'body', text_query: 'common', filter, k: 1000, projection: ['id'] },
        { accept: 'application/json' },
      );
      return reply.json.data.map((r) => r.id).sort((a, b) => a - b);
    };
    const check = async (step: string) => {
      const some = [...live.keys()][0] ?? 0;
      expect(await exact('id', String(some)), step).toEqual([some]);
      expect(await exact('tag', 't1'), step).toEqual(ids((v) => v.tag === 't1'));
      expect(await filtered("tag = 't2'"), step).toEqual(ids((v) => v.tag === 't2'));
      expect(await filtered('id >= 40 AND id < 60'), step).toEqual(ids((_, id) => id >= 40 && id < 60));
      expect(await filtered("array_has_any(labels, ['l1'])"), step).toEqual(ids((v) => v.labels.includes('l1')));
    };

    let next = 0;
    const batch = (n: number) => Array.from({ length: n }, () => row(next++));
    expect((await tables.append('items', batch(100))).status).toBe(200);
    await check('fresh rows only');
    await upkeepPass(server, 'sc');
    await check('folded');
    expect((await tables.append('items', batch(50))).status).toBe(200);
    expect((await tables.update('items', 'id = 7', [row(7)])).status).toBe(200);
    expect((await tables.update('items', 'id >= 120 AND id < 125', [120, 121, 122, 123, 124].map(row))).status).toBe(
      200,
    );
    const gone = ids((v) => v.tag === 't3');
    expect((await tables.remove('items', "tag = 't3'")).json).toMatchObject({ matched: gone.length });
    for (const id of gone) live.delete(id);
    await check('a tail, replaces and deletes');
    await upkeepPass(server, 'sc');
    await check('folded again');
    // Upkeep folded the scalar indexes too: nothing is left outside them.
    await onHandle('items', async (handle) => {
      const state = await handle.unindexed.at(await handle.rows.version());
      expect(state.rows.get('scalar:tag')).toBe(0);
      expect(state.behind).toBe(0);
    });
  });
});
