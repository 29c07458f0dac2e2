import { afterAll, beforeAll, expect, test } from 'vitest';
import { type Nodes, startNodes } from './support/nodes.js';
import { type LocalS3, S3RVER_KEY, startS3 } from './support/s3.js';
import { isCommit, type S3Proxy, startS3Proxy } from './support/s3-proxy.js';
import { type Client, eventually } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * A write whose commit reaches the bucket only after a purge on another node has deleted the database (the
 * bucket was slow, longer than the purge's 12 s wait for other nodes) is never acknowledged: its rows went with
 * the database. Two `strata serve` processes on one PostgreSQL, their bucket on s3rver behind a proxy that holds
 * back one manifest upload until the purge has finished (about 20 s: the purge's wait).
 */

let s3: LocalS3;
let proxy: S3Proxy;
let install: Nodes;
let apis: Client[];
let release: () => void = () => undefined;

beforeAll(async () => {
  s3 = await startS3(['late']);
  proxy = await startS3Proxy(s3.endpoint);
  install = await startNodes(2, {
    ...S3RVER_KEY,
    STRATA_ALLOW_INSECURE_ENDPOINTS: '1',
    STRATA_ALLOW_SERVER_IDENTITY: '1',
  });
  apis = install.apis;
}, 60_000);

afterAll(async () => {
  release();
  await install?.stop();
  await proxy?.close();
  await s3?.close();
});

const api = (i: number) => apis[i] as Client;

test('an append that commits after a purge on another node finished is not acknowledged', async () => {
  const storage = { provider: 's3', bucket: 'late', endpoint: proxy.endpoint, prefix: 'db' };
  expect((await api(0).post('/v1/databases', { name: 'late', storage })).status).toBe(201);
  expect((await api(0).post('/v1/databases/late/storage/verify')).status).toBe(200);
  await eventually(
    async () => (await api(1).get<{ databases: { name: string; state: string }[] }>('/v1/databases')).json,
    (list) => list.databases.some((d) => d.name === 'late' && d.state === 'active'),
  );
  const created = await tablesOf(api(0), 'late').create({
    table_name: 't',
    schema: [{ name: 'id', type: 'i64', nullable: false }],
  });
  expect(created.status).toBe(200);
  expect((await tablesOf(api(1), 'late').append('t', [{ id: 1 }])).status).toBe(200);

  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const reached = new Promise<void>((resolve) => {
    let holding = true;
    proxy.judge((req) => {
      if (!holding || !isCommit(req)) return { pass: true };
      holding = false;
      resolve();
      return { pass: true, wait: held };
    });
  });
  const late = tablesOf(api(1), 'late').append('t', [{ id: 2 }]);
  await reached;

  const purged = await api(0).del<{ purged: boolean }>('/v1/databases/late?purge=true');
  expect(purged.status).toBe(200);
  release();

  const answer = await late;
  expect([404, 503], `the late append answered ${answer.status}: ${JSON.stringify(answer.json)}`).toContain(
    answer.status,
  );
  expect((await api(1).post('/v1/query_sql/late', { query: 'SELECT count(*) AS n FROM t' })).status).toBe(404);
}, 90_000);
