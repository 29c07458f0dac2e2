import { connect as tcp } from 'node:net';
import { beforeAll, describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { AuthFailures } from '../src/http/auth.js';
import { capturedLogs, rememberSecret } from './support/logs.js';
import { activeLocalDatabase, serveFile, startStrata } from './support/server.js';
import { ARROW, ipcOf, tablesOf } from './support/tables.js';

const { strata, api } = serveFile(
  { STRATA_BODY_IDLE_MS: '300', STRATA_MAX_RESULT_BYTES: '65536' },
  { database: 'hard' },
);

beforeAll(async () => {});

/** Sends `text` on a raw connection and resolves with everything the server wrote before it closed or went quiet. */
function rawRequest(url: string, text: string, quietMs = 500): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tcp({ host: hostname, port: Number(port) });
    let received = '';
    let timer: NodeJS.Timeout | undefined;
    const done = () => {
      socket.destroy();
      resolve(received);
    };
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      clearTimeout(timer);
      timer = setTimeout(done, quietMs);
    });
    socket.on('end', done);
    socket.on('error', reject);
    socket.write(text);
  });
}

const statusOf = (response: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1] ?? 0);

describe('authentication is decided on the route', () => {
  test('an absolute-form request target without a key is 401, on reads and on writes', async () => {
    const read = await rawRequest(
      strata.url,
      'GET http://x/v1/databases HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    const body = '{"name":"sneak","storage":{"provider":"local","bucket":"sneak"}}';
    const write = await rawRequest(
      strata.url,
      `POST http://x/v1/databases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );

    expect(statusOf(read)).toBe(401);
    expect(read).toMatch(/www-authenticate: Bearer/i);
    expect(statusOf(write)).toBe(401);
  });

  test('an absolute-form target with a key is served as its path', async () => {
    const response = await rawRequest(
      strata.url,
      `GET http://x/v1/databases HTTP/1.1\r\nHost: x\r\n${Object.entries(api.auth)
        .map(([k, v]) => `${k}: ${v}`)
        .join('\r\n')}\r\nConnection: close\r\n\r\n`,
    );

    expect(statusOf(response)).toBe(200);
    expect(response).toMatch(/"name":"hard"/);
  });

  test('only the listed public routes answer without a key; an unknown route wants one', async () => {
    const anon = strata.withAuth(undefined);
    const open = await Promise.all(
      ['/healthz', '/readyz', '/metrics', '/v1/openapi.json', '/docs/'].map((p) => anon.raw('GET', p)),
    );
    for (const res of open) await res.arrayBuffer();
    const unknown = await anon.get('/v1/nothing-here');
    const outside = await anon.get('/nothing-here');

    expect(open.map((res) => res.status)).toEqual([200, 200, 200, 200, 200]);
    expect(unknown.status).toBe(401);
    expect(outside.status).toBe(401);
    expect(unknown.json.code).toBe('unauthorized');
  });

  test('failed authentications from one address are limited; a good key from it is still served', async () => {
    const limited = await startStrata({ STRATA_AUTH_FAILURES_PER_MINUTE: '3' });
    try {
      const good = await limited.as('good');
      const bad = limited.withAuth('Bearer sk_0000000000000000000000000000000000000000000');
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await bad.get('/v1/databases')).status);
      const refused = await bad.get('/v1/databases');
      const after = await good.get('/v1/databases');

      expect(statuses).toEqual([401, 401, 401, 429, 429]);
      expect(refused.json.code).toBe('auth_rate_limited');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(after.status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  test('failures are counted per IPv6 /64, per window, in a bounded table', () => {
    const failures = new AuthFailures(2, 60_000, 3);
    failures.record('2001:db8:1:2::1', 0);
    failures.record('2001:db8:1:2:ffff::9', 0);

    expect(failures.blockedFor('2001:0db8:0001:0002::5', 1000)).toBe(59);
    expect(failures.blockedFor('2001:db8:1:3::1', 1000)).toBe(0);
    expect(failures.blockedFor('2001:db8:1:2::1', 60_000)).toBe(0);
    for (const address of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) failures.record(address, 2000);
    // The oldest entry (the /64) went to keep the table at three.
    expect(failures.blockedFor('2001:db8:1:2::1', 2000)).toBe(0);
  });
});

describe('logs', () => {
  test('query strings are logged by parameter name only; a key sent in one never reaches the log', async () => {
    const secret = `sk_${'q'.repeat(40)}`;
    rememberSecret(secret);
    await api.get(`/v1/databases?api_key=${secret}&other=visible-value`);

    const lines = capturedLogs().filter((line) => line.includes('api_key='));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(line).toContain('api_key=[redacted]');
      expect(line).not.toContain('visible-value');
    }
  });
});

describe('request bodies', () => {
  test('a body that stops arriving is cut off after STRATA_BODY_IDLE_MS; the server goes on serving', async () => {
    const started = Date.now();
    const response = await rawRequest(
      strata.url,
      `POST /v1/databases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n${Object.entries(
        api.auth,
      )
        .map(([k, v]) => `${k}: ${v}`)
        .join('\r\n')}\r\n\r\n{`,
      5000,
    );
    const waited = Date.now() - started;

    expect(statusOf(response) === 0 || statusOf(response) === 408).toBe(true);
    expect(waited).toBeLessThan(4000);
    expect((await api.get('/v1/databases')).status).toBe(200);
  });
});

describe('inputs that used to be 500s', () => {
  const t = () => tablesOf(api, 'hard');

  test('an Arrow body without a nullable vector column writes nulls there, as JSON does', async () => {
    await t().create({
      table_name: 'vec',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'v', type: 'vector', dim: 4 },
        { name: 'tags', type: 'list', item: 'utf8' },
      ],
    });
    const ids = arrow.vectorFromArray([1n, 2n], new arrow.Int64());
    const batch = new arrow.Table({ id: ids });

    const res = await t().appendArrow('vec', ipcOf(batch));
    const json = await t().append('vec', [{ id: 3 }]);

    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([
      { id: 1, v: null, tags: null },
      { id: 2, v: null, tags: null },
    ]);
    expect(json.status).toBe(200);
  });

  test('a match with no rows on a table with list and vector columns answers an empty stream', async () => {
    const none = await api.request(
      'POST',
      '/v1/exact_match/hard',
      { table_name: 'vec', field_name: 'id', value: '999' },
      { accept: ARROW },
    );
    const asJson = await api.request(
      'POST',
      '/v1/exact_match/hard',
      { table_name: 'vec', field_name: 'id', value: '999' },
      { accept: 'application/json' },
    );

    expect(none.status).toBe(200);
    expect(asJson.json).toEqual({ data: [] });
  });

  test('a small body whose left-out columns would fill gigabytes is refused before they are made', async () => {
    await t().create({
      table_name: 'wide_vec',
      schema: [
        { name: 'id', type: 'i8' },
        { name: 'v', type: 'vector', dim: 4096 },
      ],
    });
    const n = 20_000;
    const ids = new arrow.Table({ id: arrow.makeVector(new Int8Array(n)) });

    const viaArrow = await t().appendArrow('wide_vec', ipcOf(ids));
    const viaJson = await t().append(
      'wide_vec',
      Array.from({ length: n }, () => ({ id: 1 })),
    );

    for (const res of [viaArrow, viaJson] as { status: number; json: Record<string, unknown> }[]) {
      expect(res.status).toBe(400);
      expect(res.json.code).toBe('body_too_complex');
      expect(res.json.error).toMatch(/20000 rows would take at least 327860000 bytes/);
    }
    expect(await t().count('wide_vec')).toBe(0);
  });

  test('exact_match on the smallest i64 finds its row', async () => {
    await t().create({ table_name: 'big', schema: [{ name: 'n', type: 'i64' }] });
    await t().append('big', [{ n: '-9223372036854775808' }, { n: '9223372036854775807' }, { n: 0 }]);

    const low = await api.post('/v1/exact_match/hard', {
      table_name: 'big',
      field_name: 'n',
      value: '-9223372036854775808',
    });
    const high = await api.request(
      'POST',
      '/v1/exact_match/hard',
      { table_name: 'big', field_name: 'n', value: '9223372036854775807' },
      { accept: 'application/json' },
    );

    expect(low.status).toBe(200);
    expect(high.json).toEqual({ data: [{ n: '9223372036854775807' }] });
  });

  test('dates beyond the range of JavaScript dates are written as ISO 8601 extended years', async () => {
    const res = await api.request(
      'POST',
      '/v1/query_sql/hard',
      {
        query: "SELECT DATE '-5877641-06-25' AS d, DATE '300000-01-01' AS e, TIMESTAMP '2024-02-29 12:34:56.789' AS t",
      },
      { accept: 'application/json' },
    );

    expect(res.json.error).toBeUndefined();
    expect(res.json).toEqual({
      data: [{ d: '-5877641-06-25', e: '+300000-01-01', t: '2024-02-29T12:34:56.789000Z' }],
    });
  });

  test('a column name holding a backtick is refused at creation, in either schema form', async () => {
    const plain = await t().create({ table_name: 'tick', schema: [{ name: 'a`b', type: 'utf8' }] });
    const indexed = await t().create({
      table_name: 'tick2',
      schema: [{ name: 'a`b', type: 'utf8' }],
      indexes: { fts: ['a`b'] },
    });
    const schema = new arrow.Schema([new arrow.Field('x`y', new arrow.Utf8(), true)]);
    const ipc = Buffer.from(arrow.tableToIPC(new arrow.Table(schema), 'stream')).toString('base64');
    const viaIpc = await t().create({ table_name: 'tick3', schema_ipc: ipc });

    for (const res of [plain, indexed, viaIpc]) {
      expect(res.status).toBe(400);
      expect(res.json.error).toMatch(/backtick/);
    }
    expect((await api.post('/v1/query_sql/hard', { query: 'SELECT 1 AS one' })).status).toBe(200);
  });

  test('a nullable column named like an Object property (constructor, toString) left out of a row is null', async () => {
    await t().create({
      table_name: 'proto',
      schema: [
        { name: 'id', type: 'i32' },
        { name: 'constructor', type: 'utf8' },
        { name: 'toString', type: 'utf8' },
      ],
    });

    const res = await t().append('proto', [{ id: 1 }]);

    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([{ id: 1, constructor: null, toString: null }]);
  });

  test('a SQL result over STRATA_MAX_RESULT_BYTES is 400 result_too_large naming the cap', async () => {
    const big = await api.post('/v1/query_sql/hard', {
      query: "SELECT range AS n, repeat('x', 100) AS s FROM range(100000)",
    });
    const oneValue = await api.request(
      'POST',
      '/v1/query_sql/hard',
      { query: "SELECT repeat('x', 200000) AS s" },
      { accept: 'application/json' },
    );

    expect(big.status).toBe(400);
    expect(big.json.code).toBe('result_too_large');
    expect(big.json.error).toMatch(/65536-byte cap/);
    expect(oneValue.status).toBe(400);
    expect(oneValue.json.code).toBe('result_too_large');
  });

  test('a row reply over the cap is refused too', async () => {
    await t().create({ table_name: 'wide', schema: [{ name: 's', type: 'utf8' }] });
    const value = 'y'.repeat(10_000);
    // A write's reply is the rows written: never refused once they are committed, whatever the cap.
    const appended = await t().append(
      'wide',
      Array.from({ length: 10 }, () => ({ s: value })),
    );
    expect(appended.status).toBe(200);
    expect(appended.json.data).toHaveLength(10);

    const res = await api.post('/v1/exact_match/hard', { table_name: 'wide', field_name: 's', value });

    expect(res.status).toBe(400);
    expect(res.json.code).toBe('result_too_large');
  });

  test('Arrow bodies with invalid UTF-8 or broken offsets in a text column are 400 naming the column', async () => {
    const ipc = ipcOf(new arrow.Table({ title: arrow.vectorFromArray(['abab', 'cdcd'], new arrow.Utf8()) }));
    const at = Buffer.from(ipc).indexOf('ababcdcd');
    const offsets = Buffer.from(ipc).indexOf(Buffer.from(Int32Array.of(0, 4, 8).buffer));
    const badText = new Uint8Array(ipc);
    badText[at] = 0xff;
    const badOffsets = new Uint8Array(ipc);
    new DataView(badOffsets.buffer).setInt32(offsets + 8, 1 << 20, true);
    await t().create({ table_name: 'texts', schema: [{ name: 'title', type: 'utf8' }] });
    const send = (body: Uint8Array) =>
      api.request('POST', '/v1/append/hard?table=texts', body, { 'content-type': ARROW });

    const text = await send(badText);
    const broken = await send(badOffsets);

    expect(at).toBeGreaterThan(0);
    expect(offsets).toBeGreaterThan(0);
    expect(text.status).toBe(400);
    expect(text.json.error).toMatch(/column "title": the string data is not valid UTF-8/);
    expect(broken.status).toBe(400);
    expect(broken.json.error).toMatch(/column "title"/);
    expect(await t().count('texts')).toBe(0);
  });

  test('an Arrow body of no rows (schema only) appends nothing, as {"data": []} does', async () => {
    const schema = new arrow.Schema([
      new arrow.Field('id', new arrow.Int64(), false),
      new arrow.Field('v', new arrow.FixedSizeList(4, new arrow.Field('item', new arrow.Float32(), true)), true),
    ]);
    const before = await t().count('vec');

    const res = await t().appendArrow('vec', arrow.tableToIPC(new arrow.Table(schema), 'stream'));

    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([]);
    expect(await t().count('vec')).toBe(before);
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

    const res = await t().appendArrow('vec', ipcOf(body));

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/row 1, column "v": item 1 is NaN; vectors hold finite numbers only/);
  });

  test('a projection naming a column twice is 400', async () => {
    const res = await api.post('/v1/exact_match/hard', {
      table_name: 'vec',
      field_name: 'id',
      value: '1',
      projection: ['id', 'id'],
    });

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/projection\[1\]: column "id" is listed twice/);
  });

  test('a column name holding a dot is refused at creation', async () => {
    const res = await t().create({ table_name: 'dotted', schema: [{ name: 'a.b', type: 'i32' }] });

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/must not contain a dot/);
  });

  test('names of 101 to 128 characters reach their routes', async () => {
    const name = 'n'.repeat(128);
    expect((await api.post('/v1/databases', { name, storage: { provider: 'local', bucket: name } })).status).toBe(201);

    const verified = await api.post(`/v1/databases/${name}/storage/verify`);
    const tooLong = await api.post(`/v1/databases/${'n'.repeat(300)}/storage/verify`);

    expect(verified.status).toBe(200);
    expect(tooLong.status).toBe(414);
    expect(tooLong.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('requests the router or the HTTP parser refuse still carry a request id and an error code', async () => {
    const badPath = await api.get('/v1/list_tables/%ZZ');
    const hugeHeader = await rawRequest(
      strata.url,
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    const badMethod = await rawRequest(strata.url, 'FUZZ /v1/databases HTTP/1.1\r\nHost: x\r\n\r\n');

    expect(badPath.status).toBe(400);
    expect(badPath.json).toEqual({ error: expect.stringMatching(/percent-encoded/), code: 'bad_request' });
    expect(badPath.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(statusOf(hugeHeader)).toBe(431);
    expect(hugeHeader).toMatch(/x-request-id: [0-9a-f-]{36}/i);
    expect(hugeHeader).toMatch(/"code":"headers_too_large"/);
    expect(statusOf(badMethod)).toBe(400);
    expect(badMethod).toMatch(/"code":"bad_request"/);
  });

  test('a damaged Arrow body is 400 and the server keeps answering', async () => {
    const body = Buffer.from(
      '/////3gAAAAQAAAAAAAKABAADgAHAAgACgAAAAAAAAEQAAAAAAAEAAgACAAAAAQACADWAAQAAAABAAAAFAAAABAAGAAEAAsAqwAUAAAADAAQAAAAFAAAAAAAAAEYAAAAAAAABRgAAAAFAAAAdGl0bGUAAMcAAAAABAAEAAQAAAD/////kAAAABQAAAAAAAAADAAaABgAEwAUAAQADAAAAAgAAAAAAAAAAAAAAAAAAAMQAAAABAAKAAwAAAAIAAQACgAAAAgAAAA8AAAAAwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAgAAAAAAAAACAAAAAAAAAAAAAAAAAAAAAAAAAABAABEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/////wAAAAA=',
      'base64',
    );
    await t().create({ table_name: 'docs', schema: [{ name: 'title', type: 'utf8' }] });

    const res = await api.request('POST', '/v1/append/hard?table=docs', new Uint8Array(body), {
      'content-type': ARROW,
    });

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/Arrow IPC/);
    expect((await fetch(`${strata.url}/healthz`)).status).toBe(200);
  });
});

describe('replies of any number of rows', () => {
  test('are read a part at a time, in row order, and refused once the parts pass the cap', async () => {
    const server = await startStrata({ STRATA_MAX_RESULT_BYTES: String(4 * 1024 * 1024) });
    try {
      const owner = await server.as('many');
      await activeLocalDatabase(owner, 'many');
      const t = tablesOf(owner, 'many');
      await t.create({
        table_name: 'rows',
        schema: [
          { name: 'id', type: 'i32' },
          { name: 'tag', type: 'utf8' },
          { name: 's', type: 'utf8' },
        ],
      });
      const n = 20_000;
      const filler = 'z'.repeat(250);
      expect(
        (
          await t.append(
            'rows',
            Array.from({ length: n }, (_, id) => ({ id, tag: 'same', s: filler })),
          )
        ).status,
      ).toBe(200);
      const match = (projection: string[]) =>
        owner.request(
          'POST',
          '/v1/exact_match/many',
          { table_name: 'rows', field_name: 'tag', value: 'same', projection },
          { accept: 'application/json' },
        );

      const ids = await match(['id']);
      const wide = await match(['s']);

      expect(ids.status).toBe(200);
      expect((ids.json as { data: { id: number }[] }).data.map((row) => row.id)).toEqual(
        Array.from({ length: n }, (_, i) => i),
      );
      expect(wide.status).toBe(400);
      expect(wide.json.code).toBe('result_too_large');
    } finally {
      await server.close();
    }
  });
});
