import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Strata, StrataError } from '@strata/client';
import {
  type Data,
  Field,
  FixedSizeList,
  Float32,
  Int64,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Table,
  Utf8,
  vectorFromArray,
} from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { serveFile } from './support/server.js';

/** The TypeScript client (packages/client) against a real server, and against a server that answers 429 and 503. */

const { strata, api } = serveFile({ STRATA_MAX_BODY_BYTES: String(8 * 1024 * 1024) });
let client: Strata;

beforeAll(() => {
  const key = api.auth.authorization?.replace('Bearer ', '') ?? '';
  client = new Strata({ url: strata.url, apiKey: key, retry: { baseDelayMs: 10 } });
});

const DIM = 4;
const schema = new Schema([
  new Field('id', new Int64(), false),
  new Field('body', new Utf8(), true),
  new Field('emb', new FixedSizeList(DIM, new Field('item', new Float32(), false)), true),
]);

/** `n` rows from `from` as an Arrow table of the schema above. */
function rows(from: number, n: number): Table {
  const ids = makeData({
    type: new Int64(),
    length: n,
    data: BigInt64Array.from({ length: n }, (_, i) => BigInt(from + i)),
  });
  const body = vectorFromArray(
    Array.from({ length: n }, (_, i) => `row ${from + i} apples`),
    new Utf8(),
  ).data[0];
  const items = makeData({
    type: new Float32(),
    length: n * DIM,
    data: Float32Array.from({ length: n * DIM }, (_, i) => (((i * 7) % 13) + 1) / 13),
  });
  const emb = makeData({ type: schema.fields[2]?.type as FixedSizeList, length: n, nullCount: 0, child: items });
  const struct = makeData({
    type: new Struct(schema.fields),
    length: n,
    nullCount: 0,
    children: [ids, body, emb] as Data[],
  });
  return new Table([new RecordBatch(schema, struct)]);
}

