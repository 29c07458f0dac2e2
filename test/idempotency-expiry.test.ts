import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { rememberSecret } from './support/logs.js';
import { type Served, serveProcess } from './support/processes.js';
import { activeLocalDatabase, type Client, client } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * A key outlives its expiry while its write is unresolved. The server kills itself after committing each write,
 * before answering it (`STRATA_TEST_CRASH_AFTER_COMMIT_EVERY=1`); the retry comes after the key's TTL has passed.
 * Started afresh, it would append the row a second time.
 * Slow: about 6 s, `strata serve` processes killed and started again, and a wait past the key's TTL.
 */

const KEY = `sk_${'x'.repeat(43)}`;
const dataDir = mkdtempSync(join(tmpdir(), 'strata-idem-expiry-'));
const env = {
  STRATA_BOOTSTRAP_KEY: KEY,
  STRATA_TEST_CRASH_AFTER_COMMIT_EVERY: '1',
  STRATA_IDEMPOTENCY_TTL_MS: '1000',
  STRATA_IDEMPOTENCY_HOLD_MS: '100',
};
let node: Served | undefined;
afterAll(() => {
  node?.child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

async function start(crashing: boolean): Promise<Client> {
  node = await serveProcess(dataDir, crashing ? env : { ...env, STRATA_TEST_CRASH_AFTER_COMMIT_EVERY: '0' });
  return client(node.url, `Bearer ${KEY}`);
}

test('a write whose node died after its commit is found by a retry after its key expired, not applied again', async () => {
  rememberSecret(KEY);
  let api = await start(false);
  await activeLocalDatabase(api, 'db');
  const tables = tablesOf(api, 'db');
  expect(
    (await tables.create({ table_name: 't', schema: [{ name: 'id', type: 'i64', nullable: false }] })).status,
  ).toBe(200);
  node?.child.kill('SIGKILL');
  await node?.exited;

  api = await start(true);
  const send = () => api.raw('POST', '/v1/append/db?table=t', { data: [{ id: 1 }] }, { 'idempotency-key': 'expiring' });
  await expect(send()).rejects.toThrow();
  await node?.exited;
  // Past the key's TTL (1 s) and its hold (0.1 s).
  await new Promise((resolve) => setTimeout(resolve, 1500));

  api = await start(false);
  const retried = await send();

  expect([200, 204]).toContain(retried.status);
  expect(retried.headers.get('idempotent-replayed')).toBe('true');
  const counted = await api.request<{ data: { n: number }[] }>(
    'POST',
    '/v1/query_sql/db',
    { query: 'SELECT count(*)::INTEGER AS n FROM t' },
    { accept: 'application/json' },
  );
  expect(counted.json.data).toEqual([{ n: 1 }]);
}, 60_000);
