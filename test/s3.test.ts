import { CreateBucketCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../src/config.js';
import type { StrataError } from '../src/errors.js';
import { statusOf } from '../src/http/errors.js';
import { type Binding, bindingFrom, SERVER_IDENTITY_REFUSED } from '../src/storage/binding.js';
import { assumeRoleCredentials } from '../src/storage/credentials.js';
import { openObjects } from '../src/storage/open.js';
import { bindingCredentials } from '../src/storage/s3.js';
import { freshControlUrl } from './support/postgres.js';
import { type LocalS3, S3RVER_KEY, startS3 } from './support/s3.js';
import { type Client, eventually, startStrata, stateOf, type TestServer } from './support/server.js';
import { type StsDouble, startStsDouble } from './support/sts-double.js';
import { tablesOf } from './support/tables.js';

const ROLE = 'arn:aws:iam::123456789012:role/strata-reader';
const DENIED_ROLE = 'arn:aws:iam::123456789012:role/not-trusted';

let s3: LocalS3;
let sts: StsDouble;
let strata: TestServer;
let api: Client;
let admin: S3Client;

/**
 * A server that reaches s3rver (a loopback endpoint) and assumes roles through the STS double; s3rver buckets
 * without a role are reached through the server's own identity, which it allows.
 */
const serverEnv = (allowServerIdentity = true) => ({
  ...S3RVER_KEY,
  STRATA_ALLOW_INSECURE_ENDPOINTS: '1',
  STRATA_STS_ENDPOINT: sts.endpoint,
  ...(allowServerIdentity ? { STRATA_ALLOW_SERVER_IDENTITY: '1' } : {}),
});

beforeAll(async () => {
  s3 = await startS3(['strata-test']);
  sts = await startStsDouble({
    callerKeyId: S3RVER_KEY.AWS_ACCESS_KEY_ID,
    deniedRoles: [DENIED_ROLE],
    onIssue: (id, secret) => s3.acceptKey(id, secret),
  });
  strata = await startStrata(serverEnv());
  api = await strata.as('acme');
  admin = new S3Client({
    endpoint: s3.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  });
});

afterAll(async () => {
  await strata?.close();
  await sts?.close();
  await s3?.close();
});

/** A binding of the test bucket under `prefix` that uses the server's own identity (no role). */
const serverIdentityBinding = (prefix: string): Binding => ({
  provider: 's3',
  bucket: 'strata-test',
  region: 'us-east-1',
  endpoint: s3.endpoint,
  prefix,
  roleArn: null,
  externalId: '',
  requesterPays: false,
});

const s3Database = (name: string, storage: Record<string, unknown> = {}) =>
  api.post('/v1/databases', {
    name,
    storage: { provider: 's3', bucket: 'strata-test', endpoint: s3.endpoint, prefix: `tenants/${name}`, ...storage },
  });

describe('the s3 provider against a real S3 protocol server', () => {
  test('verification passes every step and the database becomes active', async () => {
    expect((await s3Database('orders')).status).toBe(201);

    const res = await api.post<{ state: string; checks: { step: string; ok: boolean; ms: number; note?: string }[] }>(
      '/v1/databases/orders/storage/verify',
    );

    expect(res.status).toBe(200);
    expect(res.json.checks.map((c) => c.step)).toEqual([
      'credentials',
      'put',
      'get',
      'list',
      'conditional_put',
      'delete',
    ]);
    for (const check of res.json.checks) expect(check.ms).toBeGreaterThanOrEqual(0);
    expect(res.json.checks.filter((c) => !c.ok).map((c) => c.step)).toEqual(['conditional_put']);
    // s3rver ignores If-None-Match, so the note warns against concurrent writers from several nodes.
    expect(res.json.checks.find((c) => c.step === 'conditional_put')?.note).toMatch(
      /several nodes at once are not safe/,
    );
    expect(res.json.checks.find((c) => c.step === 'conditional_put')?.note).toMatch(/put-if-absent/);
    expect(
      await eventually(
        () => stateOf(api, 'orders'),
        (s) => s === 'active',
      ),
    ).toBe('active');
    const left = await admin.send(new ListObjectsV2Command({ Bucket: 'strata-test', Prefix: 'tenants/orders/' }));
    expect(left.Contents ?? []).toEqual([]);
  });

  test('a missing bucket fails at put with 422 naming the step and code, then recovers once it exists', async () => {
    await s3Database('late', { bucket: 'not-yet-there' });

    const failed = await api.post('/v1/databases/late/storage/verify');

    expect(failed.status).toBe(422);
    expect(failed.json.error).toMatch(/^storage verification failed at put: NoSuchBucket/);
    expect(failed.json.step).toBe('put');
    expect(await stateOf(api, 'late')).toBe('verify_failed');

    await admin.send(new CreateBucketCommand({ Bucket: 'not-yet-there' }));
    const passed = await api.post('/v1/databases/late/storage/verify');

    expect(passed.status).toBe(200);
    expect(passed.json.state).toBe('activating');
    expect(
      await eventually(
        () => stateOf(api, 'late'),
        (s) => s === 'active',
      ),
    ).toBe('active');
  });

  test('wrong credentials fail verification with the provider error code', async () => {
    const wrong = await startStrata({
      AWS_ACCESS_KEY_ID: 'NOT-A-KEY',
      AWS_SECRET_ACCESS_KEY: 'nope',
      STRATA_ALLOW_INSECURE_ENDPOINTS: '1',
      STRATA_ALLOW_SERVER_IDENTITY: '1',
    });
    try {
      const other = await wrong.as('acme');
      await other.post('/v1/databases', {
        name: 'd',
        storage: { provider: 's3', bucket: 'strata-test', endpoint: s3.endpoint },
      });

      const res = await other.post('/v1/databases/d/storage/verify');

      expect(res.status).toBe(422);
      expect(res.json.error).toMatch(/^storage verification failed at put: InvalidAccessKeyId/);
      expect(await stateOf(other, 'd')).toBe('verify_failed');
    } finally {
      await wrong.close();
    }
  });

  test('role_arn is assumed through STS with the server identity, and S3 is reached with the role', async () => {
    const before = sts.calls.length;
    const created = await s3Database('with-role', { role_arn: ROLE });

    const res = await api.post('/v1/databases/with-role/storage/verify');

    expect(res.status).toBe(200);
    const call = sts.calls[before];
    expect(created.json.external_id).toEqual(expect.any(String));
    expect(call).toMatchObject({ roleArn: ROLE, signedBy: 'S3RVER', externalId: created.json.external_id });
    expect(call?.sessionName).toMatch(/^strata-/);
  });

  test('a role the server may not assume fails at credentials', async () => {
    await s3Database('denied', { role_arn: DENIED_ROLE });

    const res = await api.post('/v1/databases/denied/storage/verify');

    expect(res.status).toBe(422);
    expect(res.json.error).toMatch(/^storage verification failed at credentials: AccessDenied/);
  });

  test('a verification already running for the database is answered 409', async () => {
    await s3Database('busy', { role_arn: ROLE });
    const before = sts.calls.length;
    const release = sts.hold();
    const first = api.post('/v1/databases/busy/storage/verify');
    await eventually(
      async () => sts.calls.length,
      (n) => n > before,
    );

    const second = await api.post('/v1/databases/busy/storage/verify');
    release();

    expect(second.status).toBe(409);
    expect(second.json.error).toMatch(/already running/);
    expect(second.json.code).toBe('verification_running');
    expect((await first).status).toBe(200);
  });

  test('requester_pays is accepted and sent; purge deletes only what the service wrote', async () => {
    await s3Database('payer', { requester_pays: true });
    expect((await api.post('/v1/databases/payer/storage/verify')).status).toBe(200);
    await eventually(
      () => stateOf(api, 'payer'),
      (state) => state === 'active',
    );
    expect(
      (await tablesOf(api, 'payer').create({ table_name: 'own', schema: [{ name: 'id', type: 'i64' }] })).status,
    ).toBe(200);
    const put = (Key: string) => admin.send(new PutObjectCommand({ Bucket: 'strata-test', Key, Body: 'x' }));
    // Objects under the prefix that this database did not write: a foreign dataset, a probe, the customer's file.
    await put('tenants/payer/tables/t1.lance/data/0.lance');
    await put('tenants/payer/_strata/verify/old.probe');
    await put('tenants/payer/customer-own.csv');
    const listed = async () =>
      ((await admin.send(new ListObjectsV2Command({ Bucket: 'strata-test', Prefix: 'tenants/payer/' }))).Contents ?? [])
        .map((o) => o.Key)
        .sort();
    expect((await listed()).length).toBeGreaterThan(3);

    const res = await api.del('/v1/databases/payer?purge=true');

    expect(res.status).toBe(200);
    expect(res.json).toEqual({ name: 'payer', purged: true });
    expect(await listed()).toEqual([
      'tenants/payer/_strata/verify/old.probe',
      'tenants/payer/customer-own.csv',
      'tenants/payer/tables/t1.lance/data/0.lance',
    ]);
  });
});

describe('an unreachable bucket', () => {
  test('is 503 with Retry-After where the service must reach it, and verification fails with 422', async () => {
    await api.post('/v1/databases', {
      name: 'gone-bucket',
      storage: { provider: 's3', bucket: 'strata-test', endpoint: 'http://127.0.0.1:9' },
    });

    const verify = await api.post('/v1/databases/gone-bucket/storage/verify');
    // A dataset recorded as written, as a table creation records it, so that purge has something to reach.
    const store = strata.app.ctx.store;
    const db = await store.findDatabase((await store.ensureAccount('acme')).id, 'gone-bucket');
    await store.insertTable({
      databaseId: db?.id ?? '',
      name: 'lost',
      tableId: 't_lost',
      schemaIpc: '',
      indexes: '{}',
      createdMs: Date.now(),
      state: 'creating',
    });
    const purge = await api.del('/v1/databases/gone-bucket?purge=true');

    expect(verify.status).toBe(422);
    expect(verify.json.error).toBe(
      'storage verification failed at put: EndpointUnreachable: the storage endpoint could not be reached',
    );
    expect(verify.json.code).toBe('verification_failed');
    expect(verify.json.provider_code).toBe('EndpointUnreachable');
    // Nothing of the socket's own failure (address, port, errno) reaches the customer: no network oracle.
    expect(JSON.stringify(verify.json)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1/);
    expect(purge.status).toBe(503);
    expect(Number(purge.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(purge.json.error).toMatch(/the bucket could not be reached/);
    expect(await stateOf(api, 'gone-bucket')).toBe('verify_failed');
  });
});

describe('tables and rows on the s3 provider', () => {
  test('create, append, update, delete and drop with purge go through the S3 protocol', async () => {
    await s3Database('lake');
    expect((await api.post('/v1/databases/lake/storage/verify')).status).toBe(200);
    await eventually(
      () => stateOf(api, 'lake'),
      (s) => s === 'active',
    );
    const lake = tablesOf(api, 'lake');

    const created = await lake.create({
      table_name: 'docs',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'body', type: 'utf8' },
        { name: 'emb', type: 'vector', dim: 2 },
      ],
      indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'cosine' }] },
    });
    expect(created.status).toBe(200);

    const appended = await lake.append('docs', [
      { id: 1, body: 'alpha', emb: [1, 0] },
      { id: 2, body: 'beta', emb: [0, 1] },
      { id: 3, body: 'gamma', emb: [1, 1] },
    ]);
    expect(appended.status).toBe(200);
    expect(appended.json.data).toHaveLength(3);

    const updated = await lake.update('docs', 'id = 2', [{ id: 2, body: 'beta two', emb: [0, 2] }]);
    expect(updated.json).toEqual({ matched: 1, n_tombstoned: 1, n_not_found: 0 });
    const deleted = await lake.remove('docs', 'id = 3');
    expect(deleted.json).toEqual({ matched: 1, n_tombstoned: 1, n_not_found: 0 });
    expect(await lake.count('docs')).toBe(2);
    const sql = async (query: string) =>
      (await api.request<{ data: unknown[] }>('POST', '/v1/query_sql/lake', { query }, { accept: 'application/json' }))
        .json.data;
    expect(await sql('SELECT id, body FROM docs ORDER BY id')).toEqual([
      { id: 1, body: 'alpha' },
      { id: 2, body: 'beta two' },
    ]);
    await lake.append('docs', [{ id: 4, body: 'delta', emb: [2, 0] }]);
    expect(await sql('SELECT count(*) AS n, max(id) AS top FROM docs')).toEqual([{ n: 3, top: 4 }]);
    // A text search over rows no index covers scores them with BM25's statistics, which are kept beside the table.
    const searched = await api.post('/v1/hybrid_search/lake', {
      table_name: 'docs',
      text_field: 'body',
      text_query: 'delta',
      k: 5,
    });
    expect(searched.status).toBe(200);
    const kept = () =>
      admin.send(new ListObjectsV2Command({ Bucket: 'strata-test', Prefix: 'tenants/lake/_strata/tables/' }));
    const keys = await eventually(
      async () => ((await kept()).Contents ?? []).map((o) => o.Key),
      (found) => found.length > 0,
    );
    expect(keys).toEqual([
      expect.stringMatching(/^tenants\/lake\/_strata\/tables\/t_[0-9a-f]{32}\/bm25-statistics\.ndjson$/),
    ]);

    const listed = await admin.send(
      new ListObjectsV2Command({ Bucket: 'strata-test', Prefix: 'tenants/lake/tables/' }),
    );
    expect((listed.Contents ?? []).length).toBeGreaterThan(0);
    const dropped = await lake.drop('docs', true);
    expect(dropped.json.location).toMatch(/^s3:\/\/strata-test\/tenants\/lake\/tables\/t_[0-9a-f]{32}\.lance$/);
    const left = await admin.send(new ListObjectsV2Command({ Bucket: 'strata-test', Prefix: 'tenants/lake/tables/' }));
    expect(left.Contents ?? []).toEqual([]);
    expect((await kept()).Contents ?? []).toEqual([]);
  });

  test('an object read with a bound is refused past it before more of it is read', async () => {
    const config = loadConfig({ ...S3RVER_KEY, STRATA_ALLOW_INSECURE_ENDPOINTS: '1' });
    const binding = serverIdentityBinding('tenants/bounded');
    const policy = { localStorage: true, allowInsecureEndpoints: true, allowServerIdentity: true };
    const objects = await openObjects(binding, { dataDir: strata.dataDir, aws: config.aws, policy }, 'strata-bounded');
    await objects.put('some/object', new Uint8Array(100).fill(7));
    expect(await objects.get('some/object', 100)).toEqual(new Uint8Array(100).fill(7));
    await expect(objects.get('some/object', 99)).rejects.toMatchObject({ code: 'TooLarge' });
  });
});

