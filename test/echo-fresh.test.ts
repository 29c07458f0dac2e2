import { afterAll, beforeAll, expect, test } from 'vitest';
import { activeLocalDatabase, type Client, startStrata, type TestServer } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * A write answered with its rows as JSON, large enough to be encoded on the JSON thread, leaves those rows
 * readable: the fresh rows beside the indexes hold them. The thread was once handed the body's memory itself,
 * and every later search reading those rows failed with 500. The body is over the size parsed inline (256 KiB).
 */

let server: TestServer;
let api: Client;
beforeAll(async () => {
  server = await startStrata({ STRATA_UPKEEP_INTERVAL_MS: '3600000' });
  api = await server.as('acme');
  await activeLocalDatabase(api, 'echo');
});
afterAll(() => server.close());

test('rows echoed as JSON by their append are found and read by a search after it', async () => {
  const tables = tablesOf(api, 'echo');
  await tables.create({
    table_name: 't',
    schema: [
      { name: 'id', type: 'i32' },
      { name: 'body', type: 'utf8' },
    ],
    indexes: { fts: ['body'] },
  });
  const rows = Array.from({ length: 6000 }, (_, id) => ({
    id,
    body: `row ${id} ${id % 7 === 0 ? 'kettle' : 'cup'} ${'padding words so that the body passes the size parsed inline '.repeat(2)}`.trim(),
  }));
  const appended = await tables.append('t', rows);
  expect(appended.status).toBe(200);
  expect(appended.json.data).toHaveLength(6000);
  const found = await api.request<{ data: { id: number; body: string }[] }>(
    'POST',
    '/v1/hybrid_search/echo',
    { table_name: 't', text_query: 'kettle', text_field: 'body', k: 5 },
    { accept: 'application/json' },
  );
  expect(found.status).toBe(200);
  expect(found.json.data).toHaveLength(5);
  for (const row of found.json.data) expect(row.body).toMatch(new RegExp(`^row ${row.id} kettle `));
});
