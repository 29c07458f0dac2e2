import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Strata } from '@strata/client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CLI } from './support/processes.js';
import { activeLocalDatabase, type Client, startStrata, type TestServer, upkeepPass } from './support/server.js';
import { expectSameHits, tablesOf } from './support/tables.js';

/**
 * Prefixes and typos (docs/api.md): `prefix: true` widens the query's last word to every term it begins,
 * `fuzziness` each word to the terms within that many edits, over the terms of the live rows: rows outside the
 * index are found by terms the index has never seen, and score the same before and after upkeep folds them.
 */

let server: TestServer;
let api: Client;

const INDEXED = ['red kettle', 'kettles for tea', 'kettle', 'blue cup', 'kettel typo', 'settle down', 'teapot'];
const FRESH = ['kettlez only here', 'a red teapot'];

beforeAll(async () => {
  server = await startStrata({ STRATA_UPKEEP_INTERVAL_MS: '3600000' });
  api = await server.as('acme');
  await activeLocalDatabase(api, 'wd');
  const tables = tablesOf(api, 'wd');
  expect(
    (
      await tables.create({
        table_name: 'items',
        schema: [
          { name: 'id', type: 'i32' },
          { name: 'body', type: 'utf8' },
        ],
        indexes: { fts: ['body'] },
      })
    ).status,
  ).toBe(200);
  await tables.append(
    'items',
    INDEXED.map((body, id) => ({ id, body })),
  );
  await upkeepPass(server, 'wd');
  // Outside the index: "kettlez" is a term only these rows hold.
  await tables.append(
    'items',
    FRESH.map((body, i) => ({ id: 100 + i, body })),
  );
});
afterAll(() => server.close());

interface Hit {
  id: number;
  _bm25: number;
}
const search = (body: Record<string, unknown>) =>
  api.request<{ data: Hit[]; error?: string }>(
    'POST',
    '/v1/hybrid_search/wd',
    { table_name: 'items', text_field: 'body', k: 20, projection: ['id'], ...body },
    { accept: 'application/json' },
  );
const ids = async (body: Record<string, unknown>) =>
  (await search(body)).json.data.map((r) => r.id).sort((a, b) => a - b);

const QUERIES: Record<string, unknown>[] = [
  { text_query: 'kettle', fuzziness: 1 },
  { text_query: 'kettle', fuzziness: 2 },
  { text_query: 'ket', prefix: true },
  { text_query: 'red ket', prefix: true, operator: 'and' },
  { text_query: 'red tea', prefix: true },
  { text_query: 'kettel tea', fuzziness: 1, operator: 'and' },
];

describe('prefix and fuzziness', () => {
  test('widen the words to the terms of the live rows, those outside the index included', async () => {
    // kettle, kettles, settle and kettlez are within one edit of "kettle"; kettel is two (no transpositions).
    expect(await ids({ text_query: 'kettle', fuzziness: 1 })).toEqual([0, 1, 2, 5, 100]);
    expect(await ids({ text_query: 'kettle', fuzziness: 2 })).toEqual([0, 1, 2, 4, 5, 100]);
    expect(await ids({ text_query: 'kettle' })).toEqual([0, 2]);
    expect(await ids({ text_query: 'ket', prefix: true })).toEqual([0, 1, 2, 4, 100]);
    // Only the last word is a prefix; under and, every word must match.
    expect(await ids({ text_query: 'red ket', prefix: true, operator: 'and' })).toEqual([0]);
    expect(await ids({ text_query: 'red tea', prefix: true })).toEqual([0, 1, 6, 101]);
    expect(await ids({ text_query: 'zzz', fuzziness: 1 })).toEqual([]);
    expect(await ids({ text_query: 'kettle zzz', fuzziness: 1, operator: 'and' })).toEqual([]);
  });

  test('score the same before and after upkeep folds the rows; count and token_match take them', async () => {
    const before = await Promise.all(QUERIES.map((q) => search(q)));
    const counted = await api.request<{ count: number }>('POST', '/v1/count/wd', {
      table_name: 'items',
      field_name: 'body',
      query: 'ket',
      prefix: true,
    });
    expect(counted.json.count).toBe(5);
    await upkeepPass(server, 'wd');
    const after = await Promise.all(QUERIES.map((q) => search(q)));
    expectSameHits(
      after.map((r) => r.json.data),
      before.map((r) => r.json.data),
      QUERIES,
    );
    const listed = await api.request<{ data: { id: number }[] }>(
      'POST',
      '/v1/token_match/wd',
      { table_name: 'items', field_name: 'body', query: 'kettle', fuzziness: 1, projection: ['id'] },
      { accept: 'application/json' },
    );
    expect(listed.json.data.map((r) => r.id)).toEqual([0, 1, 2, 5, 100]);
  });

  test('fuzziness above 2, or over more than 16 words, is 400', async () => {
    const res = await search({ text_query: 'kettle', fuzziness: 3 });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/fuzziness/);
    const long = await search({ text_query: Array.from({ length: 17 }, (_, i) => `w${i}`).join(' '), fuzziness: 1 });
    expect(long.status).toBe(400);
    expect(long.json.error).toMatch(/fuzziness applies to at most 16 words of a query; this one holds 17/);
  });

  test('the client and the CLI ask for them', async () => {
    const apiKey = (api.auth.authorization ?? '').replace(/^Bearer /, '');
    const items = new Strata({ url: server.url, apiKey }).database('wd').table('items');
    const found = (await items.search(
      { text: 'kettle', textField: 'body', fuzziness: 1, k: 20, projection: ['id'] },
      { rows: true },
    )) as { id: number }[];
    expect(found.map((r) => r.id).sort((a, b) => a - b)).toEqual([0, 1, 2, 5, 100]);
    expect(await items.tokenMatch({ field: 'body', query: 'ket', prefix: true }, { rows: true })).toHaveLength(5);
    const run = promisify(execFile);
    const args = ['search', '--url', server.url, '--database', 'wd', '--table', 'items', '--text', 'ket'];
    const { stdout } = await run(
      process.execPath,
      [CLI, ...args, '--text-field', 'body', '--prefix', '--format', 'json'],
      { env: { ...process.env, STRATA_API_KEY: apiKey } },
    );
    expect(stdout.trim().split('\n')).toHaveLength(5);
  });
});