describe('index upkeep on the s3 provider', () => {
  test('the upkeep process builds the ANN index and folds new rows through the S3 protocol', async () => {
    const server = await startStrata({ ...serverEnv(), STRATA_UPKEEP_INTERVAL_MS: '100', STRATA_ANN_MIN_ROWS: '300' });
    try {
      const client = await server.as('acme');
      const created = await client.post('/v1/databases', {
        name: 'indexed',
        storage: { provider: 's3', bucket: 'strata-test', endpoint: s3.endpoint, prefix: 'tenants/indexed' },
      });
      expect(created.status).toBe(201);
      expect((await client.post('/v1/databases/indexed/storage/verify')).status).toBe(200);
      await eventually(
        () => stateOf(client, 'indexed'),
        (s) => s === 'active',
      );
      const lake = tablesOf(client, 'indexed');
      await lake.create({
        table_name: 'docs',
        schema: [
          { name: 'id', type: 'i64', nullable: false },
          { name: 'body', type: 'utf8' },
          { name: 'emb', type: 'vector', dim: 8 },
        ],
        indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'l2' }] },
      });
      const emb = (id: number) => Array.from({ length: 8 }, (_, i) => Math.sin(id * 0.7 + i * 1.3));
      await lake.append(
        'docs',
        Array.from({ length: 400 }, (_, id) => ({ id, body: `doc ${id % 9}`, emb: emb(id) })),
      );
      const metrics = await eventually(
        async () => (await fetch(`${server.url}/metrics`)).text(),
        (m) =>
          /^strata_upkeep_duration_seconds_count\{work="ann_build"\} [1-9]/m.test(m) &&
          /^strata_upkeep_duration_seconds_count\{work="optimize"\} [1-9]/m.test(m) &&
          /^strata_unindexed_rows 0$/m.test(m),
        30_000,
      );
      expect(metrics).toMatch(/^strata_upkeep_failures_total 0$/m);
      const listed = await admin.send(
        new ListObjectsV2Command({ Bucket: 'strata-test', Prefix: 'tenants/indexed/tables/' }),
      );
      expect((listed.Contents ?? []).some((o) => /\/_indices\/.+\.idx$/.test(o.Key ?? ''))).toBe(true);
      const hits = await client.request<{ data: { id: number }[] }>(
        'POST',
        '/v1/hybrid_search/indexed',
        { table_name: 'docs', vector_field: 'emb', vector_query: emb(123), k: 1, projection: ['id'] },
        { accept: 'application/json' },
      );
      expect(hits.json.data.map((h) => Number(h.id))).toEqual([123]);
    } finally {
      await server.close();
    }
  });
});

