import { afterEach, expect, test } from 'vitest';
import { type Nodes, startNodes } from './support/nodes.js';
import { type Client, eventually } from './support/server.js';
import { tablesOf, textTable } from './support/tables.js';

/**
 * Backpressure on several nodes: each node refuses writes by what the table's indexes miss at its latest version,
 * whichever node wrote the rows or folds them. Two `strata serve` processes on one PostgreSQL and one data folder
 * (about 20 s).
 */

let install: Nodes | undefined;
afterEach(async () => {
  await install?.stop();
  install = undefined;
});

const rows = (from: number, n: number) =>
  Array.from({ length: n }, (_, i) => ({ id: from + i, body: `row ${from + i}` }));

test('the cap holds whichever node the writes go through', async () => {
  install = await startNodes(2, { STRATA_UPKEEP_PAUSED: '1', STRATA_MAX_UNINDEXED_ROWS: '50' });
  const [first, second] = install.apis as [Client, Client];
  await textTable(first, 'db', 'notes');
  const statuses: number[] = [];
  for (let k = 0; k < 8; k++) {
    const through = tablesOf(k % 2 === 0 ? first : second, 'db');
    statuses.push((await through.append('notes', rows(k * 10, 10))).status);
  }
  // Five appends reach the cap of 50 unindexed rows; every one after is refused, on either node.
  expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
  expect(await tablesOf(second, 'db').count('notes')).toBe(50);
});

test('a node that neither wrote nor folded the rows takes writes again once another node folded them', async () => {
  install = await startNodes(2, { STRATA_UPKEEP_INTERVAL_MS: '200', STRATA_MAX_UNINDEXED_ROWS: '50' });
  const [first, second] = install.apis as [Client, Client];
  await textTable(first, 'db', 'notes');
  expect((await tablesOf(first, 'db').append('notes', rows(0, 60))).status).toBe(200);
  // Whichever node holds the table's upkeep lease folds the 60 rows; then both nodes take appends.
  let next = 100;
  for (const api of [second, first, second]) {
    const reply = await eventually(
      () => tablesOf(api, 'db').append('notes', rows(next, 1)),
      (r) => r.status === 200,
      20_000,
    );
    expect(reply.status).toBe(200);
    next++;
  }
  expect(await tablesOf(first, 'db').count('notes')).toBe(63);
});
