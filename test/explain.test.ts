import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Strata } from '@strata/client';
import { tableFromIPC } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CLI } from './support/processes.js';
import { activeLocalDatabase, type Client, startStrata, type TestServer, upkeepPass } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * `explain: true` on hybrid_search (docs/api.md, Explain): per row its rank, raw measure, fused share and where each
 * leg found it; per request what each leg read. Upkeep passes run by hand; ANN indexes from 256 rows.
 */

let server: TestServer;
let api: Client;
beforeAll(async () => {
  server = await startStrata({ STRATA_UPKEEP_INTERVAL_MS: '3600000', STRATA_ANN_MIN_ROWS: '256' });
  api = await server.as('acme');
  await activeLocalDatabase(api, 'ex');
  const tables = tablesOf(api, 'ex');
  await tables.create({
    table_name: 'docs',
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'body', type: 'utf8' },
      { name: 'emb', type: 'vector', dim: 2 },
    ],
    indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'l2' }] },
  });
  const rows = Array.from({ length: 300 }, (_, id) => ({
    id,
    body: `${['red', 'blue', 'green'][id % 3]} kettle ${id % 7 === 0 ? 'steel' : 'glass'}`,
    emb: [Math.cos(id), Math.sin(id)],
  }));
  await tables.append('docs', rows);
  await upkeepPass(server, 'ex'); // builds the ANN index and folds every row in
});
afterAll(() => server.close());

interface LegExplain {
  rank: number | null;
  score?: number | null;
  distance?: number | null;
  contribution: number;
  found: string | null;
}
interface Explained {
  id: number;
  _score: number;
  _bm25: number | null;
  _distance: number | null;
  _explain: { text: LegExplain | null; vector: LegExplain | null };
}
interface Reply {
  data: Explained[];
  explain: {
    version: number;
    rrf_k: number;
    legs: Record<string, { read: string; ms: number; candidates: number; outside_index: number; weight: number }>;
  };
}

const search = (body: Record<string, unknown>, accept = 'application/json') =>
  api.request<Reply>(
    'POST',
    '/v1/hybrid_search/ex',
    { table_name: 'docs', projection: ['id'], k: 10, explain: true, ...body },
    { accept },
  );