describe('assumed-role credentials', () => {
  test('are cached, and renewed before they expire', async () => {
    const shortLived = await startStsDouble({
      callerKeyId: 'S3RVER',
      lifetimeMs: 5 * 60_000 + 400,
      onIssue: () => {},
    });
    try {
      const config = loadConfig({ ...S3RVER_KEY, STRATA_STS_ENDPOINT: shortLived.endpoint });
      const credentials = assumeRoleCredentials({ roleArn: ROLE, externalId: 'ext-test' }, config.aws, 'strata-test');

      const first = await credentials();
      const again = await credentials();
      expect(again.accessKeyId).toBe(first.accessKeyId);
      expect(shortLived.calls).toHaveLength(1);

      await new Promise((resolve) => setTimeout(resolve, 500));
      const renewed = await credentials();

      expect(shortLived.calls).toHaveLength(2);
      expect(renewed.accessKeyId).not.toBe(first.accessKeyId);
    } finally {
      await shortLived.close();
    }
  });
});

describe('the server identity is not lent to accounts (confused deputy)', () => {
  test('without STRATA_ALLOW_SERVER_IDENTITY an s3 binding without role_arn is 422 saying why; with one it is 201', async () => {
    const strict = await startStrata(serverEnv(false));
    try {
      const client = await strict.as('acme');
      const storage = { provider: 's3', bucket: 'strata-test', endpoint: s3.endpoint };

      const own = await client.post('/v1/databases', { name: 'own-identity', storage });
      const role = await client.post('/v1/databases', { name: 'by-role', storage: { ...storage, role_arn: ROLE } });

      expect(own.status).toBe(422);
      expect(own.json.error).toBe(SERVER_IDENTITY_REFUSED);
      expect(own.json.error).toMatch(/role_arn.*STRATA_ALLOW_SERVER_IDENTITY/);
      expect(role.status).toBe(201);
    } finally {
      await strict.close();
    }
  });

  test('a binding stored while the server allowed its identity is refused once it no longer does', async () => {
    const config = loadConfig({ ...S3RVER_KEY, STRATA_ALLOW_INSECURE_ENDPOINTS: '1' });
    const binding = serverIdentityBinding('tenants/old');
    const env = (allowServerIdentity: boolean) => ({
      dataDir: strata.dataDir,
      aws: config.aws,
      policy: { localStorage: true, allowInsecureEndpoints: true, allowServerIdentity },
    });

    const refused = await openObjects(binding, env(false), 'strata-old').catch((err: unknown) => err);
    expect(refused).toMatchObject({ kind: 'unprocessable', message: SERVER_IDENTITY_REFUSED });
    expect(statusOf(refused as StrataError)).toBe(422);
    await expect(openObjects(binding, env(true), 'strata-old')).resolves.toBeDefined();
  });

  test("AssumeRole carries the account's external id, kept in the binding", async () => {
    const config = loadConfig({ ...S3RVER_KEY, STRATA_STS_ENDPOINT: sts.endpoint });
    const policy = { localStorage: true, allowInsecureEndpoints: true, allowServerIdentity: false };
    const binding = await bindingFrom(
      { provider: 's3', bucket: 'strata-test', endpoint: s3.endpoint, role_arn: ROLE },
      policy,
      'ext-acme-7f3a',
    );
    if (binding.provider !== 's3') throw new Error('expected an s3 binding');
    const before = sts.calls.length;

    await bindingCredentials(binding, config.aws, 'strata-ext')?.();

    expect(binding.externalId).toBe('ext-acme-7f3a');
    expect(sts.calls.slice(before)).toEqual([
      { roleArn: ROLE, sessionName: 'strata-ext', externalId: 'ext-acme-7f3a', signedBy: 'S3RVER' },
    ]);
  });

  test('a binding stored before external ids existed assumes its role without one', async () => {
    const config = loadConfig({ ...S3RVER_KEY, STRATA_STS_ENDPOINT: sts.endpoint });
    const stored = JSON.parse(
      JSON.stringify({
        provider: 's3',
        bucket: 'strata-test',
        region: 'us-east-1',
        endpoint: s3.endpoint,
        prefix: '',
        roleArn: ROLE,
        requesterPays: false,
      }),
    ) as Extract<Binding, { provider: 's3' }>;
    const before = sts.calls.length;

    await bindingCredentials(stored, config.aws, 'strata-legacy')?.();

    expect(sts.calls.slice(before)).toMatchObject([{ roleArn: ROLE, externalId: undefined }]);
  });
});

