import { afterAll, beforeAll, expect, test } from 'vitest';
import { type Nodes, startNodes } from './support/nodes.js';
import { activeLocalDatabase, type Client } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * A primary key names one row however many nodes write at once (docs/api.md, Primary keys): the same keys sent
 * to three `strata serve` processes on one PostgreSQL and one data folder at the same moment, by append and by
 * upsert, leave one row per key. Without the nodes holding a table's keys while they write, two nodes each find a
 * key free and both append it. About 15 s.
 */

const ROUNDS = 15;
const KEYS = 8;

let install: Nodes | undefined;
let apis: Client[];
beforeAll(async () => {
  // No upkeep: a killed node's upkeep process would still be writing files while the test removes them.
  install = await startNodes(3, { STRATA_UPKEEP_INTERVAL_MS: '3600000' });
  apis = install.apis;
  const first = apis[0] as Client;
  await activeLocalDatabase(first, 'db');
  const created = await tablesOf(first, 'db').create({
    table_name: 't',
    schema: [
      { name: 'id', type: 'i64' },
      { name: 'node', type: 'i32' },
    ],
    primary_key: 'id',
  });
  expect(created.status).toBe(200);
}, 60_000);
afterAll(() => install?.stop());

/** Keys that more than one row holds, and the number of rows, by SQL through a node. */
async function rowsPerKey(api: Client): Promise<{ repeated: number[]; rows: number }> {
  const res = await api.request<{ data: { id: number; n: number }[] }>(
    'POST',
    '/v1/query_sql/db',
    { query: 'SELECT id::INTEGER AS id, count(*)::INTEGER AS n FROM t GROUP BY id ORDER BY id' },
    { accept: 'application/json' },
  );
  expect(res.status).toBe(200);
  return {
    repeated: res.json.data.filter((r) => r.n > 1).map((r) => r.id),
    rows: res.json.data.reduce((n, r) => n + r.n, 0),
  };
}

const rowsOf = (round: number, node: number) =>
  Array.from({ length: KEYS }, (_, i) => ({ id: round * KEYS + i, node }));

test('of appends of the same keys through three nodes at once, exactly one lands', async () => {
  for (let round = 0; round < ROUNDS; round++) {
    const sent = await Promise.all(apis.map((api, node) => tablesOf(api, 'db').append('t', rowsOf(round, node))));
    const statuses = sent.map((s) => s.status).sort();
    expect(statuses).toEqual([200, 409, 409]);
    for (const refused of sent.filter((s) => s.status === 409)) expect(refused.json.code).toBe('duplicate_key');
  }
  expect(await rowsPerKey(apis[1] as Client)).toEqual({ repeated: [], rows: ROUNDS * KEYS });
}, 60_000);

test('upserts and appends of the same new keys through three nodes at once leave one row per key', async () => {
  const base = ROUNDS * KEYS;
  for (let round = 0; round < ROUNDS; round++) {
    const rows = (node: number) => rowsOf(round, node).map((r) => ({ ...r, id: base + r.id }));
    const [appended, ...upserted] = await Promise.all([
      tablesOf(apis[0] as Client, 'db').append('t', rows(0)),
      ...apis.slice(1).map((api, i) => tablesOf(api, 'db').upsert('t', rows(i + 1))),
    ]);
    expect([200, 409]).toContain(appended?.status);
    for (const u of upserted) expect(u.status).toBe(200);
    // Every key was inserted by exactly one of the writes, whichever order they committed in.
    const inserted = upserted.reduce((n, u) => n + u.json.inserted, appended?.status === 200 ? KEYS : 0);
    expect(inserted).toBe(KEYS);
  }
  expect(await rowsPerKey(apis[2] as Client)).toEqual({ repeated: [], rows: 2 * ROUNDS * KEYS });
}, 60_000);
