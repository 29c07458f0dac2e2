import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { type LocalS3, S3RVER_KEY, startS3 } from './support/s3.js';
import { isCommit, type S3Proxy, startS3Proxy } from './support/s3-proxy.js';
import { type Client, eventually, startStrata, stateOf, type TestServer } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * A bucket that refuses Strata (a grant revoked, a bucket policy changed) is answered 503 `storage_unavailable`
 * naming the refusal, never a 500: reads as well as writes.
 *
 * A keyed write that fails after recording its intent because the bucket refused its commit (403) is answered
 * 503 `storage_unavailable`, and settles its key at once: the refusal is certain to have written nothing, so the
 * key is let go rather than kept unresolved (and never expired) until a retry that may never come. A retry then
 * applies the write once. The bucket is s3rver behind a proxy that refuses commits while told to.
 */

let s3: LocalS3;
let proxy: S3Proxy;
let strata: TestServer;
let api: Client;

beforeAll(async () => {
  s3 = await startS3(['refusing']);
  proxy = await startS3Proxy(s3.endpoint);
  strata = await startStrata({
    ...S3RVER_KEY,
    STRATA_ALLOW_INSECURE_ENDPOINTS: '1',
    STRATA_ALLOW_SERVER_IDENTITY: '1',
  });
  api = await strata.as('acme');
});

afterAll(async () => {
  await strata?.close();
  await proxy?.close();
  await s3?.close();
});

/** The idempotency records the control store keeps, as its SQLite file holds them. */
function records(): { key: string; state: string; intent: string | null }[] {
  const db = new Database(join(strata.dataDir, 'control.sqlite'), { readonly: true });
  try {
    return db.prepare('SELECT key, state, intent FROM idempotency ORDER BY key').all() as {
      key: string;
      state: string;
      intent: string | null;
    }[];
  } finally {
    db.close();
  }
}

test('a keyed append whose commit the bucket refused lets its key go, and its retry appends once', async () => {
  const storage = { provider: 's3', bucket: 'refusing', endpoint: proxy.endpoint, prefix: 'db' };
  expect((await api.post('/v1/databases', { name: 'r', storage })).status).toBe(201);
  expect((await api.post('/v1/databases/r/storage/verify')).status).toBe(200);
  await eventually(
    () => stateOf(api, 'r'),
    (state) => state === 'active',
  );
  const tables = tablesOf(api, 'r');
  const created = await tables.create({ table_name: 't', schema: [{ name: 'id', type: 'i64', nullable: false }] });
  expect(created.status, JSON.stringify(created.json)).toBe(200);
  const send = () => api.raw('POST', '/v1/append/r?table=t', { data: [{ id: 1 }] }, { 'idempotency-key': 'refused' });

  proxy.judge((req) => (isCommit(req) ? { pass: false, status: 403 } : { pass: true }));
  const failed = await send();
  const refused = (await failed.json()) as { error: string; code: string };
  expect(failed.status, JSON.stringify(refused)).toBe(503);
  expect(refused.code).toBe('storage_unavailable');
  expect(refused.error).toMatch(/refused the write's commit \(HTTP 403\); nothing was written/);
  expect(failed.headers.get('retry-after')).not.toBeNull();
  expect(records().filter((r) => r.key === 'refused')).toEqual([]);

  proxy.judge(() => ({ pass: true }));
  const retried = await send();
  expect(retried.status).toBe(200);
  expect(retried.headers.get('idempotent-replayed')).toBeNull();
  expect(records().filter((r) => r.key === 'refused')).toMatchObject([{ state: 'done' }]);
  const counted = await api.request<{ data: { n: number }[] }>(
    'POST',
    '/v1/query_sql/r',
    { query: 'SELECT count(*)::INTEGER AS n FROM t' },
    { accept: 'application/json' },
  );
  expect(counted.json.data).toEqual([{ n: 1 }]);
});

test('a search whose reads the bucket refuses is 503 storage_unavailable, not a 500', async () => {
  const storage = { provider: 's3', bucket: 'refusing', endpoint: proxy.endpoint, prefix: 'reads' };
  expect((await api.post('/v1/databases', { name: 'reads', storage })).status).toBe(201);
  expect((await api.post('/v1/databases/reads/storage/verify')).status).toBe(200);
  await eventually(
    () => stateOf(api, 'reads'),
    (state) => state === 'active',
  );
  const tables = tablesOf(api, 'reads');
  const created = await tables.create({
    table_name: 't',
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'body', type: 'utf8' },
    ],
    indexes: { fts: ['body'] },
  });
  expect(created.status, JSON.stringify(created.json)).toBe(200);
  expect((await tables.append('t', [{ id: 1, body: 'hello there' }])).status).toBe(200);

  proxy.judge((req) => (req.method === 'GET' ? { pass: false, status: 403 } : { pass: true }));
  try {
    const search = await api.post<{ code: string }>('/v1/count/reads', {
      table_name: 't',
      field_name: 'body',
      query: 'hello',
    });
    const sql = await api.post<{ code: string }>('/v1/query_sql/reads', { query: 'SELECT count(*) AS n FROM t' });
    for (const refused of [search, sql]) {
      expect(refused.status, JSON.stringify(refused.json)).toBe(503);
      expect(refused.json).toMatchObject({
        code: 'storage_unavailable',
        error: "the bucket refused to serve the table's files (HTTP 403); check the database's grant",
      });
      expect(refused.headers.get('retry-after')).toBe('5');
    }
  } finally {
    proxy.judge(() => ({ pass: true }));
  }
  // Served again once the bucket is.
  expect((await api.post('/v1/count/reads', { table_name: 't', field_name: 'body', query: 'hello' })).json).toEqual({
    count: 1,
  });
});