describe('two nodes on one PostgreSQL and one S3 bucket', () => {
  test('appends through one node, then the other, then the first again: every row once, read alike on both', async () => {
    const controlUrl = await freshControlUrl();
    const [a, b] = [
      await startStrata({ ...serverEnv(), STRATA_CONTROL_URL: controlUrl }),
      await startStrata({ ...serverEnv(), STRATA_CONTROL_URL: controlUrl }),
    ];
    try {
      const [onA, onB] = [await a.as('acme'), await b.as('acme')];
      const storage = { provider: 's3', bucket: 'strata-test', endpoint: s3.endpoint, prefix: 'tenants/two-nodes' };
      expect((await onA.post('/v1/databases', { name: 'shared', storage })).status).toBe(201);
      expect((await onA.post('/v1/databases/shared/storage/verify')).status).toBe(200);
      await eventually(
        () => stateOf(onB, 'shared'),
        (state) => state === 'active',
      );
      expect(
        (
          await tablesOf(onB, 'shared').create({
            table_name: 'log',
            schema: [{ name: 'id', type: 'i64', nullable: false }],
          })
        ).status,
      ).toBe(200);

      // One node at a time: s3rver ignores conditional PUT, so concurrent writers cannot be proven on it.
      for (let i = 0; i < 6; i++) {
        const via = tablesOf(i % 2 === 0 ? onA : onB, 'shared');
        expect((await via.append('log', [{ id: 2 * i }, { id: 2 * i + 1 }])).status).toBe(200);
      }
      for (const api of [onA, onB]) {
        const rows = await api.request<{ data: { id: number }[] }>(
          'POST',
          '/v1/query_sql/shared',
          { query: 'SELECT id::INTEGER AS id FROM log ORDER BY id' },
          { accept: 'application/json' },
        );
        expect(rows.json.data.map((r) => r.id)).toEqual(Array.from({ length: 12 }, (_, i) => i));
      }
    } finally {
      await a.close();
      await b.close();
    }
  }, 60_000);
});

describe('an S3 location belongs to one database', () => {
  test('another account cannot bind a bucket prefix already bound, however the endpoint is spelled', async () => {
    const other = await strata.as('other-tenant');
    expect((await s3Database('claimed')).status).toBe(201);
    const attempt = (storage: Record<string, unknown>) =>
      other.post('/v1/databases', { name: 'grab', storage: { provider: 's3', bucket: 'strata-test', ...storage } });
    const upper = s3.endpoint.replace('http://', 'HTTP://');

    const refused = [
      await attempt({ endpoint: s3.endpoint, prefix: 'tenants/claimed' }),
      await attempt({ endpoint: `${s3.endpoint}/`, prefix: 'tenants/claimed/deeper' }),
      await attempt({ endpoint: upper, prefix: 'tenants' }),
      await attempt({ endpoint: s3.endpoint }),
    ];
    const beside = await attempt({ endpoint: s3.endpoint, prefix: 'tenants/claimed-not' });

    for (const res of refused) {
      expect(res.status).toBe(409);
      expect(res.json.code).toBe('location_in_use');
    }
    expect(beside.status).toBe(201);
  });
});
