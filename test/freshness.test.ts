import { Strata } from '@strata/client';
import { describe, expect, test } from 'vitest';
import { activeLocalDatabase, type Client, metricsOf, startStrata, upkeepPass } from './support/server.js';
import { type Row, tablesOf } from './support/tables.js';

/**
 * What a search says of the rows no index covers yet (docs/api.md, Freshness), `consistency: "eventual"`, the
 * unindexed-rows gauge, and backpressure on writes while indexes are behind. Upkeep passes run by hand (the
 * timer's never comes) unless a test says otherwise.
 */

const HAND_RUN = { STRATA_UPKEEP_INTERVAL_MS: '3600000', STRATA_ANN_MIN_ROWS: '1000000' };

const gauge = (metrics: string, name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(metrics)?.[1]);

async function notesTable(client: Client, database: string) {
  await activeLocalDatabase(client, database);
  const tables = tablesOf(client, database);
  await tables.create({
    table_name: 'notes',
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'body', type: 'utf8' },
      { name: 'emb', type: 'vector', dim: 4 },
    ],
    indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'l2' }] },
  });
  return tables;
}

const rows = (from: number, n: number, word: string) =>
  Array.from({ length: n }, (_, i) => ({ id: from + i, body: `${word} ${from + i}`, emb: [from + i, 1, 0, 0] }));

const receipt = (headers: Headers) => ({
  version: Number(headers.get('x-strata-table-version')),
  fresh: Number(headers.get('x-strata-fresh-rows')),
});

describe('the freshness receipt and consistency', () => {
  test('every search says the version it started from and the rows it read outside the indexes', async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 'f');
      const search = (body: Record<string, unknown>) =>
        client.request<{ data: Row[] }>(
          'POST',
          '/v1/hybrid_search/f',
          { table_name: 'notes', k: 100, projection: ['id'], ...body },
          { accept: 'application/json' },
        );
      const appended = await tables.append('notes', rows(0, 30, 'apple'));
      const written = Number(appended.headers.get('x-strata-table-version'));

      // No pass yet: the full-text index covers none of the 30 rows, and the vector column has no ANN index.
      const text = await search({ text_field: 'body', text_query: 'apple' });
      expect(text.json.data).toHaveLength(30);
      expect(receipt(text.headers)).toEqual({ version: written, fresh: 30 });
      const nearest = await search({ vector_field: 'emb', vector_query: [0, 1, 0, 0], k: 3 });
      expect(receipt(nearest.headers)).toEqual({ version: written, fresh: 30 });
      const counted = await client.request<{ count: number }>('POST', '/v1/count/f', {
        table_name: 'notes',
        field_name: 'body',
        query: 'apple',
      });
      expect(counted.json.count).toBe(30);
      expect(receipt(counted.headers)).toEqual({ version: written, fresh: 30 });
      const matched = await client.request(
        'POST',
        '/v1/token_match/f',
        { table_name: 'notes', field_name: 'body', query: 'apple' },
        { accept: 'application/json' },
      );
      expect(receipt(matched.headers)).toEqual({ version: written, fresh: 30 });

      // Folded: the text leg reads its index alone; the vector column is still scanned exactly, every row.
      await upkeepPass(server, 'f');
      const folded = await search({ text_field: 'body', text_query: 'apple' });
      expect(folded.json.data).toHaveLength(30);
      expect(receipt(folded.headers).fresh).toBe(0);
      expect(receipt(folded.headers).version).toBeGreaterThan(written);
      expect(receipt((await search({ vector_field: 'emb', vector_query: [0, 1, 0, 0] })).headers).fresh).toBe(30);

      // Five new rows: strong finds them; eventual reads only what the full-text index covers.
      const later = await tables.append('notes', rows(30, 5, 'apple banana'));
      const laterVersion = Number(later.headers.get('x-strata-table-version'));
      const strong = await search({ text_field: 'body', text_query: 'banana' });
      expect(strong.json.data.map((r) => r.id).sort()).toEqual([30, 31, 32, 33, 34]);
      expect(receipt(strong.headers)).toEqual({ version: laterVersion, fresh: 5 });
      const eventual = await search({ text_field: 'body', text_query: 'banana', consistency: 'eventual' });
      expect(eventual.json.data).toEqual([]);
      expect(receipt(eventual.headers)).toEqual({ version: laterVersion, fresh: 0 });
      const apples = await search({ text_field: 'body', text_query: 'apple', consistency: 'eventual' });
      expect(apples.json.data).toHaveLength(30);
      // A vector column without its ANN index is scanned exactly even under eventual: every row, the new included.
      const exact = await search({ vector_field: 'emb', vector_query: [34, 1, 0, 0], k: 1, consistency: 'eventual' });
      expect(exact.json.data).toEqual([{ id: 34, _score: expect.any(Number), _bm25: null, _distance: 0 }]);
      expect(receipt(exact.headers).fresh).toBe(35);

      const refused = await search({ text_field: 'body', text_query: 'apple', consistency: 'sometimes' });
      expect(refused.status).toBe(400);
      expect(JSON.stringify(refused.json)).toContain('consistency');
    } finally {
      await server.close();
    }
  });

  test('the OpenAPI document lists the receipt headers and the consistency field', async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as {
        paths: Record<string, { post: { requestBody: unknown; responses: Record<string, { headers?: object }> } }>;
      };
      for (const route of ['hybrid_search', 'count', 'token_match']) {
        const responses = doc.paths[`/v1/${route}/{database}`]?.post.responses;
        expect(Object.keys(responses?.['200']?.headers ?? {}).sort()).toEqual([
          'x-strata-fresh-rows',
          'x-strata-table-version',
        ]);
      }
      expect(JSON.stringify(doc.paths['/v1/hybrid_search/{database}']?.post.requestBody)).toContain('eventual');
    } finally {
      await server.close();
    }
  });
});