describe('the client against a real server', () => {
  test('databases: create, list, verify, delete', async () => {
    const created = await client.databases.create({ name: 'c1', storage: { provider: 'local', bucket: 'c1' } });
    expect(created).toMatchObject({ name: 'c1', state: 'unverified' });
    expect((await client.databases.verify('c1')).checks.every((c) => c.ok)).toBe(true);
    expect((await client.databases.list()).map((d) => d.name)).toContain('c1');
    expect(await client.databases.delete('c1', { purge: true })).toEqual({ name: 'c1', purged: true });
  });

  test('tables, a 200k-row append in several requests, and every read', async () => {
    await client.databases.create({ name: 'shop', storage: { provider: 'local', bucket: 'shop' } });
    await client.databases.verify('shop');
    const db = client.database('shop');
    await expect.poll(async () => (await client.databases.list()).find((d) => d.name === 'shop')?.state).toBe('active');

    const described = await db.createTable('items', schema, {
      fts: ['body'],
      vector: [{ column: 'emb', metric: 'cosine' }],
    });
    expect(described.schema.map((c) => c.name)).toEqual(['id', 'body', 'emb']);
    const items = db.table('items');

    const progress: number[] = [];
    const report = await items.append(rows(0, 200_000), { onProgress: (p) => progress.push(p.rows) });
    expect(report.rows).toBe(200_000);
    expect(report.requests).toBeGreaterThanOrEqual(4);
    expect(progress.at(-1)).toBe(200_000);
    expect(await db.sql('SELECT count(*)::INTEGER AS n FROM items', { rows: true })).toEqual([{ n: 200_000 }]);

    const found = (await items.search({
      text: 'apples',
      textField: 'body',
      vector: [0.1, 0.2, 0.3, 0.4],
      vectorField: 'emb',
      k: 5,
    })) as Table;
    expect(found.numRows).toBe(5);
    expect(found.schema.fields.map((f) => f.name)).toContain('id');
    expect(await items.count('body', 'apples')).toBe(200_000);
    const exact = (await items.exactMatch({ field: 'id', value: '42' }, { rows: true })) as Record<string, unknown>[];
    expect(exact.map((r) => r.id)).toEqual([42]);
    const tokens = (await items.tokenMatch({ field: 'body', query: 'apples row', operator: 'and', limit: 3 })) as Table;
    expect(tokens.numRows).toBe(3);
    expect((await items.schema()).map((c) => [c.name, c.type])).toEqual([
      ['id', 'i64'],
      ['body', 'utf8'],
      ['emb', 'vector'],
    ]);
    expect(described.indexes.fts).toEqual([{ column: 'body', analyzer: 'ascii_lower' }]);

    expect(await items.update('id = 1', [{ id: 1, body: 'changed', emb: [1, 0, 0, 0] }])).toEqual({
      matched: 1,
      n_tombstoned: 1,
      n_not_found: 0,
    });
    // The receipt: the version the search started from, and the rows it read outside the indexes.
    const receipted = await items.searchWithReceipt({ text: 'changed', textField: 'body', k: 3 }, { rows: true });
    expect(receipted.rows).toEqual([expect.objectContaining({ id: 1 })]);
    expect(receipted.receipt.version).toBeGreaterThan(1);
    expect(receipted.receipt.freshRows).toBeGreaterThanOrEqual(0);
    const counted = await items.countWithReceipt('body', 'changed');
    expect(counted.count).toBe(1);
    // Upkeep may have committed since (a fold), never a version before the search's.
    expect(counted.receipt.version).toBeGreaterThanOrEqual(receipted.receipt.version);
    expect(await items.delete('id < 10')).toMatchObject({ matched: 10 });
    expect(await db.listTables()).toContainEqual(expect.objectContaining({ table_name: 'items', num_rows: 199_990 }));
    expect(await db.sql('SELECT count(*)::INTEGER AS n FROM items', { rows: true })).toEqual([{ n: 199_990 }]);
  }, 120_000);

  test('an append run again with the same key prefix lands nothing twice; an async iterable source works', async () => {
    const db = client.database('shop');
    await db.createTable('events', [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'body', type: 'utf8' },
      { name: 'emb', type: 'vector', dim: DIM },
    ]);
    async function* stream() {
      for (let i = 0; i < 5; i++) yield* rows(i * 1000, 1000).batches;
    }
    const first = await db.table('events').append(stream(), { maxRows: 1500, keyPrefix: 'load-1' });
    const again = await db.table('events').append(stream(), { maxRows: 1500, keyPrefix: 'load-1' });

    expect(first).toMatchObject({ rows: 5000, requests: 4, replayed: 0 });
    expect(again).toMatchObject({ rows: 5000, requests: 4, replayed: 4 });
    expect(
      await db.sql('SELECT count(*)::INTEGER AS n, count(DISTINCT id)::INTEGER AS d FROM events', { rows: true }),
    ).toEqual([{ n: 5000, d: 5000 }]);
    const plain = await db.table('events').append([{ id: 9001, body: 'plain row', emb: [1, 1, 1, 1] }]);
    expect(plain).toMatchObject({ rows: 1, requests: 1 });
    expect(await db.dropTable('events', { purge: true })).toMatchObject({ table_name: 'events', purged: true });
    expect((await db.listTables()).map((t) => t.table_name)).not.toContain('events');
  });

  test('a table with a primary key: upsert reports what it inserted and updated; a duplicate append is refused', async () => {
    const db = client.database('shop');
    const created = await db.createTable(
      'keyed',
      [
        { name: 'id', type: 'i64' },
        { name: 'body', type: 'utf8' },
      ],
      undefined,
      {
        primaryKey: 'id',
      },
    );
    expect(created.primary_key).toBe('id');
    expect((await db.table('keyed').schema()).find((c) => c.name === 'id')).toMatchObject({ primary_key: true });
    const table = db.table('keyed');
    const first = await table.upsert(
      Array.from({ length: 30 }, (_, id) => ({ id, body: 'first' })),
      { maxRows: 8 },
    );
    expect(first).toMatchObject({ rows: 30, requests: 4, inserted: 30, updated: 0 });
    const again = await table.upsert(
      Array.from({ length: 20 }, (_, i) => ({ id: i + 20, body: 'second' })),
      { maxRows: 8, concurrency: 1 },
    );
    expect(again).toMatchObject({ rows: 20, inserted: 10, updated: 10 });
    expect(
      await db.sql("SELECT count(*)::INTEGER AS n, count(*) FILTER (body = 'second')::INTEGER AS s FROM keyed", {
        rows: true,
      }),
    ).toEqual([{ n: 40, s: 20 }]);
    const refused = await table.append([{ id: 3, body: 'again' }]).catch((err: unknown) => err);
    expect(refused).toMatchObject({ status: 409, code: 'duplicate_key' });
  });

  test('refusals are typed errors with status and code, and are not retried', async () => {
    const refused = await client
      .database('shop')
      .table('nope')
      .count('body', 'x')
      .catch((err: unknown) => err);

    expect(refused).toBeInstanceOf(StrataError);
    expect(refused).toMatchObject({ status: 404, code: 'unknown_table' });
    const bad = await new Strata({
      url: strata.url,
      apiKey: 'sk_wrong_wrong_wrong_wrong_wrong_wrong_wrong_w',
    }).databases
      .list()
      .catch((err: unknown) => err);
    expect(bad).toMatchObject({ status: 401, code: 'unauthorized' });
  });
});

test('every route of the OpenAPI document has a client method', async () => {
  const { readFileSync } = await import('node:fs');
  const source = readFileSync(new URL('../packages/client/src/client.ts', import.meta.url), 'utf8');
  const doc = (await (await fetch(`${strata.url}/v1/openapi.json`)).json()) as { paths: Record<string, unknown> };
  const routes = Object.keys(doc.paths).filter((path) => path.startsWith('/v1/') && path !== '/v1/openapi.json');

  expect(routes.length).toBeGreaterThanOrEqual(15);
  for (const route of routes) {
    const words = route.split('/').filter((part) => part !== '' && part !== 'v1' && !part.startsWith('{'));
    for (const word of words) expect(source, route).toContain(word);
  }
});