describe('explain', () => {
  test('each row says its rank, measure, share and where each leg found it; the shares add up to _score', async () => {
    const reply = await search({
      text_field: 'body',
      text_query: 'red steel',
      vector_field: 'emb',
      vector_query: [1, 0],
    });
    expect(reply.status).toBe(200);
    const { data, explain } = reply.json;
    expect(data.length).toBe(10);
    for (const row of data) {
      const { text, vector } = row._explain;
      expect(text?.score ?? null).toBe(row._bm25);
      expect(vector?.distance ?? null).toBe(row._distance);
      expect((text?.contribution ?? 0) + (vector?.contribution ?? 0)).toBeCloseTo(row._score, 12);
      for (const leg of [text, vector]) {
        if (leg?.rank === null) expect(leg).toMatchObject({ contribution: 0, found: null });
        else expect(leg?.found).toBe('index');
      }
      if (text?.rank !== null) expect(text?.contribution).toBeCloseTo(1 / (60 + (text?.rank as number)), 12);
    }
    expect(explain.version).toBe(Number(reply.headers.get('x-strata-table-version')));
    expect(explain.rrf_k).toBe(60);
    for (const leg of ['text', 'vector']) {
      expect(explain.legs[leg]).toMatchObject({ read: 'index', outside_index: 0, weight: 1 });
      expect(explain.legs[leg]?.candidates).toBeGreaterThanOrEqual(10);
      expect(explain.legs[leg]?.ms).toBeGreaterThanOrEqual(0);
    }
  });

  test('rows written since the fold are found among the fresh rows beside the index', async () => {
    expect(
      (await tablesOf(api, 'ex').append('docs', [{ id: 1000, body: 'red red red steel', emb: [3, 3] }])).status,
    ).toBe(200);
    const reply = await search({
      text_field: 'body',
      text_query: 'red steel',
      vector_field: 'emb',
      vector_query: [3, 3],
    });
    const fresh = reply.json.data.find((row) => row.id === 1000);
    expect(fresh?._explain.text).toMatchObject({ rank: 1, found: 'fresh' });
    expect(fresh?._explain.vector).toMatchObject({ rank: 1, found: 'fresh' });
    expect(reply.json.explain.legs.text).toMatchObject({ read: 'index_and_fresh', outside_index: 1 });
    expect(reply.json.explain.legs.vector).toMatchObject({ read: 'index_and_fresh', outside_index: 1 });
    // A text leg with a boost reads each column on its own; with a filter (which only Lance evaluates) none beside
    // the fresh rows.
    const boosted = { text_fields: [{ field: 'body', boost: 2 }], text_query: 'red steel' };
    expect((await search(boosted)).json.explain.legs.text).toMatchObject({ read: 'index_and_fresh' });
    const filtered = await search({ ...boosted, filter: 'id >= 0' });
    expect(filtered.json.explain.legs.text).toMatchObject({ read: 'index_and_scan', outside_index: 1 });
    await upkeepPass(server, 'ex');
  });

  test('a leg that did not run is null; without explain there is no _explain', async () => {
    const textOnly = await search({ text_field: 'body', text_query: 'glass' });
    expect(textOnly.json.data[0]?._explain.vector).toBeNull();
    expect(textOnly.json.explain.legs.vector).toBeUndefined();
    const plain = await search({ text_field: 'body', text_query: 'glass', explain: false });
    expect(plain.json.data[0]).not.toHaveProperty('_explain');
    expect(plain.json).not.toHaveProperty('explain');
  });

  test('in Arrow: an _explain struct column and the request explain in the schema metadata', async () => {
    const reply = await api.raw(
      'POST',
      '/v1/hybrid_search/ex',
      { table_name: 'docs', projection: ['id'], k: 5, explain: true, vector_field: 'emb', vector_query: [0, 1] },
      { accept: 'application/vnd.apache.arrow.stream' },
    );
    const table = tableFromIPC(new Uint8Array(await reply.arrayBuffer()));
    expect(table.schema.fields.map((f) => f.name)).toEqual(['id', '_score', '_bm25', '_distance', '_explain']);
    const first = table.get(0)?.toJSON() as { _explain: { vector: { rank: number; found: string } } };
    expect(first._explain.vector.rank).toBe(1);
    expect(first._explain.vector.found).toBe('index');
    const explain = JSON.parse(table.schema.metadata.get('strata.explain') ?? '{}') as Reply['explain'];
    expect(explain.legs.vector?.read).toBe('index');
  });

  test('explain that is not a boolean is 400', async () => {
    const reply = await search({ text_field: 'body', text_query: 'glass', explain: 'yes' });
    expect(reply.status).toBe(400);
    expect((reply.json as unknown as { error: string }).error).toContain('explain');
  });

  test('the client answers the request explain beside the rows; the CLI prints it on stderr', async () => {
    const apiKey = (api.auth.authorization ?? '').replace(/^Bearer /, '');
    const docs = new Strata({ url: server.url, apiKey }).database('ex').table('docs');
    const request = { text: 'glass', textField: 'body', k: 3, explain: true, projection: ['id'] };
    const json = await docs.searchWithReceipt(request, { rows: true });
    expect(json.explain?.legs.text?.read).toBe('index');
    expect((json.rows as unknown as Explained[])[0]?._explain.text?.rank).toBe(1);
    const arrow = await docs.searchWithReceipt(request);
    expect(arrow.explain).toEqual({
      ...json.explain,
      legs: { text: { ...json.explain?.legs.text, ms: expect.any(Number) } },
    });

    const run = promisify(execFile);
    const args = ['search', '--url', server.url, '--database', 'ex', '--table', 'docs'];
    const { stdout, stderr } = await run(
      process.execPath,
      [CLI, ...args, '--text', 'glass', '--text-field', 'body', '-k', '2', '--explain', '--format', 'json'],
      { env: { ...process.env, STRATA_API_KEY: apiKey } },
    );
    const rows = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Explained);
    expect(rows[0]?._explain.text?.rank).toBe(1);
    expect(stderr).toMatch(/^explain: \{"version":\d+,"rrf_k":60,"legs":\{"text":\{"read":"index"/);
  });
});
