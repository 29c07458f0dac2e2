import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { activeLocalDatabase, type Client, startStrata, type TestServer, upkeepPass } from './support/server.js';
import { expectSameHits, tablesOf } from './support/tables.js';

/**
 * Phrases in text queries (docs/api.md, Phrases): `"red kettle"` matches the words in that order, on an index
 * declared with positions; the same rows and `_bm25` with the rows outside the index as once upkeep folded them.
 */

let server: TestServer;
let api: Client;

const ROWS = [
  'red kettle for tea',
  'a kettle that is red',
  'red red kettle kettle',
  'blue kettle',
  'the red kettles',
  'red kettle and a red kettle again',
  'password for managers',
  'password managers',
  'tea cups',
  // A word of 255 bytes or more is dropped but keeps its place: no phrase matches across it.
  `ruby ${'x'.repeat(300)} teapot`,
  'ruby teapot',
];

beforeAll(async () => {
  server = await startStrata({ STRATA_UPKEEP_INTERVAL_MS: '3600000' });
  api = await server.as('acme');
  await activeLocalDatabase(api, 'ph');
  const tables = tablesOf(api, 'ph');
  const created = await tables.create({
    table_name: 'items',
    schema: [
      { name: 'id', type: 'i32' },
      { name: 'body', type: 'utf8' },
      { name: 'stemmed', type: 'utf8' },
      { name: 'plain', type: 'utf8' },
    ],
    indexes: {
      fts: [{ column: 'body', positions: true }, { column: 'stemmed', analyzer: 'english', positions: true }, 'plain'],
    },
  });
  expect(created.status).toBe(200);
  expect(created.json).toMatchObject({
    indexes: { fts: [{ column: 'body', analyzer: 'ascii_lower', positions: true }, {}, { column: 'plain' }] },
  });
  expect((created.json as { indexes: { fts: object[] } }).indexes.fts[2]).toEqual({
    column: 'plain',
    analyzer: 'ascii_lower',
  });
  // And a row without texts: it holds no tokens under any analyzer.
  const rows = [...ROWS, null].map((text, id) => ({ id, body: text, stemmed: text, plain: text }));
  expect((await tables.append('items', rows)).status).toBe(200);
});
afterAll(() => server.close());

interface Hit {
  id: number;
  _bm25: number;
}
const search = (body: Record<string, unknown>) =>
  api.request<{ data: Hit[]; error?: string }>(
    'POST',
    '/v1/hybrid_search/ph',
    { table_name: 'items', text_field: 'body', k: 20, projection: ['id'], ...body },
    { accept: 'application/json' },
  );
const ids = async (body: Record<string, unknown>) => (await search(body)).json.data.map((r) => r.id).sort();

const QUERIES: Record<string, unknown>[] = [
  { text_query: '"red kettle"' },
  { text_query: '"red kettle" tea' },
  { text_query: '"red kettle" tea', operator: 'and' },
  { text_query: 'blue "kettle that"' },
  { text_query: '"password manager"', text_field: 'stemmed' },
  { text_query: '"password for manager"', text_field: 'stemmed' },
  { text_query: '"ruby teapot" ruby' },
];

describe('phrases', () => {
  test('match their words in order, alone or beside other words, under or and and', async () => {
    expect(await ids({ text_query: '"red kettle"' })).toEqual([0, 2, 5]);
    expect(await ids({ text_query: '"red kettle" tea' })).toEqual([0, 2, 5, 8]);
    expect(await ids({ text_query: '"red kettle" tea', operator: 'and' })).toEqual([0]);
    expect(await ids({ text_query: 'blue "kettle that"' })).toEqual([1, 3]);
    expect(await ids({ text_query: '"ruby teapot"' })).toEqual([10]);
    // A stop word the analyzer drops still stands between the words it separated.
    expect(await ids({ text_query: '"password managers"', text_field: 'stemmed' })).toEqual([7]);
    expect(await ids({ text_query: '"password for manager"', text_field: 'stemmed' })).toEqual([6]);
    // Stemmed: "kettles" is "kettle".
    expect(await ids({ text_query: '"red kettles"', text_field: 'stemmed' })).toEqual([0, 2, 4, 5]);
    // Words or a phrase the analyzer drops whole (stop words) leave the query as if they were not there.
    const stemmed = { text_field: 'stemmed', operator: 'and' };
    expect(await ids({ ...stemmed, text_query: '"red kettle" the' })).toEqual([0, 2, 4, 5]);
    expect(await ids({ ...stemmed, text_query: '"of the" tea' })).toEqual(await ids({ ...stemmed, text_query: 'tea' }));
    expect(await ids({ ...stemmed, text_query: '"of the"' })).toEqual([]);
    const counted = await api.request<{ count: number }>('POST', '/v1/count/ph', {
      table_name: 'items',
      field_name: 'stemmed',
      query: '"red kettle" the',
      operator: 'and',
    });
    expect(counted.json.count).toBe(4);
  });

  test('score the same before and after upkeep folds the rows, and count and token_match take them', async () => {
    const before = await Promise.all(QUERIES.map((q) => search(q)));
    const counted = await api.request<{ count: number }>('POST', '/v1/count/ph', {
      table_name: 'items',
      field_name: 'body',
      query: '"red kettle"',
    });
    expect(counted.json.count).toBe(3);
    await upkeepPass(server, 'ph');
    const after = await Promise.all(QUERIES.map((q) => search(q)));
    expectSameHits(
      after.map((r) => r.json.data),
      before.map((r) => r.json.data),
      QUERIES,
    );
    const listed = await api.request<{ data: { id: number }[] }>(
      'POST',
      '/v1/token_match/ph',
      { table_name: 'items', field_name: 'body', query: '"red kettle"', projection: ['id'] },
      { accept: 'application/json' },
    );
    expect(listed.json.data.map((r) => r.id)).toEqual([0, 2, 5]);
  });

  test('a phrase on a column whose index keeps no positions, and an unclosed quote, are 400', async () => {
    const plain = await search({ text_query: 'tea "red kettle"', text_field: 'plain' });
    expect(plain.status).toBe(400);
    expect(plain.json.error).toMatch(
      /text_query holds a phrase \("red kettle"\), but the full-text index of column "plain" keeps no positions: declare it with "positions": true/,
    );
    const open = await search({ text_query: '"red kettle' });
    expect(open.status).toBe(400);
    expect(open.json.error).toMatch(/text_query has an unclosed double quote/);
    const count = await api.request<{ error: string }>('POST', '/v1/count/ph', {
      table_name: 'items',
      field_name: 'plain',
      query: '"red kettle"',
    });
    expect(count.status).toBe(400);
    expect(count.json.error).toMatch(/query holds a phrase/);
  });
});
