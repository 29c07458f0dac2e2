import { afterAll, expect, test } from 'vitest';
import { type Nodes, startNodes } from './support/nodes.js';
import { activeLocalDatabase, type Client } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * Read-your-writes for SQL on every node while upkeep runs: batches loaded through one node, counted by SQL on
 * every node after each acknowledged batch. The node holding the table's upkeep lease once took another node's
 * append, committed amid its upkeep's versions, for a version that changed no row, and counted without it (about
 * once in 180 reads). Three `strata serve` processes on one PostgreSQL and one data folder, upkeep every 100 ms
 * (about 40 s).
 */

const BATCHES = 60;
const ROWS = 300;

let install: Nodes | undefined;
afterAll(() => install?.stop());

const count = async (api: Client): Promise<number> => {
  const res = await api.request<{ data: { n: number }[] }>(
    'POST',
    '/v1/query_sql/db',
    { query: 'SELECT count(*)::INTEGER AS n FROM t' },
    { accept: 'application/json' },
  );
  expect(res.status).toBe(200);
  return res.json.data[0]?.n ?? -1;
};

test('SQL counts every acknowledged batch on every node, the upkeep node included', async () => {
  install = await startNodes(3, { STRATA_UPKEEP_INTERVAL_MS: '100', STRATA_UPKEEP_LEASE_MS: '1500' });
  const { apis } = install;
  const [loader] = apis as [Client];
  await activeLocalDatabase(loader, 'db');
  const created = await tablesOf(loader, 'db').create({
    table_name: 't',
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'body', type: 'utf8' },
    ],
    indexes: { fts: ['body'] },
  });
  expect(created.status).toBe(200);
  // Every node opens the table (and reads it through SQL), so any of them may take its upkeep lease.
  for (const api of apis) expect(await count(api)).toBe(0);

  const stale: string[] = [];
  for (let batch = 0; batch < BATCHES; batch++) {
    const rows = Array.from({ length: ROWS }, (_, i) => ({ id: batch * ROWS + i, body: `row ${i} of batch ${batch}` }));
    expect((await tablesOf(loader, 'db').append('t', rows)).status).toBe(200);
    const expected = (batch + 1) * ROWS;
    const counts = await Promise.all(apis.map(count));
    counts.forEach((n, node) => {
      if (n !== expected) stale.push(`batch ${batch}: node ${node} counted ${n}, not ${expected}`);
    });
  }

  expect(stale).toEqual([]);
}, 120_000);
