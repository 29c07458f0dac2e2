import { existsSync, readdirSync } from 'node:fs';
import { type Socket, connect as tcp } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { activeLocalDatabase, type Client, startStrata, type TestServer } from './support/server.js';
import { tablesOf } from './support/tables.js';

let strata: TestServer;
let alice: Client;
let bob: Client;

beforeAll(async () => {
  strata = await startStrata({
    STRATA_MAX_DATABASES_PER_ACCOUNT: '3',
    STRATA_MAX_TABLES_PER_DATABASE: '2',
    STRATA_MAX_CONCURRENT_REQUESTS_PER_ACCOUNT: '2',
  });
  alice = await strata.as('alice');
  bob = await strata.as('bob');
  await activeLocalDatabase(alice, 'books', 'alice-books');
  await tablesOf(alice, 'books').create({ table_name: 'shelf', schema: [{ name: 'id', type: 'i64' }] });
  await tablesOf(alice, 'books').append('shelf', [{ id: 1 }]);
});
afterAll(() => strata?.close());

const shelfCount = async (): Promise<unknown> => {
  const res = await alice.request(
    'POST',
    '/v1/query_sql/books',
    { query: 'SELECT count(*)::INTEGER AS n FROM shelf' },
    { accept: 'application/json' },
  );
  return (res.json as { data?: { n: number }[] }).data?.[0]?.n;
};

const register = (api: Client, name: string, storage: Record<string, unknown>) =>
  api.post('/v1/databases', { name, storage: { provider: 'local', ...storage } });

