import { existsSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { schemaOnlyStream } from '../src/arrow/ipc.js';
import { serveFile } from './support/server.js';
import { readTable, tablesOf } from './support/tables.js';
import { NESTED_SCHEMA, SCALAR_SPELLINGS } from './support/types.js';

const { strata, api } = serveFile({}, { database: 'shop' });
const db = tablesOf(api, 'shop');

const b64 = (schema: InstanceType<typeof arrow.Schema>) => Buffer.from(schemaOnlyStream(schema)).toString('base64');

describe('create_table', () => {
  test('every scalar spelling, vectors and lists, with indexes in canonical form', async () => {
    const spellings = SCALAR_SPELLINGS;
    const schema = [
      ...spellings.map((type) => ({ name: `c_${type}`, type })),
      { name: 'alias', type: 'string', nullable: false },
      { name: 'emb', type: 'vector', dim: 8 },
      { name: 'tags', type: 'list', item: 'utf8' },
    ];

    const res = await db.create({
      table_name: 'everything',
      schema,
      indexes: {
        fts: ['c_utf8', { column: 'c_large_utf8', analyzer: 'standard' }],
        vector: [{ column: 'emb', metric: 'DOT', dim: 8 }],
      },
    });

    expect(res.status).toBe(200);
    expect(res.json.table_name).toBe('everything');
    const indexed: Record<string, unknown> = {
      c_utf8: [{ kind: 'fts', analyzer: 'ascii_lower' }],
      c_large_utf8: [{ kind: 'fts', analyzer: 'standard' }],
    };
    expect(res.json.schema).toEqual([
      ...spellings.map((type) => ({
        name: `c_${type}`,
        type,
        nullable: true,
        ...(indexed[`c_${type}`] === undefined ? {} : { indexes: indexed[`c_${type}`] }),
      })),
      { name: 'alias', type: 'utf8', nullable: false },
      { name: 'emb', type: 'vector', nullable: true, dim: 8, indexes: [{ kind: 'vector', metric: 'negdot' }] },
      { name: 'tags', type: 'list', nullable: true, item: 'utf8' },
    ]);
    expect(res.json.indexes).toEqual({
      fts: [
        { column: 'c_utf8', analyzer: 'ascii_lower' },
        { column: 'c_large_utf8', analyzer: 'standard' },
      ],
      vector: [{ column: 'emb', metric: 'negdot', dim: 8 }],
      scalar: [],
    });
    expect((await db.schema('everything')).json).toEqual(res.json.schema);
  });

  test('schema_ipc with struct, list and fixed-size list round-trips through schema?encoding=ipc', async () => {
    const schema = new arrow.Schema([
      ...NESTED_SCHEMA.fields,
      new arrow.Field('v32', new arrow.FixedSizeList(2, new arrow.Field('item', new arrow.Float32(), true)), true),
    ]);

    const res = await db.create({
      table_name: 'nested',
      schema_ipc: b64(schema),
      indexes: { vector: [{ column: 'v64', metric: 'cosine' }] },
    });

    expect(res.status).toBe(200);
    expect(res.json.schema).toEqual([
      { name: 'id', type: 'i64', nullable: false },
      { name: 'address', type: 'Struct<{city:Utf8, zip:Int32}>', nullable: true },
      { name: 'scores', type: 'list', item: 'f64', nullable: true },
      {
        name: 'v64',
        type: 'FixedSizeList[4]<Float64>',
        nullable: true,
        indexes: [{ kind: 'vector', metric: 'cosine' }],
      },
      { name: 'v32', type: 'vector', dim: 2, nullable: true },
    ]);
    expect(res.json.indexes).toEqual({ fts: [], vector: [{ column: 'v64', metric: 'cosine', dim: 4 }], scalar: [] });

    const ipc = await db.schema('nested', 'ipc');
    expect(ipc.json.indexes).toEqual(res.json.indexes);
    const again = await db.create({ table_name: 'nested_copy', schema_ipc: ipc.json.schema_ipc });
    expect(again.status).toBe(200);
    // The copy has the columns and none of the indexes.
    expect(again.json.schema).toEqual(
      (res.json.schema as Record<string, unknown>[]).map(({ indexes: _, ...column }) => column),
    );
  });

  test.each([
    ['neither schema nor schema_ipc', { table_name: 'x' }, /exactly one of schema and schema_ipc/],
    ['both', { table_name: 'x', schema: [{ name: 'a', type: 'i32' }], schema_ipc: 'AAAA' }, /exactly one/],
    ['both null', { table_name: 'x', schema: null, schema_ipc: null }, /exactly one/],
    ['a bad table name', { table_name: '_x', schema: [{ name: 'a', type: 'i32' }] }, /body.table_name must be 1–128/],
    ['a dot in the table name', { table_name: 'a.b', schema: [{ name: 'a', type: 'i32' }] }, /body.table_name/],
    [
      'an unknown property',
      { table_name: 'x', schema: [{ name: 'a', type: 'i32' }], color: 1 },
      /unknown property "color"/,
    ],
    [
      'an unknown field property',
      { table_name: 'x', schema: [{ name: 'a', type: 'i32', size: 2 }] },
      /body.schema\[0\] has unknown property "size"/,
    ],
    ['an empty schema', { table_name: 'x', schema: [] }, /at least one column/],
    [
      'an unknown type',
      { table_name: 'x', schema: [{ name: 'a', type: 'int' }] },
      /schema\[0\].type "int" is not a type/,
    ],
    [
      'a reserved column name',
      { table_name: 'x', schema: [{ name: '_score', type: 'i32' }] },
      /schema\[0\]: column name "_score" must not start with _/,
    ],
    [
      'an empty column name',
      { table_name: 'x', schema: [{ name: '', type: 'i32' }] },
      /schema\[0\]: column name must be 1–128/,
    ],
    ['a control character', { table_name: 'x', schema: [{ name: 'a\u0001', type: 'i32' }] }, /control character/],
    [
      'names equal but for case',
      {
        table_name: 'x',
        schema: [
          { name: 'Price', type: 'i32' },
          { name: 'price', type: 'i32' },
        ],
      },
      /"price" repeats "Price"/,
    ],
    [
      'a vector without dim',
      { table_name: 'x', schema: [{ name: 'v', type: 'vector' }] },
      /schema\[0\].dim is required/,
    ],
    [
      'dim 0',
      { table_name: 'x', schema: [{ name: 'v', type: 'vector', dim: 0 }] },
      /dim must be an integer from 1 to 4096/,
    ],
    ['dim 4097', { table_name: 'x', schema: [{ name: 'v', type: 'vector', dim: 4097 }] }, /from 1 to 4096/],
    [
      'dim on a scalar',
      { table_name: 'x', schema: [{ name: 'a', type: 'i32', dim: 3 }] },
      /schema\[0\].dim is only allowed on vector columns/,
    ],
    [
      'item on a scalar',
      { table_name: 'x', schema: [{ name: 'a', type: 'i32', item: 'i32' }] },
      /item is only allowed on list columns/,
    ],
    ['a list without item', { table_name: 'x', schema: [{ name: 'a', type: 'list' }] }, /item is required/],
    [
      'a list of lists',
      { table_name: 'x', schema: [{ name: 'a', type: 'list', item: 'list' }] },
      /item "list" is not a scalar type/,
    ],
    [
      'fts on a missing column',
      { table_name: 'x', schema: [{ name: 'a', type: 'utf8' }], indexes: { fts: ['b'] } },
      /indexes.fts\[0\]: column "b" is not in the schema/,
    ],
    [
      'fts on a number',
      { table_name: 'x', schema: [{ name: 'a', type: 'i32' }], indexes: { fts: ['a'] } },
      /indexes.fts\[0\]: column "a" is i32; full-text indexes need utf8/,
    ],
    [
      'an unknown analyzer',
      {
        table_name: 'x',
        schema: [{ name: 'a', type: 'utf8' }],
        indexes: { fts: [{ column: 'a', analyzer: 'porter' }] },
      },
      /indexes.fts\[0\].analyzer "porter" is not one of ascii_lower, standard, arabic/,
    ],
    [
      'fts twice on a column',
      { table_name: 'x', schema: [{ name: 'a', type: 'utf8' }], indexes: { fts: ['a', { column: 'a' }] } },
      /indexes.fts\[1\]: column "a" already has/,
    ],
    [
      'a vector index on a scalar',
      { table_name: 'x', schema: [{ name: 'a', type: 'f32' }], indexes: { vector: [{ column: 'a', metric: 'l2' }] } },
      /indexes.vector\[0\]: column "a" is f32, not a vector column/,
    ],
    [
      'an unknown metric',
      {
        table_name: 'x',
        schema: [{ name: 'v', type: 'vector', dim: 2 }],
        indexes: { vector: [{ column: 'v', metric: 'manhattan' }] },
      },
      /indexes.vector\[0\].metric "manhattan"/,
    ],
    [
      'a vector index dim mismatch',
      {
        table_name: 'x',
        schema: [{ name: 'v', type: 'vector', dim: 2 }],
        indexes: { vector: [{ column: 'v', metric: 'l2', dim: 3 }] },
      },
      /indexes.vector\[0\].dim 3 does not match column "v" of dim 2/,
    ],
    [
      'a negative index dim',
      {
        table_name: 'x',
        schema: [{ name: 'v', type: 'vector', dim: 2 }],
        indexes: { vector: [{ column: 'v', metric: 'l2', dim: -1 }] },
      },
      /dim must be >= 0/,
    ],
    [
      'an unknown index kind',
      { table_name: 'x', schema: [{ name: 'v', type: 'utf8' }], indexes: { btree: ['v'] } },
      /body.indexes has unknown property "btree"/,
    ],
    ['schema_ipc that is not base64', { table_name: 'x', schema_ipc: 'not base64!' }, /schema_ipc is not valid base64/],
    [
      'schema_ipc that is not Arrow',
      { table_name: 'x', schema_ipc: Buffer.from('hello world!').toString('base64') },
      /schema_ipc is not an Arrow IPC stream/,
    ],
  ])('%s is 400 naming the field', async (_, body, message) => {
    const res = await db.create(body);

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
  });

  test('schema_ipc carrying record batches is 400', async () => {
    const withRows = arrow.tableToIPC(arrow.tableFromArrays({ a: Int32Array.from([1, 2]) }), 'stream');

    const res = await db.create({ table_name: 'x', schema_ipc: Buffer.from(withRows).toString('base64') });

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/only a schema message; it carries record batches/);
  });

  test.each([
    [
      'a union',
      new arrow.SparseUnion([0], [new arrow.Field('a', new arrow.Int32())]),
      /column "col" is of type Union, which is not supported/,
    ],
    ['a reserved name', new arrow.Int32(), /must not start with _/, '_hidden'],
  ])('schema_ipc with %s is 400', async (_, type, message, name = 'col') => {
    const schema = new arrow.Schema([new arrow.Field(name, type, true)]);

    const res = await db.create({ table_name: 'x', schema_ipc: b64(schema) });

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
  });

  test('an existing name is 409 without Retry-After', async () => {
    await db.create({ table_name: 'dup', schema: [{ name: 'a', type: 'i32' }] });

    const res = await db.create({ table_name: 'dup', schema: [{ name: 'b', type: 'i64' }] });

    expect(res.status).toBe(409);
    expect(res.json.error).toBe('table "dup" already exists');
    expect(res.json.code).toBe('table_exists');
    expect(res.headers.get('retry-after')).toBeNull();
  });

  test('an unknown database is 404; an unverified one is 409', async () => {
    await api.post('/v1/databases', { name: 'raw', storage: { provider: 'local', bucket: 'raw' } });

    const unknown = await tablesOf(api, 'nope').create({ table_name: 't', schema: [{ name: 'a', type: 'i32' }] });
    const unverified = await tablesOf(api, 'raw').create({ table_name: 't', schema: [{ name: 'a', type: 'i32' }] });

    expect(unknown.status).toBe(404);
    expect(unverified.status).toBe(409);
    expect(unverified.json.error).toMatch(/not verified yet/);
    expect(unverified.json.code).toBe('database_not_verified');
  });

  test("another account's database is 404 on every table route", async () => {
    const other = tablesOf(await strata.as('intruder'), 'shop');
    const statuses = [
      (await other.create({ table_name: 'x', schema: [{ name: 'a', type: 'i32' }] })).status,
      (await other.drop('dup')).status,
      (await other.schema('dup')).status,
      (await other.list()).status,
      (await other.append('dup', [{ a: 1 }])).status,
      (await other.update('dup', 'a = 1', [{ a: 2 }])).status,
      (await other.remove('dup', 'true')).status,
    ];

    expect(statuses).toEqual([404, 404, 404, 404, 404, 404, 404]);
  });
});