describe('strata_unindexed_rows', () => {
  test('follows this node’s writes and folds without waiting for a pass', async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 'g');
      await tables.append('notes', rows(0, 10, 'pear'));
      await upkeepPass(server, 'g'); // takes the table's lease and folds the ten rows
      expect(gauge(await metricsOf(server), 'strata_unindexed_rows')).toBe(0);
      await tables.append('notes', rows(10, 7, 'pear'));
      expect(gauge(await metricsOf(server), 'strata_unindexed_rows')).toBe(7);
      await tables.update('notes', 'id = 3', rows(3, 1, 'plum'));
      expect(gauge(await metricsOf(server), 'strata_unindexed_rows')).toBe(8);
      await tables.remove('notes', 'id = 12');
      expect(gauge(await metricsOf(server), 'strata_unindexed_rows')).toBe(8);
      await upkeepPass(server, 'g');
      expect(gauge(await metricsOf(server), 'strata_unindexed_rows')).toBe(0);
    } finally {
      await server.close();
    }
  });
});

describe('backpressure', () => {
  test('with upkeep paused, writes that add rows past the cap are 429 index_behind and write nothing; deletes go on', async () => {
    const server = await startStrata({ ...HAND_RUN, STRATA_UPKEEP_PAUSED: '1', STRATA_MAX_UNINDEXED_ROWS: '50' });
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 'p');
      expect((await tables.append('notes', rows(0, 60, 'fig'))).status).toBe(200);
      await upkeepPass(server, 'p'); // paused: commits nothing
      const metrics = await metricsOf(server);
      expect(metrics).not.toMatch(/^strata_upkeep_duration_seconds_count\{work="optimize"\}/m);

      const keyed = { 'idempotency-key': 'late-fig', accept: 'application/json' };
      const refused = await client.request<{ error: string; code: string }>(
        'POST',
        '/v1/append/p?table=notes',
        { data: rows(60, 1, 'fig') },
        keyed,
      );
      expect(refused.status).toBe(429);
      expect(refused.json.code).toBe('index_behind');
      expect(refused.json.error).toContain('table "notes" holds 60 rows its indexes do not cover yet');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      const update = await tables.update('notes', 'id = 1', rows(1, 1, 'fig'));
      expect(update.status).toBe(429);
      expect(await tables.count('notes')).toBe(60);

      expect((await tables.remove('notes', 'id >= 55')).status).toBe(200);
      expect(await tables.count('notes')).toBe(55);
      // The refused key was never taken: the same request is refused again, not answered as in flight.
      const again = await client.request<{ code: string }>(
        'POST',
        '/v1/append/p?table=notes',
        { data: rows(60, 1, 'fig') },
        keyed,
      );
      expect(again.json.code).toBe('index_behind');
    } finally {
      await server.close();
    }
  });

  test('a refused write starts upkeep at once, and the client waits and goes on: every row lands once', async () => {
    const server = await startStrata({ ...HAND_RUN, STRATA_MAX_UNINDEXED_ROWS: '1000' });
    try {
      const api = await server.as('acme');
      await notesTable(api, 'q');
      const statuses: number[] = [];
      const client = new Strata({
        url: server.url,
        apiKey: api.auth.authorization?.replace('Bearer ', '') ?? '',
        retry: { retries: 2, baseDelayMs: 10 },
        fetch: async (input, init) => {
          const res = await fetch(input, init);
          statuses.push(res.status);
          return res;
        },
      });
      const table = client.database('q').table('notes');
      const report = await table.append(rows(0, 3000, 'kiwi'), { maxRows: 600, concurrency: 1 });
      expect(report.rows).toBe(3000);
      expect(await table.count('body', 'kiwi')).toBe(3000);
      // No timer runs upkeep here: only writes that left the tail long, or were refused, started passes.
      expect(statuses.filter((s) => s === 204)).toHaveLength(5);
      expect(statuses.every((s) => s === 200 || s === 204 || s === 429)).toBe(true);
    } finally {
      await server.close();
    }
  });
});