describe('a storage location belongs to one database', () => {
  test('another account cannot bind the folder of a database, nor a prefix inside or around it', async () => {
    const same = await register(bob, 'steal', { bucket: 'alice-books' });
    const inside = await register(bob, 'steal', { bucket: 'alice-books', prefix: 'tables' });
    const upper = await register(bob, 'steal', { bucket: 'ALICE-BOOKS' });

    for (const res of [same, inside, upper]) {
      expect(res.status).toBe(409);
      expect(res.json.code).toBe('location_in_use');
    }
    // Nothing leaks of who holds it, and Alice's data is untouched.
    expect(same.json.error).not.toMatch(/"books"|alice"/);
    expect(await shelfCount()).toBe(1);
  });

  test('the owner cannot bind it twice either; side by side prefixes of one folder are separate locations', async () => {
    const twice = await register(alice, 'again', { bucket: 'alice-books', prefix: 'x' });
    const left = await register(bob, 'left', { bucket: 'shared', prefix: 'team/a' });
    const right = await register(bob, 'right', { bucket: 'shared', prefix: 'team/ab' });
    const parent = await register(alice, 'parent', { bucket: 'shared', prefix: 'team' });

    expect(twice.status).toBe(409);
    expect(left.status).toBe(201);
    expect(right.status).toBe(201);
    expect(parent.status).toBe(409);
    expect(parent.json.code).toBe('location_in_use');
    for (const name of ['left', 'right']) expect((await bob.del(`/v1/databases/${name}`)).status).toBe(200);
  });

  test('a deleted database frees its location', async () => {
    expect((await register(bob, 'temp', { bucket: 'freed' })).status).toBe(201);
    expect((await bob.del('/v1/databases/temp')).status).toBe(200);

    expect((await register(alice, 'taken-over', { bucket: 'freed' })).status).toBe(201);
    expect((await alice.del('/v1/databases/taken-over')).status).toBe(200);
  });

  test('purge deletes only what the database wrote: a database on a disjoint prefix keeps its tables', async () => {
    await activeLocalDatabase(bob, 'one', 'pair');
    const other = await register(bob, 'two', { bucket: 'pair-other' });
    expect(other.status).toBe(201);
    await tablesOf(bob, 'one').create({ table_name: 't', schema: [{ name: 'id', type: 'i64' }] });

    expect((await bob.del('/v1/databases/one?purge=true')).status).toBe(200);
    expect((await bob.del('/v1/databases/two')).status).toBe(200);

    expect(readdirSync(join(strata.dataDir, 'buckets', 'pair', 'tables'))).toEqual([]);
    expect(existsSync(join(strata.dataDir, 'buckets', 'alice-books', 'tables'))).toBe(true);
    expect(await shelfCount()).toBe(1);
  });
});

describe("one account never sees another's database", () => {
  test("every route on the other account's database answers 404, as for a name that does not exist", async () => {
    const routes: [string, string, unknown?][] = [
      ['POST', '/v1/databases/books/storage/verify'],
      ['DELETE', '/v1/databases/books?purge=true'],
      ['POST', '/v1/create_table/books', { table_name: 'x', schema: [{ name: 'a', type: 'i64' }] }],
      ['POST', '/v1/drop_table/books', { table_name: 'shelf', purge: true }],
      ['POST', '/v1/schema/books', { table_name: 'shelf' }],
      ['POST', '/v1/list_tables/books'],
      ['GET', '/v1/list_tables/books'],
      ['POST', '/v1/append/books?table=shelf', { data: [{ id: 2 }] }],
      ['POST', '/v1/update/books?table=shelf&predicate=true', { data: [{ id: 3 }] }],
      ['POST', '/v1/delete/books?table=shelf&predicate=true'],
      ['POST', '/v1/hybrid_search/books', { table_name: 'shelf', k: 1, vector_query: [1] }],
      ['POST', '/v1/count/books', { table_name: 'shelf', field_name: 'id', query: 'x' }],
      ['POST', '/v1/exact_match/books', { table_name: 'shelf', field_name: 'id', value: '1' }],
      ['POST', '/v1/token_match/books', { table_name: 'shelf', field_name: 'id', query: 'x' }],
      ['POST', '/v1/query_sql/books', { query: 'SELECT * FROM shelf' }],
    ];
    for (const [method, path, body] of routes) {
      const res = await bob.request(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.json.error, `${method} ${path}`).toBe('database "books" not found');
      expect(res.json.code, `${method} ${path}`).toBe('unknown_database');
    }
    expect(await shelfCount()).toBe(1);
  });
});

describe('tenant limits', () => {
  test('an account past its databases is refused 409 limit_exceeded; another account is not', async () => {
    const carol = await strata.as('carol');
    const statuses = [];
    for (const name of ['c1', 'c2', 'c3', 'c4']) {
      statuses.push((await register(carol, name, { bucket: `carol-${name}` })).status);
    }
    const over = await register(carol, 'c5', { bucket: 'carol-c5' });
    const dave = await strata.as('dave');

    expect(statuses).toEqual([201, 201, 201, 409]);
    expect(over.json.code).toBe('limit_exceeded');
    expect(over.json.error).toMatch(/STRATA_MAX_DATABASES_PER_ACCOUNT/);
    expect((await register(dave, 'd1', { bucket: 'dave-d1' })).status).toBe(201);
    expect((await carol.del('/v1/databases/c1')).status).toBe(200);
    expect((await register(carol, 'c5', { bucket: 'carol-c5' })).status).toBe(201);
  });

  test('a database past its tables is refused 409 limit_exceeded', async () => {
    const t = tablesOf(alice, 'books');
    const second = await t.create({ table_name: 'second', schema: [{ name: 'id', type: 'i64' }] });
    const third = await t.create({ table_name: 'third', schema: [{ name: 'id', type: 'i64' }] });

    expect(second.status).toBe(200);
    expect(third.status).toBe(409);
    expect(third.json.code).toBe('limit_exceeded');
    expect(third.json.error).toMatch(/STRATA_MAX_TABLES_PER_DATABASE/);
    expect((await t.drop('second')).status).toBe(200);
    expect((await t.create({ table_name: 'third', schema: [{ name: 'id', type: 'i64' }] })).status).toBe(200);
    expect((await t.drop('third')).status).toBe(200);
  });

  test('requests of one account past its concurrency are 429 with Retry-After; other accounts are served', async () => {
    // Two requests whose bodies never finish hold both of Alice's slots.
    const { hostname, port } = new URL(strata.url);
    const held = await Promise.all(
      [0, 1].map(
        () =>
          new Promise<Socket>((resolve) => {
            const socket = tcp({ host: hostname, port: Number(port) }, () => {
              socket.write(
                `POST /v1/databases HTTP/1.1\r\nHost: x\r\nAuthorization: ${alice.auth.authorization}\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{`,
              );
              resolve(socket);
            });
          }),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));

    const refused = await alice.get('/v1/databases');
    const other = await bob.get('/v1/databases');
    for (const socket of held) socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const after = await alice.get('/v1/databases');

    expect(refused.status).toBe(429);
    expect(refused.json.code).toBe('limit_exceeded');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(other.status).toBe(200);
    expect(after.status).toBe(200);
  });
  test('pipelined requests whose client vanished free their slots', async () => {
    const { hostname, port } = new URL(strata.url);
    for (let round = 0; round < 3; round++) {
      await new Promise<void>((resolve) => {
        const socket = tcp({ host: hostname, port: Number(port) }, () => {
          const one = `GET /v1/databases HTTP/1.1\r\nHost: x\r\nAuthorization: ${alice.auth.authorization}\r\n\r\n`;
          socket.write(one.repeat(6));
          setTimeout(() => {
            socket.destroy();
            resolve();
          }, 5);
        });
      });
    }
    await new Promise((resolve) => setTimeout(resolve, 300));

    const both = await Promise.all([alice.get('/v1/databases'), alice.get('/v1/databases')]);

    expect(both.map((res) => res.status)).toEqual([200, 200]);
  });
});

describe('the share of a node one account may hold', () => {
  test("one account's long queries cannot take every worker: another account's database is still placed", async () => {
    const node = await startStrata({
      STRATA_MAX_ACTIVE_DATABASES: '2',
      STRATA_MAX_WORKER_SHARE_PERCENT: '50',
      STRATA_SQL_TIMEOUT_MS: '4000',
    });
    try {
      const heavy = await node.as('heavy');
      const light = await node.as('light');
      await activeLocalDatabase(heavy, 'h1', 'heavy-1');
      await activeLocalDatabase(light, 'l1', 'light-1');
      // The heavy account's share is one worker: h2 takes it over from h1 while h1 is idle...
      await activeLocalDatabase(heavy, 'h2', 'heavy-2');
      // ...and h1 takes it back for a long query, which holds it.
      const slow = heavy.post('/v1/query_sql/h1', { query: 'SELECT count(*) FROM range(100000000000) a' });
      await new Promise((resolve) => setTimeout(resolve, 500));

      const onSecond = await heavy.post('/v1/query_sql/h2', { query: 'SELECT 1 AS one' });
      const onLight = await light.post('/v1/query_sql/l1', { query: 'SELECT 1 AS one' });
      const third = await light.post('/v1/databases', {
        name: 'l2',
        storage: { provider: 'local', bucket: 'light-2' },
      });
      const lightVerified = await light.post('/v1/databases/l2/storage/verify');
      await slow;

      expect(onSecond.status).toBe(429);
      expect(onSecond.json.code).toBe('limit_exceeded');
      expect(onSecond.json.error).toMatch(/STRATA_MAX_WORKER_SHARE_PERCENT/);
      expect(Number(onSecond.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(onLight.status).toBe(200);
      expect(third.status).toBe(201);
      expect(lightVerified.status).toBe(200);
    } finally {
      await node.close();
    }
  });
});
