import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { activeLocalDatabase, type Client, startStrata, type TestServer, upkeepPass } from './support/server.js';
import { tablesOf } from './support/tables.js';

/** hybrid_search with a filter and neither leg (docs/api.md): the matching rows in row order, paged, unscored. */

let server: TestServer;
let api: Client;
beforeAll(async () => {
  server = await startStrata({ STRATA_UPKEEP_INTERVAL_MS: '3600000' });
  api = await server.as('acme');
  await activeLocalDatabase(api, 'fo');
  const tables = tablesOf(api, 'fo');
  await tables.create({
    table_name: 'items',
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'tag', type: 'utf8' },
      { name: 'body', type: 'utf8' },
    ],
    indexes: { fts: ['body'], scalar: ['tag'] },
  });
  const row = (id: number) => ({ id, tag: `t${id % 4}`, body: `item ${id}` });
  await tables.append(
    'items',
    Array.from({ length: 60 }, (_, id) => row(id)),
  );
  await upkeepPass(server, 'fo');
  // A tail upkeep has not folded: the filter reads it too.
  await tables.append(
    'items',
    Array.from({ length: 20 }, (_, i) => row(60 + i)),
  );
});
afterAll(() => server.close());

interface Hit {
  id: number;
  _score: number | null;
  _bm25: number | null;
  _distance: number | null;
}
const search = (body: Record<string, unknown>) =>
  api.request<{ data: Hit[]; error?: string; explain?: { legs: object } }>(
    'POST',
    '/v1/hybrid_search/fo',
    { table_name: 'items', projection: ['id'], ...body },
    { accept: 'application/json' },
  );

describe('a search with only a filter', () => {
  test('answers the matching rows in row order, unscored, and pages through them without overlap', async () => {
    const all = Array.from({ length: 80 }, (_, id) => id).filter((id) => id % 4 === 1);
    const first = await search({ filter: "tag = 't1'", k: 7 });
    expect(first.status).toBe(200);
    expect(first.json.data.map((r) => r.id)).toEqual(all.slice(0, 7));
    expect(first.json.data[0]).toEqual({ id: 1, _score: null, _bm25: null, _distance: null });
    const pages: number[] = [];
    for (let offset = 0; offset < all.length; offset += 6) {
      pages.push(...(await search({ filter: "tag = 't1'", k: 6, offset })).json.data.map((r) => r.id));
    }
    expect(pages).toEqual(all);
    expect(Number(first.headers.get('x-strata-fresh-rows'))).toBe(0);
    expect((await search({ filter: 'id > 1000', k: 5 })).json.data).toEqual([]);
  });

  test('explains itself with no legs; k = 0 answers no row', async () => {
    const explained = await search({ filter: 'id < 3', k: 2, explain: true });
    expect(explained.json.explain?.legs).toEqual({});
    expect((await search({ filter: 'id < 3', k: 0 })).json.data).toEqual([]);
  });

  test('a filter that is not a predicate is 400; with neither legs nor filter there is nothing to search', async () => {
    const bad = await search({ filter: 'nope = 1', k: 3 });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toContain('filter');
    const none = await search({ k: 3 });
    expect(none.status).toBe(400);
    expect(none.json.error).toMatch(/nothing to search/);
    // A text query without a token is still a text leg, and not a filter-only search.
    expect((await search({ text_field: 'body', text_query: '!!', filter: 'id < 3', k: 3 })).status).toBe(400);
  });
});