describe('list, describe and drop', () => {
  test('list_tables is sorted by name with row counts, by POST and GET', async () => {
    const own = tablesOf(api, 'shop');
    await own.create({ table_name: 'zz_list', schema: [{ name: 'a', type: 'i32' }] });
    await own.append('zz_list', [{ a: 1 }, { a: 2 }]);

    const get = await own.list();
    const post = await api.post<{ tables: { table_name: string; num_rows: number }[] }>('/v1/list_tables/shop');

    expect(get.json.tables.map((t) => t.table_name)).toEqual([...get.json.tables.map((t) => t.table_name)].sort());
    expect(get.json.tables.find((t) => t.table_name === 'zz_list')).toMatchObject({
      table_name: 'zz_list',
      num_rows: 2,
    });
    expect(post.json).toEqual(get.json);
  });

  test('schema of an unknown table is 404; a bad encoding is 400', async () => {
    expect((await db.schema('missing')).status).toBe(404);
    const bad = await db.schema('dup', 'csv');
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatch(/body.encoding/);
  });

  test('drop without purge keeps the files and says where; the name is free at once', async () => {
    await db.create({ table_name: 'kept', schema: [{ name: 'a', type: 'i32' }] });
    await db.append('kept', [{ a: 7 }]);

    const res = await db.drop('kept');

    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      table_name: 'kept',
      purged: false,
      location: expect.stringMatching(/^local:\/\/shop\/tables\/t_[0-9a-f]{32}\.lance$/),
    });
    const folder = String(res.json.location).replace('local://', `${strata.dataDir}/buckets/`);
    expect(existsSync(folder)).toBe(true);
    expect((await db.schema('kept')).status).toBe(404);
    const again = await db.create({ table_name: 'kept', schema: [{ name: 'b', type: 'utf8' }] });
    expect(again.status).toBe(200);
    expect(await readTable(strata, 'acme', 'shop', 'kept')).toEqual([]);
  });

  test('drop with purge deletes the files', async () => {
    await db.create({ table_name: 'gone', schema: [{ name: 'a', type: 'i32' }] });

    const res = await db.drop('gone', true);

    expect(res.json.purged).toBe(true);
    expect(existsSync(String(res.json.location).replace('local://', `${strata.dataDir}/buckets/`))).toBe(false);
  });

  test('dropping an unknown table is 404; a bad purge is 400', async () => {
    expect((await db.drop('never')).status).toBe(404);
    const res = await api.post('/v1/drop_table/shop', { table_name: 'dup', purge: 'yes' });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/body.purge must be boolean/);
  });
});