describe('retries', () => {
  let server: Server;
  let url: string;
  const answers: { status: number; retryAfter?: string; code?: string }[] = [];
  const seen: number[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(Date.now());
      const next = answers.shift() ?? { status: 200 };
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (next.retryAfter !== undefined) headers['retry-after'] = next.retryAfter;
      res.writeHead(next.status, headers);
      res.end(
        next.status === 200
          ? JSON.stringify({ databases: [] })
          : JSON.stringify({ error: 'busy', code: next.code ?? 'unavailable' }),
      );
      void req;
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  test('503 and 429 are retried after their Retry-After', async () => {
    answers.push({ status: 503, retryAfter: '1' }, { status: 429, retryAfter: '1' });
    seen.length = 0;
    const started = Date.now();

    const list = await new Strata({ url, apiKey: 'k', retry: { baseDelayMs: 1 } }).databases.list();

    expect(list).toEqual([]);
    expect(seen).toHaveLength(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1900);
  });

  test('other refusals are not retried; retries give up after the configured attempts', async () => {
    answers.push({ status: 400 });
    seen.length = 0;
    const refused = await new Strata({ url, apiKey: 'k' }).databases.list().catch((err: unknown) => err);
    expect(refused).toMatchObject({ status: 400 });
    expect(seen).toHaveLength(1);

    answers.push({ status: 503 }, { status: 503 }, { status: 503 });
    seen.length = 0;
    const gaveUp = await new Strata({ url, apiKey: 'k', retry: { retries: 2, baseDelayMs: 1 } }).databases
      .list()
      .catch((err: unknown) => err);
    expect(gaveUp).toMatchObject({ status: 503, code: 'unavailable' });
    expect(seen).toHaveLength(3);
  });

  test('a write refused as index_behind is sent again past the retries, for at most retry.behindWaitMs', async () => {
    // Two refusals, then a 503, with one retry allowed: the waits for the table's indexes are no failed attempts,
    // and come at least a second apart whatever Retry-After says.
    answers.push(
      { status: 429, retryAfter: '0', code: 'index_behind' },
      { status: 429, code: 'index_behind' },
      { status: 503, retryAfter: '0' },
    );
    seen.length = 0;
    const patient = new Strata({ url, apiKey: 'k', retry: { retries: 1, baseDelayMs: 1, maxDelayMs: 5 } });
    expect(await patient.databases.list()).toEqual([]);
    expect(seen).toHaveLength(4);
    expect((seen[1] ?? 0) - (seen[0] ?? 0)).toBeGreaterThanOrEqual(990);
    expect((seen[2] ?? 0) - (seen[1] ?? 0)).toBeGreaterThanOrEqual(990);

    // With retries off, the waits still happen.
    answers.push({ status: 429, retryAfter: '1', code: 'index_behind' });
    seen.length = 0;
    expect(await new Strata({ url, apiKey: 'k', retry: { retries: 0 } }).databases.list()).toEqual([]);
    expect(seen).toHaveLength(2);

    // With no time left to wait, an index_behind refusal counts as any 429.
    for (let i = 0; i < 4; i++) answers.push({ status: 429, retryAfter: '0', code: 'index_behind' });
    seen.length = 0;
    const hurried = new Strata({ url, apiKey: 'k', retry: { retries: 1, baseDelayMs: 1, behindWaitMs: 0 } });
    expect(await hurried.databases.list().catch((err: unknown) => err)).toMatchObject({
      status: 429,
      code: 'index_behind',
    });
    expect(seen).toHaveLength(2);
    answers.length = 0;
  });

  test('a service that cannot be reached is retried, then a StrataError with status 0', async () => {
    const nowhere = new Strata({ url: 'http://127.0.0.1:9', apiKey: 'k', retry: { retries: 1, baseDelayMs: 1 } });
    const failed = await nowhere.databases.list().catch((err: unknown) => err);

    expect(failed).toBeInstanceOf(StrataError);
    expect(failed).toMatchObject({ status: 0 });
  });
});

test("a refusal keeps what its body says beside the message and code (a failed verification's checks)", async () => {
  const checks = [
    { step: 'credentials', ok: true, ms: 1.2 },
    { step: 'put', ok: false, ms: 3.4, note: 'AccessDenied' },
  ];
  const server = createServer((_req, res) => {
    res.writeHead(422, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        error: 'storage verification failed at put: access denied',
        code: 'verification_failed',
        name: 'lake',
        state: 'verify_failed',
        step: 'put',
        provider_code: 'AccessDenied',
        checks,
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const refused = await new Strata({ url, apiKey: 'k' }).databases.verify('lake').catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(StrataError);
    expect(refused).toMatchObject({
      status: 422,
      code: 'verification_failed',
      message: 'storage verification failed at put: access denied',
      details: { step: 'put', provider_code: 'AccessDenied', state: 'verify_failed', checks },
    });
    expect((refused as StrataError).details).not.toHaveProperty('error');
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
