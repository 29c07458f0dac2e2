import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { rememberSecret } from './support/logs.js';
import { freshDatabase, startPostgres, type TestPostgres } from './support/postgres-server.js';
import { cli, type Served, serveProcess } from './support/processes.js';
import { type Client, client, eventually, freePort } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * PostgreSQL stopped under load and started again: nodes answer 503 + Retry-After meanwhile (never a 500, never a
 * hang past a few seconds) and serve again once it is back, without a restart. The server is this file's own, as
 * stopping the test run's shared one would fail other files.
 * Slow: about 11 s, a PostgreSQL of its own and three `strata serve` processes, waiting out the outage.
 */

let postgres: TestPostgres;
let dataDir: string;
const nodes: Served[] = [];
let apis: Client[];

beforeAll(async () => {
  postgres = await startPostgres(await freePort());
  const controlUrl = await freshDatabase(postgres.serverUrl);
  dataDir = mkdtempSync(join(tmpdir(), 'strata-outage-'));
  const created = await cli(['keys', 'create', '--account', 'acme'], { STRATA_CONTROL_URL: controlUrl });
  const secret = created.stdout.trim();
  rememberSecret(secret);
  nodes.push(...(await Promise.all([0, 1, 2].map(() => serveProcess(dataDir, { STRATA_CONTROL_URL: controlUrl })))));
  apis = nodes.map((node) => client(node.url, `Bearer ${secret}`));
}, 60_000);

afterAll(async () => {
  for (const node of nodes) node.child.kill('SIGKILL');
  await postgres?.destroy();
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  ms: number;
  code?: string;
  retryAfter: string | null;
  appended?: number;
}

test('PostgreSQL stopped and started again under load: 503 + Retry-After meanwhile, served again after, nothing lost', async () => {
  const api = apis[0] as Client;
  expect(
    (await api.post('/v1/databases', { name: 'shop', storage: { provider: 'local', bucket: 'shop' } })).status,
  ).toBe(201);
  expect((await api.post('/v1/databases/shop/storage/verify')).status).toBe(200);
  await eventually(
    async () => (await api.get<{ databases: { state: string }[] }>('/v1/databases')).json.databases[0]?.state,
    (state) => state === 'active',
  );
  expect(
    (await tablesOf(api, 'shop').create({ table_name: 'log', schema: [{ name: 'id', type: 'i64', nullable: false }] }))
      .status,
  ).toBe(200);

  // Three clients, one per node, append and read without pause for the whole test.
  let running = true;
  let nextId = 0;
  const answers: Answer[] = [];
  const load = apis.map(async (node) => {
    while (running) {
      const id = nextId++;
      const started = performance.now();
      const res =
        id % 2 === 0
          ? await tablesOf(node, 'shop').append('log', [{ id }])
          : await node.request('POST', '/v1/list_tables/shop');
      answers.push({
        status: res.status,
        ms: performance.now() - started,
        code: (res.json as { code?: string }).code,
        retryAfter: res.headers.get('retry-after'),
        appended: id % 2 === 0 && res.status === 200 ? id : undefined,
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });

  await new Promise((resolve) => setTimeout(resolve, 500));
  await postgres.stop();
  const stoppedAt = answers.length;
  const down = await eventually(
    () => Promise.all(nodes.map(async (node) => (await fetch(`${node.url}/readyz`)).status)),
    (statuses) => statuses.every((s) => s === 503),
    10_000,
  );
  expect(down).toEqual([503, 503, 503]);
  const readyz = await fetch(`${nodes[1]?.url}/readyz`);
  expect(readyz.headers.get('retry-after')).toBe('1');
  expect(((await readyz.json()) as { code: string }).code).toBe('control_store_unavailable');
  await new Promise((resolve) => setTimeout(resolve, 1500));

  await postgres.start();
  const up = await eventually(
    () => Promise.all(nodes.map(async (node) => (await fetch(`${node.url}/readyz`)).status)),
    (statuses) => statuses.every((s) => s === 200),
    15_000,
  );
  expect(up).toEqual([200, 200, 200]);
  // Each node serves reads and writes again.
  await eventually(
    () =>
      Promise.all(apis.map(async (node, i) => (await tablesOf(node, 'shop').append('log', [{ id: -1 - i }])).status)),
    (statuses) => statuses.every((s) => s === 200),
    10_000,
  );
  await new Promise((resolve) => setTimeout(resolve, 500));
  running = false;
  await Promise.all(load);

  const during = answers.slice(stoppedAt);
  expect(during.some((a) => a.status === 503)).toBe(true);
  for (const answer of answers) {
    expect([200, 503], JSON.stringify(answer)).toContain(answer.status);
    if (answer.status === 503) {
      expect(answer.code).toBe('control_store_unavailable');
      expect(answer.retryAfter).toBe('1');
    }
    expect(answer.ms, JSON.stringify(answer)).toBeLessThan(6000);
  }
  expect(answers.slice(-6).filter((a) => a.status === 200).length).toBeGreaterThan(0);

  // Every acknowledged append is there once; none refused is.
  const acknowledged = answers.flatMap((a) => (a.appended === undefined ? [] : [a.appended]));
  const rows = await api.request<{ data: { id: number }[] }>(
    'POST',
    '/v1/query_sql/shop',
    { query: 'SELECT id::INTEGER AS id FROM log WHERE id >= 0 ORDER BY id' },
    { accept: 'application/json' },
  );
  expect(rows.json.data.map((r) => r.id)).toEqual(acknowledged.sort((a, b) => a - b));
}, 90_000);
