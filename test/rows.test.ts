import { beforeAll, describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { serveFile } from './support/server.js';
import { ARROW, ipcOf, readTable, tablesOf } from './support/tables.js';
import { ALL_TYPES, FULL_ROW, NULL_ROW } from './support/types.js';

const { strata, api } = serveFile({ STRATA_MAX_BODY_BYTES: String(64 * 1024) }, { database: 'rows' });
const db = tablesOf(api, 'rows');

beforeAll(async () => {
  await db.create({ table_name: 'all', schema: ALL_TYPES });
  await db.create({
    table_name: 'items',
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'name', type: 'utf8' },
      { name: 'price', type: 'f64' },
    ],
  });
});

describe('append', () => {
  test('every type round-trips through JSON, in the reply and in the bucket', async () => {
    const res = await db.append('all', [FULL_ROW, NULL_ROW]);

    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([FULL_ROW, NULL_ROW]);
    expect(Number(res.headers.get('x-strata-table-version'))).toBeGreaterThan(0);
    expect(await readTable(strata, 'acme', 'rows', 'all')).toEqual([FULL_ROW, NULL_ROW]);
  });

  test('Prefer: return=minimal answers 204 with the version and no body, whatever Accept says', async () => {
    const before = (await readTable(strata, 'acme', 'rows', 'items')).length;
    for (const prefer of ['return=minimal', 'respond-async, RETURN="minimal"; detail=1']) {
      const res = await api.raw(
        'POST',
        '/v1/append/rows?table=items',
        { data: [{ id: 900, name: 'minimal', price: 1 }] },
        { prefer, accept: 'text/csv' },
      );

      expect(res.status).toBe(204);
      expect(res.headers.get('preference-applied')).toBe('return=minimal');
      expect(Number(res.headers.get('x-strata-table-version'))).toBeGreaterThan(0);
      expect(await res.arrayBuffer()).toHaveProperty('byteLength', 0);
    }
    // Any other preference is no preference: the rows as stored come back.
    const full = await api.raw(
      'POST',
      '/v1/append/rows?table=items',
      { data: [{ id: 901, name: 'full', price: 2 }] },
      { prefer: 'return=representation', accept: 'application/json' },
    );
    expect(full.status).toBe(200);
    expect(((await full.json()) as { data: unknown[] }).data).toEqual([{ id: 901, name: 'full', price: 2 }]);
    const after = await readTable(strata, 'acme', 'rows', 'items');
    expect(after.length).toBe(before + 3);
    expect(after.filter((r) => r.name === 'minimal')).toHaveLength(2);
  });

  test('a batch whose columns are all null round-trips too (Arrow JS writes all-null booleans Lance refuses)', async () => {
    await db.create({ table_name: 'all_null', schema: ALL_TYPES });

    const viaJson = await db.append('all_null', [NULL_ROW]);
    const reply = await api.raw(
      'POST',
      '/v1/append/rows?table=all_null',
      { data: [NULL_ROW, NULL_ROW] },
      { accept: ARROW },
    );
    const viaArrow = await db.appendArrow('all_null', new Uint8Array(await reply.arrayBuffer()));

    expect(viaJson.status).toBe(200);
    expect(reply.status).toBe(200);
    expect(viaArrow.json.data).toEqual([NULL_ROW, NULL_ROW]);
    expect(await readTable(strata, 'acme', 'rows', 'all_null')).toEqual([
      NULL_ROW,
      NULL_ROW,
      NULL_ROW,
      NULL_ROW,
      NULL_ROW,
    ]);
  });

  test('other accepted spellings are stored in their canonical form', async () => {
    await db.create({
      table_name: 'spell',
      schema: [
        { name: 'i', type: 'i64' },
        { name: 't', type: 'timestamp_ms' },
        { name: 'f', type: 'f64' },
      ],
    });

    const res = await db.append('spell', [
      { i: '42', t: 1704164645678, f: 'Infinity' },
      { t: '2024-01-02T04:04:05.678+01:00', f: '-Infinity' },
    ]);

    expect(res.json.data).toEqual([
      { i: 42, t: '2024-01-02T03:04:05.678Z', f: 'Infinity' },
      { i: null, t: '2024-01-02T03:04:05.678Z', f: '-Infinity' },
    ]);
  });

  test('every type round-trips through an Arrow body and an Arrow reply', async () => {
    await db.create({ table_name: 'all_arrow', schema: ALL_TYPES });
    const reply = await api.raw('POST', '/v1/append/rows?table=all_arrow', { data: [FULL_ROW, NULL_ROW] });
    expect(reply.headers.get('content-type')).toBe(ARROW);
    const stored = new Uint8Array(await reply.arrayBuffer());

    const res = await db.appendArrow('all_arrow', stored);

    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([FULL_ROW, NULL_ROW]);
    expect(await readTable(strata, 'acme', 'rows', 'all_arrow')).toEqual([FULL_ROW, NULL_ROW, FULL_ROW, NULL_ROW]);
  });

  test('Arrow bodies: columns by name in any order, missing nullable ones null, lossless casts applied', async () => {
    const body = new arrow.Table({
      price: arrow.vectorFromArray([1.5, 2], new arrow.Float32()),
      id: arrow.vectorFromArray([10, 11], new arrow.Int32()),
    });

    const res = await db.appendArrow('items', ipcOf(body));

    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([
      { id: 10, name: null, price: 1.5 },
      { id: 11, name: null, price: 2 },
    ]);
  });

  test('an f64 vector body goes into an f32 vector column when every value is exact', async () => {
    await db.create({ table_name: 'vecs', schema: [{ name: 'v', type: 'vector', dim: 2 }] });
    const vectorOf = (values: number[][]) =>
      new arrow.Table({
        v: arrow.vectorFromArray(
          values,
          new arrow.FixedSizeList(2, new arrow.Field('item', new arrow.Float64(), true)),
        ),
      });

    const exact = await db.appendArrow(
      'vecs',
      ipcOf(
        vectorOf([
          [0.5, -1],
          [3, 4],
        ]),
      ),
    );
    const lossy = await db.appendArrow(
      'vecs',
      ipcOf(
        vectorOf([
          [0.5, -1],
          [0.1, 4],
        ]),
      ),
    );

    expect(exact.status).toBe(200);
    expect(exact.json.data).toEqual([{ v: [0.5, -1] }, { v: [3, 4] }]);
    expect(lossy.status).toBe(400);
    expect(lossy.json.error).toMatch(/row 1, column "v\[\]": 0.1 cannot be stored as Float32 without loss/);
  });

  test('a list body goes into a vector column, its null rows holding no items; a row of another length is named', async () => {
    await db.create({ table_name: 'listvecs', schema: [{ name: 'v', type: 'vector', dim: 3 }] });
    const listOf = (values: (number[] | null)[]) =>
      new arrow.Table({
        v: arrow.vectorFromArray(values, new arrow.List(new arrow.Field('item', new arrow.Float32(), true))),
      });

    const nulls = await db.appendArrow('listvecs', ipcOf(listOf([[1, 2, 3], null, [4, 5, 6], null])));
    const short = await db.appendArrow('listvecs', ipcOf(listOf([[1, 2, 3], null, [4, 5]])));

    expect(nulls.status).toBe(200);
    expect(nulls.json.data).toEqual([{ v: [1, 2, 3] }, { v: null }, { v: [4, 5, 6] }, { v: null }]);
    expect(short.status).toBe(400);
    expect(short.json.error).toMatch(/row 2, column "v": has 2 items; the column holds exactly 3/);
  });

  test.each([
    [
      'an unknown column',
      () =>
        new arrow.Table({ id: arrow.vectorFromArray([1n], new arrow.Int64()), color: arrow.vectorFromArray(['x']) }),
      /unknown column "color"/,
    ],
    [
      'a missing non-nullable column',
      () => new arrow.Table({ name: arrow.vectorFromArray(['x']) }),
      /lacks column "id", which is not nullable/,
    ],
    [
      'a null in a non-nullable column',
      () => new arrow.Table({ id: arrow.vectorFromArray([1n, null], new arrow.Int64()) }),
      /row 1, column "id": is null and the column is not nullable/,
    ],
    [
      'a lossy integer cast',
      () =>
        new arrow.Table({
          id: arrow.vectorFromArray([1, 2], new arrow.Float64()),
          price: arrow.vectorFromArray([1, 2]),
          name: arrow.vectorFromArray([1.5, 2.5]),
        }),
      /column "name": is Float64 in the body and Utf8 in the table/,
    ],
    [
      'a fractional float into an integer',
      () => new arrow.Table({ id: arrow.vectorFromArray([1, 2.5], new arrow.Float64()) }),
      /row 1, column "id": 2.5 cannot be stored as Int64/,
    ],
  ])('an Arrow body with %s is 400 and writes nothing', async (_, body, message) => {
    const before = await db.count('items');

    const res = await db.appendArrow('items', ipcOf(body()));

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
    expect(await db.count('items')).toBe(before);
  });

  test('a body that is not an Arrow stream is 400', async () => {
    const res = await db.appendArrow('items', new TextEncoder().encode('definitely not arrow'));

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/not an Arrow IPC stream/);
  });

  test.each([
    ['an unknown key', [{ id: 1 }, { id: 2, colour: 'red' }], /row 1: unknown column "colour"/],
    [
      'a missing non-nullable value',
      [{ id: 1 }, { name: 'x' }],
      /row 1, column "id": is missing and the column is not nullable/,
    ],
    ['a null non-nullable value', [{ id: null }], /row 0, column "id": is null and the column is not nullable/],
    ['a fractional integer', [{ id: 1.5 }], /row 0, column "id": must be an integer/],
    [
      'an integer beyond 2^53 as a number',
      [{ id: 2 ** 60 }],
      /row 0, column "id": must be an integer .*decimal string/,
    ],
    ['a string for a float', [{ id: 1, price: 'cheap' }], /row 0, column "price": must be a number/],
    ['a number for a string', [{ id: 1, name: 5 }], /row 0, column "name": must be a string, got 5/],
    ['a row that is not an object', [{ id: 1 }, [1, 2]], /body.data\[1\] must be object/],
  ])('JSON rows with %s are 400 naming the row and column, and nothing is written', async (_, rows, message) => {
    const before = await db.count('items');

    const res = await db.append('items', rows);

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
    expect(await db.count('items')).toBe(before);
  });

  test.each([
    ['i8', 128, /must be an integer from -128 to 127/],
    ['u8', -1, /from 0 to 255/],
    ['u64', '18446744073709551616', /from 0 to 18446744073709551615/],
    ['b', 'true', /must be true or false/],
    ['bin', 'not base64!', /must be a base64 string/],
    ['d', '2023-02-29', /must be a date "YYYY-MM-DD"/],
    ['tms', '2024-01-02T03:04:05.678901Z', /must be an RFC 3339 timestamp \(exact to the column's millisecond\)/],
    ['tus', 'yesterday', /must be an RFC 3339 timestamp/],
    ['v', [1, 2], /must be an array of exactly 3 finite numbers/],
    ['v', [1, 2, 'NaN'], /item 2 is "NaN"/],
    ['tags', 'a', /must be an array/],
    ['tags', ['a', 3], /column "tags\[\]": must be a string, got 3/],
  ])('column %s refuses %j', async (column, value, message) => {
    const res = await db.append('all', [{ id: 1 }, { id: 2, [column]: value }]);

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/^row 1, column/);
    expect(res.json.error).toMatch(message);
  });

  test('a body without data is 400; other content types are 415; Accept without a producible type is 406', async () => {
    const noData = await api.request('POST', '/v1/append/rows?table=items', { rows: [] });
    const csv = await api.request('POST', '/v1/append/rows?table=items', 'id\n1', { 'content-type': 'text/csv' });
    const xml = await api.request(
      'POST',
      '/v1/append/rows?table=items',
      { data: [{ id: 1 }] },
      { accept: 'application/xml' },
    );

    expect(noData.status).toBe(400);
    expect(noData.json.error).toMatch(/body has unknown property "rows"|missing required property "data"/);
    expect(csv.status).toBe(415);
    expect(xml.status).toBe(406);
    expect(xml.json.error).toMatch(/application\/vnd.apache.arrow.stream, application\/json/);
  });

  test.each([
    ['empty', '', /the body is empty but Content-Type is application\/json/],
    ['not JSON', '{"data": [', /the body is not valid JSON/],
    ['an array', '[{"id": 1}]', /^body must be object$/],
    ['with data not an array', '{"data": {"id": 1}}', /^body.data must be array$/],
  ])('a JSON body %s is 400 on append and update, and nothing is written', async (_, text, message) => {
    const before = await db.count('items');

    const appended = await api.request('POST', '/v1/append/rows?table=items', text);
    const updated = await api.request('POST', '/v1/update/rows?table=items&predicate=true', text);

    for (const res of [appended, updated]) {
      expect(res.status).toBe(400);
      expect(res.json.error).toMatch(message);
    }
    expect(await db.count('items')).toBe(before);
  });

  test('a body over STRATA_MAX_BODY_BYTES is 413 and nothing is written', async () => {
    const before = await db.count('items');
    const rows = Array.from({ length: 3000 }, (_, i) => ({ id: i, name: 'x'.repeat(20) }));

    const res = await db.append('items', rows);

    expect(res.status).toBe(413);
    expect(await db.count('items')).toBe(before);
  });

  test('an unknown table is 404; a bad or missing table parameter is 400', async () => {
    expect((await db.append('nope', [{ id: 1 }])).status).toBe(404);
    const missing = await api.request('POST', '/v1/append/rows', { data: [] });
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatch(/query parameter .*table/);
  });

  test.each([
    ['application/json, text/plain, */*', 'application/json'],
    ['*/*', ARROW],
    ['application/*', ARROW],
    [`application/json;q=0.5, ${ARROW}`, ARROW],
    [`${ARROW};q=0.2, application/json;q=0.9`, 'application/json'],
  ])('Accept %j is answered with %s', async (accept, type) => {
    const res = await api.raw('POST', '/v1/append/rows?table=items', { data: [] }, { accept });

    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(type);
  });

  test('table versions only grow', async () => {
    const a = await db.append('items', [{ id: 100 }]);
    const b = await db.append('items', [{ id: 101 }]);

    expect(Number(b.headers.get('x-strata-table-version'))).toBeGreaterThan(
      Number(a.headers.get('x-strata-table-version')),
    );
  });
});