describe('catalog changes of one database are applied one at a time', () => {
  test('concurrent changes are each answered 200 or 409 + Retry-After, and retried ones land', async () => {
    const names = Array.from({ length: 8 }, (_, i) => `burst_${i}`);
    const create = (name: string) =>
      db.create({ table_name: name, schema: [{ name: 'a', type: 'i32' }], indexes: { fts: [] } });

    const first = await Promise.all(names.map(create));

    expect(first.every((r) => r.status === 200 || r.status === 409)).toBe(true);
    const refused = first.filter((r) => r.status === 409);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.headers.get('retry-after')).toBe('1');
      expect(r.json.error).toMatch(/was not applied: another catalog change of this database was in flight/);
      expect(r.json.code).toBe('catalog_change_in_flight');
    }
    for (const [i, r] of first.entries()) {
      let res = r;
      while (res.status === 409) res = await create(names[i] as string);
      expect(res.status).toBe(200);
    }
    const listed = (await db.list()).json.tables.map((t) => t.table_name);
    expect(listed).toEqual(expect.arrayContaining(names));
  });

  test('a creation that died half-way leaves a name that can be created and dropped again', async () => {
    const shop = await strata.app.ctx.store.findDatabase((await strata.app.ctx.store.ensureAccount('acme')).id, 'shop');
    const leftover = {
      databaseId: shop?.id ?? '',
      schemaIpc: 'x',
      indexes: '{}',
      // Long enough ago that no node can still be creating it.
      createdMs: Date.now() - 10 * 60_000,
      state: 'creating' as const,
    };
    await strata.app.ctx.store.insertTable({ ...leftover, name: 'half', tableId: 't_half1' });
    await strata.app.ctx.store.insertTable({ ...leftover, name: 'half2', tableId: 't_half2' });

    expect((await db.schema('half')).status).toBe(404);
    expect((await db.list()).json.tables.map((t) => t.table_name)).not.toContain('half');
    const created = await db.create({ table_name: 'half', schema: [{ name: 'a', type: 'i32' }] });
    const dropped = await db.drop('half2', true);

    expect(created.status).toBe(200);
    expect(dropped.status).toBe(200);
    expect((await db.create({ table_name: 'half2', schema: [{ name: 'a', type: 'i32' }] })).status).toBe(200);
  });
});

describe('create_table refuses column names the engines cannot hold', () => {
  test('a column name holding a backtick is refused at creation, in either schema form', async () => {
    const plain = await db.create({ table_name: 'tick', schema: [{ name: 'a`b', type: 'utf8' }] });
    const indexed = await db.create({
      table_name: 'tick2',
      schema: [{ name: 'a`b', type: 'utf8' }],
      indexes: { fts: ['a`b'] },
    });
    const schema = new arrow.Schema([new arrow.Field('x`y', new arrow.Utf8(), true)]);
    const ipc = Buffer.from(arrow.tableToIPC(new arrow.Table(schema), 'stream')).toString('base64');
    const viaIpc = await db.create({ table_name: 'tick3', schema_ipc: ipc });

    for (const res of [plain, indexed, viaIpc]) {
      expect(res.status).toBe(400);
      expect(res.json.error).toMatch(/backtick/);
    }
    expect((await api.post('/v1/query_sql/shop', { query: 'SELECT 1 AS one' })).status).toBe(200);
  });

  test('a column name holding a dot is refused at creation', async () => {
    const res = await db.create({ table_name: 'dotted', schema: [{ name: 'a.b', type: 'i32' }] });

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/must not contain a dot/);
  });
});