describe('update', () => {
  test('replaces the matched rows in place, keeping row order, in one commit', async () => {
    await db.create({
      table_name: 'order',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'tag', type: 'utf8' },
      ],
    });
    await db.append(
      'order',
      [1, 2, 3, 4].map((id) => ({ id, tag: 'old' })),
    );

    const res = await db.update('order', 'id IN (2, 3)', [
      { id: 20, tag: 'new' },
      { id: 30, tag: 'new' },
    ]);

    expect(res.status).toBe(200);
    expect(res.json).toEqual({ matched: 2, n_tombstoned: 2, n_not_found: 0 });
    expect(await readTable(strata, 'acme', 'rows', 'order')).toEqual([
      { id: 1, tag: 'old' },
      { id: 20, tag: 'new' },
      { id: 30, tag: 'new' },
      { id: 4, tag: 'old' },
    ]);
  });

  test('a count mismatch is 409 and changes nothing', async () => {
    await db.create({ table_name: 'mismatch', schema: [{ name: 'id', type: 'i64' }] });
    await db.append('mismatch', [{ id: 1 }, { id: 2 }]);

    const res = await db.update('mismatch', 'id >= 1', [{ id: 9 }, { id: 8 }, { id: 7 }]);

    expect(res.status).toBe(409);
    expect(res.json.error).toBe('predicate matched 2 rows; 3 replacement rows were sent');
    expect(res.json.code).toBe('row_count_mismatch');
    expect(await readTable(strata, 'acme', 'rows', 'mismatch')).toEqual([{ id: 1 }, { id: 2 }]);
  });

  test('with Accept: Arrow the reply is the replacement rows, the counts in headers', async () => {
    await db.create({
      table_name: 'arrowed',
      schema: [
        { name: 'id', type: 'i64' },
        { name: 'name', type: 'utf8' },
      ],
    });
    await db.append('arrowed', [{ id: 1, name: 'a' }]);

    const res = await api.raw(
      'POST',
      '/v1/update/rows?table=arrowed&predicate=id%20%3D%201',
      { data: [{ id: 1, name: 'b' }] },
      { accept: ARROW },
    );

    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(ARROW);
    expect([
      res.headers.get('x-strata-matched'),
      res.headers.get('x-strata-tombstoned'),
      res.headers.get('x-strata-not-found'),
    ]).toEqual(['1', '1', '0']);
    const table = arrow.tableFromIPC(new Uint8Array(await res.arrayBuffer()));
    expect(table.numRows).toBe(1);
    expect(table.getChild('name')?.get(0)).toBe('b');
  });

  test('nothing matched and nothing sent is a 200 with zero counts', async () => {
    const res = await db.update('items', 'id = -12345', []);

    expect(res.json).toEqual({ matched: 0, n_tombstoned: 0, n_not_found: 0 });
  });

  test.each([
    ['missing', undefined, /predicate is required \(to match every row, send predicate=true\)/],
    ['empty', '  ', /predicate is required/],
    [
      'about an unknown column',
      'colour = 1',
      /predicate: no column named "colour".*the table's columns are id, name, price$/,
    ],
    ['a syntax error', 'id = ', /predicate: the predicate ends where a value was expected/],
    ['about the reserved row key', '_rowkey > 0', /predicate: no column named "_rowkey"/],
  ])('a predicate %s is 400', async (_, predicate, message) => {
    const res = await db.update('items', predicate, [{ id: 1 }]);

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
    expect(res.json.error).not.toMatch(/_rowkey`/);
  });

  test('values inside predicates stay values: quotes and keywords in strings match literally', async () => {
    await db.create({
      table_name: 'quotes',
      schema: [
        { name: 'id', type: 'i64' },
        { name: 'name', type: 'utf8' },
      ],
    });
    await db.append('quotes', [
      { id: 1, name: "O'Brien; DROP" },
      { id: 2, name: 'x' },
    ]);

    const res = await db.update('quotes', "name = 'O''Brien; DROP'", [{ id: 1, name: 'ok' }]);

    expect(res.json).toEqual({ matched: 1, n_tombstoned: 1, n_not_found: 0 });
  });

  test('back-quoted column names work in predicates', async () => {
    await db.create({ table_name: 'spaced', schema: [{ name: 'my col', type: 'i64' }] });
    await db.append('spaced', [{ 'my col': 5 }]);

    const res = await db.remove('spaced', '`my col` > 3');

    expect(res.json).toEqual({ matched: 1, n_tombstoned: 1, n_not_found: 0 });
  });
});

describe('delete', () => {
  test('returns the three counts and removes exactly the matched rows', async () => {
    await db.create({ table_name: 'del', schema: [{ name: 'id', type: 'i64' }] });
    await db.append(
      'del',
      [1, 2, 3, 4, 5].map((id) => ({ id })),
    );

    const res = await db.remove('del', 'id % 2 = 1');

    expect(res.status).toBe(200);
    expect(res.json).toEqual({ matched: 3, n_tombstoned: 3, n_not_found: 0 });
    expect(await readTable(strata, 'acme', 'rows', 'del')).toEqual([{ id: 2 }, { id: 4 }]);
    expect((await db.remove('del', 'true')).json).toEqual({ matched: 2, n_tombstoned: 2, n_not_found: 0 });
    expect((await db.remove('del', 'true')).json).toEqual({ matched: 0, n_tombstoned: 0, n_not_found: 0 });
  });

  test('a missing predicate is 400; an unknown table 404', async () => {
    expect((await db.remove('items')).status).toBe(400);
    expect((await db.remove('ghost', 'true')).status).toBe(404);
  });
});

describe('append bodies at their edges', () => {
  test('an Arrow body without a nullable vector column writes nulls there, as JSON does', async () => {
    await db.create({
      table_name: 'vec',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'v', type: 'vector', dim: 4 },
        { name: 'tags', type: 'list', item: 'utf8' },
      ],
    });
    const ids = arrow.vectorFromArray([1n, 2n], new arrow.Int64());
    const batch = new arrow.Table({ id: ids });

    const res = await db.appendArrow('vec', ipcOf(batch));
    const json = await db.append('vec', [{ id: 3 }]);

    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([
      { id: 1, v: null, tags: null },
      { id: 2, v: null, tags: null },
    ]);
    expect(json.status).toBe(200);
  });

  test('an Arrow body of no rows (schema only) appends nothing, as {"data": []} does', async () => {
    const schema = new arrow.Schema([
      new arrow.Field('id', new arrow.Int64(), false),
      new arrow.Field('v', new arrow.FixedSizeList(4, new arrow.Field('item', new arrow.Float32(), true)), true),
    ]);
    const before = await db.count('vec');

    const res = await db.appendArrow('vec', arrow.tableToIPC(new arrow.Table(schema), 'stream'));

    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([]);
    expect(await db.count('vec')).toBe(before);
  });

  test('NaN or Infinity in an Arrow vector is 400 naming row and item, as in JSON', async () => {
    const type = new arrow.FixedSizeList(4, new arrow.Field('item', new arrow.Float32(), true));
    const body = new arrow.Table({
      id: arrow.vectorFromArray([10n, 11n], new arrow.Int64()),
      v: arrow.vectorFromArray(
        [
          [1, 2, 3, 4],
          [0, Number.NaN, 0, 0],
        ],
        type,
      ),
    });

    const res = await db.appendArrow('vec', ipcOf(body));

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/row 1, column "v": item 1 is NaN; vectors hold finite numbers only/);
  });

  test('a nullable column named like an Object property (constructor, toString) left out of a row is null', async () => {
    await db.create({
      table_name: 'proto',
      schema: [
        { name: 'id', type: 'i32' },
        { name: 'constructor', type: 'utf8' },
        { name: 'toString', type: 'utf8' },
      ],
    });

    const res = await db.append('proto', [{ id: 1 }]);

    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([{ id: 1, constructor: null, toString: null }]);
  });

  test('Arrow bodies with invalid UTF-8 or broken offsets in a text column are 400 naming the column', async () => {
    const ipc = ipcOf(new arrow.Table({ title: arrow.vectorFromArray(['abab', 'cdcd'], new arrow.Utf8()) }));
    const at = Buffer.from(ipc).indexOf('ababcdcd');
    const offsets = Buffer.from(ipc).indexOf(Buffer.from(Int32Array.of(0, 4, 8).buffer));
    const badText = new Uint8Array(ipc);
    badText[at] = 0xff;
    const badOffsets = new Uint8Array(ipc);
    new DataView(badOffsets.buffer).setInt32(offsets + 8, 1 << 20, true);
    await db.create({ table_name: 'texts', schema: [{ name: 'title', type: 'utf8' }] });
    const send = (body: Uint8Array) =>
      api.request('POST', '/v1/append/rows?table=texts', body, { 'content-type': ARROW });

    const text = await send(badText);
    const broken = await send(badOffsets);

    expect(at).toBeGreaterThan(0);
    expect(offsets).toBeGreaterThan(0);
    expect(text.status).toBe(400);
    expect(text.json.error).toMatch(/column "title": the string data is not valid UTF-8/);
    expect(broken.status).toBe(400);
    expect(broken.json.error).toMatch(/column "title"/);
    expect(await db.count('texts')).toBe(0);
  });

  test('a damaged Arrow body is 400 and the server keeps answering', async () => {
    const body = Buffer.from(
      '/////3gAAAAQAAAAAAAKABAADgAHAAgACgAAAAAAAAEQAAAAAAAEAAgACAAAAAQACADWAAQAAAABAAAAFAAAABAAGAAEAAsAqwAUAAAADAAQAAAAFAAAAAAAAAEYAAAAAAAABRgAAAAFAAAAdGl0bGUAAMcAAAAABAAEAAQAAAD/////kAAAABQAAAAAAAAADAAaABgAEwAUAAQADAAAAAgAAAAAAAAAAAAAAAAAAAMQAAAABAAKAAwAAAAIAAQACgAAAAgAAAA8AAAAAwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAgAAAAAAAAACAAAAAAAAAAAAAAAAAAAAAAAAAABAABEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/////wAAAAA=',
      'base64',
    );
    await db.create({ table_name: 'docs', schema: [{ name: 'title', type: 'utf8' }] });

    const res = await api.request('POST', '/v1/append/rows?table=docs', new Uint8Array(body), {
      'content-type': ARROW,
    });

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/Arrow IPC/);
    expect((await fetch(`${strata.url}/healthz`)).status).toBe(200);
  });

  describe('without the file server body cap', () => {
    // 20,000 JSON rows are about 180 KB, over this file's 64 KB cap.
    const uncapped = serveFile({}, { database: 'wide' });
    const wide = tablesOf(uncapped.api, 'wide');

    test('a small body whose left-out columns would fill gigabytes is refused before they are made', async () => {
      await wide.create({
        table_name: 'wide_vec',
        schema: [
          { name: 'id', type: 'i8' },
          { name: 'v', type: 'vector', dim: 4096 },
        ],
      });
      const n = 20_000;
      const ids = new arrow.Table({ id: arrow.makeVector(new Int8Array(n)) });

      const viaArrow = await wide.appendArrow('wide_vec', ipcOf(ids));
      const viaJson = await wide.append(
        'wide_vec',
        Array.from({ length: n }, () => ({ id: 1 })),
      );

      for (const res of [viaArrow, viaJson] as { status: number; json: Record<string, unknown> }[]) {
        expect(res.status).toBe(400);
        expect(res.json.code).toBe('body_too_complex');
        expect(res.json.error).toMatch(/20000 rows would take at least 327860000 bytes/);
      }
      expect(await wide.count('wide_vec')).toBe(0);
    });
  });
});
