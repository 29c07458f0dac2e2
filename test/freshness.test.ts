import { rmSync } from 'node:fs';
import { Strata } from '@strata/client';
import { describe, expect, test } from 'vitest';
import type { TableHandle } from '../src/engine/tables/tables.js';
import { LiveTexts, referenceBm25 } from './support/bm25.js';
import {
  activeLocalDatabase,
  type Client,
  eventually,
  metricsOf,
  onTableHandle,
  passEnded,
  startStrata,
  type TestServer,
  upkeepPass,
} from './support/server.js';
import { type Row, tablesOf, textTable } from './support/tables.js';

/**
 * What a search says of the rows no index covers yet (docs/api.md, Freshness), `consistency: "eventual"`, the
 * unindexed-rows gauge, and backpressure on writes while indexes are behind. Upkeep passes run by hand (the
 * timer's never comes) unless a test says otherwise.
 */

const HAND_RUN = { STRATA_UPKEEP_INTERVAL_MS: '3600000', STRATA_ANN_MIN_ROWS: '1000000' };

const gauge = (metrics: string, name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(metrics)?.[1]);

/** The text leg's rank and score of each row a hybrid search over `notes` (both legs, with `explain`) answered. */
async function textLegOf(client: Client, database: string, query: string, k: number) {
  const reply = await client.request<{
    data: { id: number; _explain: { text: { rank: number | null; score: number | null } | null } }[];
  }>(
    'POST',
    `/v1/hybrid_search/${database}`,
    {
      table_name: 'notes',
      text_field: 'body',
      text_query: query,
      vector_field: 'emb',
      vector_query: [0, 0, 0, 1],
      k,
      projection: ['id'],
      explain: true,
    },
    { accept: 'application/json' },
  );
  expect(reply.status).toBe(200);
  return reply.json.data.filter((row) => row._explain.text?.rank != null);
}

/** Each row's text rank and score are those BM25 over the `live` rows gives it. */
function expectLiveRanking(
  rows: { id: number; _explain: { text: { rank: number | null; score: number | null } | null } }[],
  live: ReadonlyMap<number, string>,
  query: string,
): void {
  const ranked = [...referenceBm25(live, query, false)].sort((x, y) => y[1] - x[1] || x[0] - y[0]);
  const rankOf = new Map(ranked.map(([id, score], i) => [id, { rank: i + 1, score }]));
  expect(rows.length).toBeGreaterThan(5);
  for (const row of rows) {
    const want = rankOf.get(row.id);
    expect([row.id, row._explain.text?.rank]).toEqual([row.id, want?.rank]);
    expect(Math.abs((row._explain.text?.score ?? 0) - (want?.score ?? 0)) / (want?.score ?? 1)).toBeLessThan(1e-6);
  }
}

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

describe('upkeep while writes go on', () => {
  test('leaves the rows this node holds beside the indexes until writes pause, or the tail is large or old', async () => {
    const server = await startStrata({
      ...HAND_RUN,
      STRATA_UPKEEP_HELD_TAIL_ROWS: '20',
      STRATA_UPKEEP_HELD_TAIL_MS: '1500',
    });
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 'held');
      const unindexed = async (heldTails: 'wait' | 'fold' = 'wait') =>
        gauge(await upkeepPass(server, 'held', heldTails), 'strata_unindexed_rows');
      const search = (query: string) =>
        client.request<{ data: Row[] }>(
          'POST',
          '/v1/hybrid_search/held',
          { table_name: 'notes', text_field: 'body', text_query: query, k: 100, projection: ['id'] },
          { accept: 'application/json' },
        );
      await tables.append('notes', rows(0, 30, 'apple'));
      expect(await unindexed('fold')).toBe(0);

      // Written since the previous pass: held, and found beside the index.
      await tables.append('notes', rows(30, 5, 'banana'));
      expect(await unindexed()).toBe(5);
      const found = await search('banana');
      expect(found.json.data).toHaveLength(5);
      expect(receipt(found.headers).fresh).toBe(5);
      // No write since: folded.
      expect(await unindexed()).toBe(0);

      // A tail of 20 rows or more is folded at once.
      await tables.append('notes', rows(35, 10, 'cherry'));
      expect(await unindexed()).toBe(10);
      await tables.append('notes', rows(45, 10, 'cherry'));
      expect(await unindexed()).toBe(0);

      // So is one older than 1.5 s, writes or not.
      await tables.append('notes', rows(55, 3, 'damson'));
      expect(await unindexed()).toBe(3);
      await new Promise((resolve) => setTimeout(resolve, 1600));
      await tables.append('notes', rows(58, 3, 'damson'));
      expect(await unindexed()).toBe(0);

      // A delete or replace is folded at once; an explicit pass folds whatever is held.
      await tables.append('notes', rows(61, 3, 'elder'));
      expect(await unindexed()).toBe(3);
      expect((await tables.remove('notes', 'id = 61')).status).toBe(200);
      expect(await unindexed()).toBe(0);
      await tables.append('notes', rows(64, 3, 'fig'));
      expect(await unindexed('fold')).toBe(0);
      expect((await search('banana cherry damson elder fig')).json.data).toHaveLength(5 + 20 + 6 + 2 + 3);
    } finally {
      await server.close();
    }
  });
});

describe('tokenizing a commit', () => {
  test('the texts a write adds are tokenized once, for the fresh rows and the BM25 statistics alike', async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 'tok');
      const search = async (query: string) =>
        (
          await client.request<{ data: Row[] }>(
            'POST',
            '/v1/hybrid_search/tok',
            { table_name: 'notes', text_field: 'body', text_query: query, k: 100, projection: ['id'] },
            { accept: 'application/json' },
          )
        ).json.data;
      await tables.append('notes', rows(0, 30, 'apple'));
      await upkeepPass(server, 'tok');
      await tables.append('notes', rows(30, 5, 'apple'));
      // A tail: the text leg scores its candidates with the statistics, which are kept from now on.
      expect(await search('apple')).toHaveLength(35);
      const lists: (readonly (string | null)[])[] = [];
      await onTableHandle(server, 'tok', 'notes', async (handle) => {
        expect(handle.fresh.usable('text')).toBe(true);
        const text = handle.text as unknown as {
          analyzed: (texts: readonly (string | null)[], ...rest: unknown[]) => Promise<unknown[]>;
        };
        const analyzed = text.analyzed.bind(handle.text);
        text.analyzed = (texts, ...rest) => {
          lists.push(texts);
          return analyzed(texts, ...rest);
        };
        try {
          await tables.append('notes', rows(35, 3, 'kiwi'));
          expect(await search('kiwi')).toHaveLength(3);
        } finally {
          delete (text as { analyzed?: unknown }).analyzed;
        }
      });
      // The rows' texts (the query's own are tokenized apart).
      expect(lists.filter((texts) => texts.some((t) => t?.startsWith('kiwi 3')))).toHaveLength(1);
    } finally {
      await server.close();
    }
  });
});

describe('upkeep while writes go on, its limits', () => {
  test('a write past a quarter of STRATA_MAX_UNINDEXED_ROWS starts a pass that folds, however small the cap', async () => {
    const server = await startStrata({ ...HAND_RUN, STRATA_MAX_UNINDEXED_ROWS: '40' });
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 'capped');
      expect((await tables.append('notes', rows(0, 30, 'w'))).status).toBe(200);
      expect(gauge(await upkeepPass(server, 'capped'), 'strata_unindexed_rows')).toBe(0);
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        statuses.push((await tables.append('notes', rows(30 + 20 * i, 20, 'w'))).status);
        await passEnded(server, 'capped');
        expect(gauge(await metricsOf(server), 'strata_unindexed_rows')).toBe(0);
      }
      expect(statuses).toEqual([200, 200, 200, 200]);
    } finally {
      await server.close();
    }
  });

  test('a held tail of many small appends is folded once 32 small fragments pile up', async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 'small');
      expect((await tables.append('notes', rows(0, 1, 'w'))).status).toBe(200);
      await upkeepPass(server, 'small');
      const gauges: number[] = [];
      for (let i = 1; i <= 40; i++) {
        expect((await tables.append('notes', rows(i, 1, 'w'))).status).toBe(200);
        gauges.push(gauge(await upkeepPass(server, 'small', 'wait'), 'strata_unindexed_rows'));
      }
      // Held at first, folded once the small fragments reach 32.
      expect(gauges.slice(0, 5)).toEqual([1, 2, 3, 4, 5]);
      expect(gauges).toContain(0);
      await onTableHandle(server, 'small', 'notes', async (handle) => {
        expect(await handle.rows.smallFragments()).toBeLessThan(32);
      });
    } finally {
      await server.close();
    }
  });
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
      expect(refused.json).toMatchObject({ code: 'bad_request' });
      expect(JSON.stringify(refused.json)).toContain('consistency must be one of');
      expect(JSON.stringify(refused.json)).toContain('eventual');
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
      // A replace or delete is read back from the index statistics, a moment after it is answered.
      const unindexed = () => metricsOf(server).then((m) => gauge(m, 'strata_unindexed_rows'));
      await tables.update('notes', 'id = 3', rows(3, 1, 'plum'));
      expect(await eventually(unindexed, (n) => n === 8)).toBe(8);
      await tables.remove('notes', 'id = 12');
      expect(await eventually(unindexed, (n) => n === 7)).toBe(7);
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
      expect(refused.json.error).toContain('table "notes" has 60 rows its indexes do not cover yet');
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

/** The table's handle on the worker, as a test looks inside it; `docs` unless said. */
const onHandle = (
  server: TestServer,
  database: string,
  check: (handle: TableHandle) => Promise<void>,
  table = 'docs',
) => onTableHandle(server, database, table, check);

describe('BM25 over the live rows', () => {
  test('the same scores and ranking whatever was folded, deleted or replaced since', async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const client = await server.as('acme');
      const tables = await textTable(client, 'b', 'docs');
      const words = ['red', 'Kettle', 'blue', 'pot', 'tea', 'cup', 'green', 'steel', 'iron', 'jug'];
      let seed = 11;
      const random = () => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed / 2 ** 31;
      };
      const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)] as T;
      const body = () => {
        const r = random();
        if (r < 0.05) return null;
        if (r < 0.1) return '!!';
        return Array.from({ length: 1 + Math.floor(random() * 9) }, () => pick(words)).join(
          random() < 0.5 ? ' ' : ', ',
        );
      };
      const model = new LiveTexts(tables, 'docs', body, random);
      const check = async (step: string) => {
        for (let q = 0; q < 4; q++) {
          const query = Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(words)).join(' ');
          await model.expectScores(client, 'b', query, q === 3, step);
        }
      };

      await model.append(120);
      await check('a tail, nothing indexed');
      await upkeepPass(server, 'b');
      await check('folded');
      for (let step = 0; step < 12; step++) {
        const action = pick(['append', 'update', 'delete', 'fold'] as const);
        if (action === 'append') await model.append(1 + Math.floor(random() * 30));
        if (action === 'fold') await upkeepPass(server, 'b');
        if (action === 'update' || action === 'delete') await model.change(action);
        await check(`step ${step} (${action})`);
      }
      // The rows written since the last fold were searched beside the index, by the node that wrote them.
      await model.append(5);
      await onHandle(server, 'b', async (handle) => {
        expect(handle.fresh.usable('text')).toBe(true);
      });
      await check('fresh rows beside the index');
      await onHandle(server, 'b', async (handle) => {
        expect(handle.fresh.size).toBeGreaterThanOrEqual(5);
      });
    } finally {
      await server.close();
    }
  });
});

/**
 * A text table of 60 rows and two more in a fragment of their own, both folded into the index, then those two
 * deleted: the fragment goes, and no deletion file says the index still counts them.
 */
async function wholeFragmentDeleted(server: TestServer, client: Client, database: string, seed: number) {
  const tables = await textTable(client, database, 'docs');
  const words = ['red', 'pot', 'tea', 'cup'];
  let state = seed;
  const random = () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
  const body = () =>
    Array.from({ length: 1 + Math.floor(random() * 3) }, () => words[Math.floor(random() * 4)]).join(' ');
  const model = new LiveTexts(tables, 'docs', body, random);
  await model.append(60);
  await upkeepPass(server, database);
  await model.append(2);
  await upkeepPass(server, database);
  const recent = [...model.live.keys()].slice(-2);
  expect((await tables.remove('docs', `id IN (${recent.join(', ')})`)).status).toBe(200);
  for (const id of recent) model.live.delete(id);
  return model;
}

describe('BM25 over the live rows, after deletes that leave no deletion behind', () => {
  test('a delete of every row of a fragment, or a compaction, leaves the index counting rows: scores stay the live ones', async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const client = await server.as('acme');
      const model = await wholeFragmentDeleted(server, client, 'w', 5);
      await onHandle(server, 'w', async (handle) => {
        const unindexed = await handle.unindexed.at(await handle.rows.version());
        expect(unindexed.deletedRows).toBe(0);
      });
      await model.expectScores(client, 'w', 'red pot', false, 'whole fragment deleted');
      // Upkeep compacts, then builds the index again from the live rows: Lance's own scores are the live ones again.
      await upkeepPass(server, 'w');
      await model.expectScores(client, 'w', 'red pot', false, 'compacted');
      await upkeepPass(server, 'w');
      await onHandle(server, 'w', async (handle) => {
        expect(handle.unindexed.countsDeleted(await handle.unindexed.at(await handle.rows.version()))).toBe(false);
      });
      await model.expectScores(client, 'w', 'red pot', false, 'built again');
    } finally {
      await server.close();
    }
  });

  test('a node started after such deletes, before the index was built again, scores the live rows', async () => {
    const first = await startStrata(HAND_RUN);
    let second: TestServer | undefined;
    try {
      const model = await wholeFragmentDeleted(first, await first.as('acme'), 'r2', 9);
      // The node stops before upkeep builds the index again; another starts on the same folder and control store.
      await first.app.close();
      second = await startStrata({ ...HAND_RUN, STRATA_DATA_DIR: first.dataDir });
      await model.expectScores(await second.as('acme'), 'r2', 'red pot', false, 'after the restart');
    } finally {
      await second?.close();
      rmSync(first.dataDir, { recursive: true, force: true, maxRetries: 30, retryDelay: 100 });
    }
  });
});

describe('fresh rows beside the index', () => {
  test('a node that never folded the table searches its own writes beside the index from a covered version on', async () => {
    const server = await startStrata({ ...HAND_RUN, STRATA_UPKEEP_PAUSED: '1' });
    try {
      const client = await server.as('acme');
      const tables = await textTable(client, 'f', 'docs');
      const live = new Map<number, string>();
      for (let batch = 0; batch < 3; batch++) {
        const rows = Array.from({ length: 40 }, (_, i) => {
          const id = batch * 40 + i;
          return { id, body: ['oak', 'elm ash', 'oak oak pine', 'ash'][id % 4] as string };
        });
        for (const row of rows) live.set(row.id, row.body);
        expect((await tables.append('docs', rows)).status).toBe(200);
      }
      expect((await tables.remove('docs', 'id < 10')).status).toBe(200);
      for (let id = 0; id < 10; id++) live.delete(id);
      const reply = await client.request<{ data: { id: number; _bm25: number }[] }>(
        'POST',
        '/v1/hybrid_search/f',
        { table_name: 'docs', text_field: 'body', text_query: 'oak ash', k: 1000, projection: ['id'] },
        { accept: 'application/json' },
      );
      const expected = [...referenceBm25(live, 'oak ash', false)].sort((x, y) => y[1] - x[1] || x[0] - y[0]);
      expect(reply.json.data.map((r) => r.id)).toEqual(expected.map(([id]) => id));
      reply.json.data.forEach((row, i) => {
        const want = expected[i]?.[1] ?? Number.NaN;
        expect(Math.abs(row._bm25 - want) / want).toBeLessThan(1e-6);
      });
      // Nothing was ever folded: the empty table's index covered every row, and each row since is held here.
      await onHandle(server, 'f', async (handle) => {
        expect(handle.fresh.usable('text')).toBe(true);
        expect(handle.fresh.size).toBe(110);
      });
    } finally {
      await server.close();
    }
  });
});

describe('a text leg beside fresh rows reads as deep as its ranking needs', () => {
  test('when the tail moves the weights far, the live best rows come from deep in the index’s ranking', async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const client = await server.as('acme');
      const tables = await textTable(client, 'g', 'docs');
      const live = new Map<number, string>();
      // The index holds 150 short rows of a rare `alpha` and 150 longer ones of `beta`: it ranks every alpha row
      // first, in groups of one length (few ties at the edge of a read).
      const indexed = Array.from({ length: 300 }, (_, id) => {
        const filler = Array.from({ length: id % 6 }, (_, j) => `w${j}`).join(' ');
        return { id, body: id < 150 ? `alpha ${filler}` : `beta w1 w2 w3 w4 w5 w6 ${filler}` };
      });
      // 600 rows of alpha outside the index make it common: over the live rows every beta row scores higher.
      const tail = Array.from({ length: 600 }, (_, i) => ({ id: 1000 + i, body: `alpha w${i % 3}` }));
      expect((await tables.append('docs', indexed)).status).toBe(200);
      await upkeepPass(server, 'g');
      expect((await tables.append('docs', tail)).status).toBe(200);
      for (const row of [...indexed, ...tail]) live.set(row.id, row.body);
      for (const k of [10, 40]) {
        const reply = await client.request<{ data: { id: number; _bm25: number }[] }>(
          'POST',
          '/v1/hybrid_search/g',
          { table_name: 'docs', text_field: 'body', text_query: 'alpha beta', k, projection: ['id'] },
          { accept: 'application/json' },
        );
        expect(reply.headers.get('x-strata-fresh-rows')).toBe('600');
        const expected = [...referenceBm25(live, 'alpha beta', false)]
          .sort((x, y) => y[1] - x[1] || x[0] - y[0])
          .slice(0, k);
        expect(expected.every(([id]) => id >= 150 && id < 300)).toBe(true);
        expect(reply.json.data.map((r) => r.id)).toEqual(expected.map(([id]) => id));
        reply.json.data.forEach((row, i) => {
          const want = expected[i]?.[1] ?? Number.NaN;
          expect(Math.abs(row._bm25 - want) / want).toBeLessThan(1e-6);
        });
      }
      await onHandle(server, 'g', async (handle) => expect(handle.fresh.usable('text')).toBe(true));
    } finally {
      await server.close();
    }
  });

  test('so does the text leg of a hybrid search, past twice its first read, and again from the tokens it held', async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 'h');
      const live = new Map<number, string>();
      // As above, with 500 rows of alpha (rarer than beta in the index) that it ranks first: deeper than twice a
      // hybrid window's first read.
      const indexed = Array.from({ length: 1100 }, (_, id) => {
        const filler = Array.from({ length: id % 6 }, (_, j) => `w${j}`).join(' ');
        const body = id < 500 ? `alpha ${filler}` : `beta w1 w2 w3 w4 w5 w6 ${filler}`;
        return { id, body, emb: [id, 1, 0, 0] };
      });
      const tail = Array.from({ length: 1500 }, (_, i) => ({
        id: 2000 + i,
        body: `alpha w${i % 3}`,
        emb: [i, 2, 0, 0],
      }));
      expect((await tables.append('notes', indexed)).status).toBe(200);
      await upkeepPass(server, 'h');
      expect((await tables.append('notes', tail)).status).toBe(200);
      for (const row of [...indexed, ...tail]) live.set(row.id, row.body);
      // Twice: the second search scores the indexed rows from the tokens the first analyzed (`scoredTokens`).
      for (let round = 0; round < 2; round++) {
        const byText = await textLegOf(client, 'h', 'alpha beta', 20);
        expectLiveRanking(byText, live, 'alpha beta');
        // The live best rows are the beta ones, which the index ranks after every alpha row.
        expect(byText.some((row) => row.id >= 500 && row.id < 1100)).toBe(true);
      }
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      expect(Number(/^strata_scored_tokens_bytes (\S+)$/m.exec(metrics)?.[1])).toBeGreaterThan(0);
    } finally {
      await server.close();
    }
  });

  test('a hybrid text leg over an index that still counts deleted rows ranks and scores the live rows, twice', async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 'd');
      const words = ['alpha', 'beta', 'gamma', 'delta'];
      const rows = Array.from({ length: 600 }, (_, id) => ({
        id,
        body: Array.from({ length: 1 + (id % 5) }, (_, j) => words[(id * 7 + j * 3) % 4]).join(' '),
        emb: [id, 1, 0, 0],
      }));
      expect((await tables.append('notes', rows)).status).toBe(200);
      await upkeepPass(server, 'd');
      // Most of the alpha rows go: the index's statistics still count them until it is built again.
      expect((await tables.remove('notes', "id < 400 AND body LIKE '%alpha%'")).status).toBe(200);
      const live = new Map<number, string>();
      for (const row of rows) if (!(row.id < 400 && row.body.includes('alpha'))) live.set(row.id, row.body);
      // The second search scores the rows from the tokens the first analyzed.
      for (let round = 0; round < 2; round++)
        expectLiveRanking(await textLegOf(client, 'd', 'alpha gamma', 30), live, 'alpha gamma');
    } finally {
      await server.close();
    }
  });

  test('a hybrid text leg whose hits tie past its first read ranks every tied row, in row order', async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 't');
      // 300 indexed rows and 20 fresh ones with one text: every hit ties, past the first read of 132.
      const indexed = Array.from({ length: 300 }, (_, id) => ({ id, body: 'alpha w1', emb: [id, 1, 0, 0] }));
      const tail = Array.from({ length: 20 }, (_, i) => ({ id: 1000 + i, body: 'alpha w1', emb: [i, 2, 0, 0] }));
      const other = Array.from({ length: 50 }, (_, i) => ({ id: 2000 + i, body: 'beta w2', emb: [i, 3, 0, 0] }));
      expect((await tables.append('notes', [...indexed, ...other])).status).toBe(200);
      await upkeepPass(server, 't');
      expect((await tables.append('notes', tail)).status).toBe(200);
      const reply = await client.request<{
        data: { id: number; _explain: { text: { rank: number | null } | null } }[];
      }>(
        'POST',
        '/v1/hybrid_search/t',
        {
          table_name: 'notes',
          text_field: 'body',
          text_query: 'alpha',
          vector_field: 'emb',
          vector_query: [0, 0, 0, 1],
          k: 100,
          projection: ['id'],
          explain: true,
        },
        { accept: 'application/json' },
      );
      const byText = reply.json.data.filter((row) => row._explain.text?.rank != null);
      expect(byText.length).toBeGreaterThan(50);
      // The window (200 for k = 100) holds the first 200 tied rows in row order, each ranked by it.
      for (const row of byText) expect(row._explain.text?.rank).toBe(row.id + 1);
    } finally {
      await server.close();
    }
  });

  test('a write landing during the search sends it the unbounded way, not a shallower one', async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const client = await server.as('acme');
      const tables = await textTable(client, 'r', 'docs');
      const indexed = Array.from({ length: 260 }, (_, id) => {
        const filler = Array.from({ length: id % 6 }, (_, j) => `w${j}`).join(' ');
        return { id, body: id < 60 ? `alpha ${filler}` : `beta w1 w2 w3 w4 w5 w6 ${filler}` };
      });
      const tail = Array.from({ length: 600 }, (_, i) => ({ id: 1000 + i, body: `alpha w${i % 3}` }));
      expect((await tables.append('docs', indexed)).status).toBe(200);
      await upkeepPass(server, 'r');
      expect((await tables.append('docs', tail)).status).toBe(200);
      // A replace of a held row lands after the search took its statistics and before it reads the tier's: by count
      // the tier still holds the rows outside the index, and a term of the new text is one the statistics lack.
      await onHandle(server, 'r', async (handle) => {
        const original = handle.fresh.statisticsOutside.bind(handle.fresh);
        let once = true;
        handle.fresh.statisticsOutside = async (...args: Parameters<typeof original>) => {
          if (once) {
            once = false;
            expect((await tables.update('docs', 'id = 1000', [{ id: 1000, body: 'alpha zebra' }])).status).toBe(200);
          }
          return original(...args);
        };
      });
      const reply = await client.request<{ data: { id: number }[] }>(
        'POST',
        '/v1/hybrid_search/r',
        { table_name: 'docs', text_field: 'body', text_query: 'alpha beta zebra', k: 10, projection: ['id'] },
        { accept: 'application/json' },
      );
      const others = reply.json.data.map((r) => r.id).filter((id) => id !== 1000);
      expect(reply.json.data).toHaveLength(10);
      expect(others.every((id) => id >= 60 && id < 260)).toBe(true);
    } finally {
      await server.close();
    }
  });
});

describe('fresh rows beside the vector index', () => {
  test('vector and hybrid searches over a tail, deletes and replaces answer the exact nearest live rows, as after a fold', async () => {
    const server = await startStrata({ ...HAND_RUN, STRATA_ANN_MIN_ROWS: '256' });
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 'v');
      let seed = 7;
      const random = () => {
        seed = (seed * 48271) % 2147483647;
        return seed / 2147483647 - 0.5;
      };
      const live = new Map<number, { body: string; emb: number[] }>();
      const row = (id: number) => {
        const value = { body: `w${id % 7} w${id % 3}`, emb: [random(), random(), random(), random()] };
        live.set(id, value);
        return { id, ...value };
      };
      const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
      expect((await tables.append('notes', ids(0, 300).map(row))).status).toBe(200);
      await upkeepPass(server, 'v'); // trains the ANN index on the 300 rows, and folds
      expect((await tables.append('notes', ids(300, 60).map(row))).status).toBe(200);
      expect((await tables.append('notes', ids(360, 60).map(row))).status).toBe(200);
      expect((await tables.update('notes', 'id >= 100 AND id < 110', ids(100, 10).map(row))).status).toBe(200);
      expect((await tables.update('notes', 'id >= 330 AND id < 340', ids(330, 10).map(row))).status).toBe(200);
      expect((await tables.remove('notes', 'id >= 200 AND id < 220')).status).toBe(200);
      for (const id of ids(200, 20)) live.delete(id);
      expect((await tables.remove('notes', 'id >= 400 AND id < 405')).status).toBe(200);
      for (const id of ids(400, 5)) live.delete(id);
      await onHandle(
        server,
        'v',
        async (handle) => {
          expect(handle.fresh.usable('vector')).toBe(true);
        },
        'notes',
      );
      const queries = Array.from({ length: 12 }, () => [random(), random(), random(), random()]);
      const search = async (query: number[], text?: string) => {
        const reply = await client.request<{ data: { id: number; _distance: number | null }[] }>(
          'POST',
          '/v1/hybrid_search/v',
          {
            table_name: 'notes',
            vector_field: 'emb',
            vector_query: query,
            k: 10,
            projection: ['id'],
            ...(text === undefined ? {} : { text_field: 'body', text_query: text }),
          },
          { accept: 'application/json' },
        );
        expect(reply.status).toBe(200);
        return { data: reply.json.data, fresh: receipt(reply.headers).fresh };
      };
      const answers = async () => {
        const out = [];
        for (const q of queries) out.push((await search(q)).data, (await search(q, 'w3 w1')).data);
        return out;
      };
      const beside = await answers();
      for (const [i, q] of queries.entries()) {
        const exact = [...live]
          .map(([id, v]) => ({ id, d: v.emb.reduce((sum, x, j) => sum + (x - (q[j] as number)) ** 2, 0) }))
          .sort((a, b) => a.d - b.d)
          .slice(0, 10);
        const got = beside[2 * i] ?? [];
        expect(got.map((r) => r.id)).toEqual(exact.map((e) => e.id));
        got.forEach((r, j) => {
          expect(r._distance).toBeCloseTo(exact[j]?.d as number, 5);
        });
      }
      expect((await search(queries[0] as number[])).fresh).toBeGreaterThan(0);
      await onHandle(
        server,
        'v',
        async (handle) => {
          expect(handle.fresh.size).toBeGreaterThan(0);
        },
        'notes',
      );
      // Folded, the same answers from the indexes alone.
      await upkeepPass(server, 'v');
      expect((await search(queries[0] as number[])).fresh).toBe(0);
      const folded = await answers();
      folded.forEach((rows, i) => {
        expect(rows.map((r) => r.id)).toEqual((beside[i] ?? []).map((r) => r.id));
      });
    } finally {
      await server.close();
    }
  });
});

describe('fresh rows beside the vector index, step by step', () => {
  test('after each of random appends, replaces, deletes and folds, the vector leg answers the exact nearest live rows', async () => {
    const server = await startStrata({ ...HAND_RUN, STRATA_ANN_MIN_ROWS: '256' });
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 's');
      let seed = 11;
      const random = () => {
        seed = (seed * 48271) % 2147483647;
        return seed / 2147483647;
      };
      const live = new Map<number, number[]>();
      let next = 0;
      const row = (id: number) => {
        const emb = [random() - 0.5, random() - 0.5, random() - 0.5, random() - 0.5];
        live.set(id, emb);
        return { id, body: `w${id}`, emb };
      };
      const fresh = (n: number) => Array.from({ length: n }, () => row(next++));
      expect((await tables.append('notes', fresh(300))).status).toBe(200);
      await upkeepPass(server, 's');
      const check = async (step: string) => {
        for (let q = 0; q < 3; q++) {
          const query = [random() - 0.5, random() - 0.5, random() - 0.5, random() - 0.5];
          const reply = await client.request<{ data: { id: number; _distance: number }[] }>(
            'POST',
            '/v1/hybrid_search/s',
            { table_name: 'notes', vector_field: 'emb', vector_query: query, k: 10, projection: ['id'] },
            { accept: 'application/json' },
          );
          const exact = [...live]
            .map(([id, emb]) => ({ id, d: emb.reduce((sum, x, j) => sum + (x - (query[j] as number)) ** 2, 0) }))
            .sort((a, b) => a.d - b.d)
            .slice(0, 10);
          expect(
            reply.json.data.map((r) => r.id),
            step,
          ).toEqual(exact.map((e) => e.id));
          reply.json.data.forEach((r, i) => {
            expect(r._distance, step).toBeCloseTo(exact[i]?.d as number, 5);
          });
        }
      };
      for (let step = 0; step < 12; step++) {
        const action = ['append', 'replace', 'delete', 'fold'][Math.floor(random() * 4)] as string;
        const ids = [...live.keys()];
        const some = (n: number) => Array.from({ length: n }, () => ids[Math.floor(random() * ids.length)] as number);
        if (action === 'append') expect((await tables.append('notes', fresh(25))).status).toBe(200);
        else if (action === 'replace') {
          const [id] = some(1);
          expect((await tables.update('notes', `id = ${id}`, [row(id as number)])).status).toBe(200);
        } else if (action === 'delete') {
          const gone = [...new Set(some(4))];
          expect((await tables.remove('notes', `id IN (${gone.join(', ')})`)).status).toBe(200);
          for (const id of gone) live.delete(id);
        } else await upkeepPass(server, 's');
        await check(`step ${step} (${action})`);
      }
    } finally {
      await server.close();
    }
  });
});

describe('a full-text index that counts deleted rows', () => {
  test("is built again by upkeep, after which its own scores are the live rows' again", async () => {
    const server = await startStrata(HAND_RUN);
    try {
      const client = await server.as('acme');
      const tables = await textTable(client, 'd', 'docs');
      const words = ['alpha', 'beta', 'gamma', 'delta'];
      const live = new Map<number, string>();
      const rows = Array.from({ length: 200 }, (_, i) => {
        const body = Array.from({ length: 1 + (i % 5) }, (_, j) => words[(i * 7 + j * 3) % 4]).join(' ');
        live.set(i, body);
        return { id: i, body };
      });
      expect((await tables.append('docs', rows)).status).toBe(200);
      await upkeepPass(server, 'd');
      // One row of 200 deleted: too few for a compaction to drop it from the one fragment, so the index counts it.
      expect((await tables.remove('docs', 'id = 3')).status).toBe(200);
      live.delete(3);
      await upkeepPass(server, 'd');
      const metrics = await upkeepPass(server, 'd');
      expect(metrics).toMatch(/^strata_upkeep_duration_seconds_count\{work="text_retrain"\} 1$/m);

      await onHandle(server, 'd', async (handle) => {
        const state = await handle.unindexed.at(await handle.rows.version());
        expect(state.deletedRows).toBe(1);
        expect(handle.unindexed.countsDeleted(state)).toBe(false);
      });
      // Nothing rescores now: Lance's own scores must be the live rows'.
      for (const query of ['alpha', 'beta gamma', 'delta alpha beta']) {
        const reply = await client.request<{ data: { id: number; _bm25: number }[] }>(
          'POST',
          '/v1/hybrid_search/d',
          { table_name: 'docs', text_field: 'body', text_query: query, k: 1000, projection: ['id'] },
          { accept: 'application/json' },
        );
        const expected = referenceBm25(live, query, false);
        expect(reply.json.data.length).toBe(expected.size);
        for (const row of reply.json.data) {
          const want = expected.get(row.id) ?? Number.NaN;
          expect(Math.abs(row._bm25 - want) / want, `"${query}" row ${row.id}`).toBeLessThan(1e-6);
        }
      }
    } finally {
      await server.close();
    }
  });
});

describe('receipts and backpressure after deletes, replaces and repeats', () => {
  test('a delete or replace is reflected in the receipt, and a repeat of a landed write at the cap is answered', async () => {
    const server = await startStrata({ ...HAND_RUN, STRATA_UPKEEP_PAUSED: '1', STRATA_MAX_UNINDEXED_ROWS: '50' });
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 'r');
      const keyed = { 'idempotency-key': 'first-load', accept: 'application/json' };
      const first = await client.request('POST', '/v1/append/r?table=notes', { data: rows(0, 60, 'plum') }, keyed);
      expect(first.status).toBe(200);
      // At the cap now: the same request again is the first one's answer, not a refusal.
      const again = await client.request('POST', '/v1/append/r?table=notes', { data: rows(0, 60, 'plum') }, keyed);
      expect(again.status).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      // The same key for another body is still told so, and a body that is no rows still gets its 400.
      const reused = await client.request('POST', '/v1/append/r?table=notes', { data: rows(0, 1, 'plum') }, keyed);
      expect(reused.json).toMatchObject({ code: 'idempotency_key_reused' });
      const bad = await client.request('POST', '/v1/append/r?table=notes', { data: [{ id: 'x' }] });
      expect(bad.status).toBe(400);

      const search = async (body: Record<string, unknown>) =>
        receipt(
          (
            await client.request(
              'POST',
              '/v1/hybrid_search/r',
              { table_name: 'notes', k: 5, ...body },
              {
                accept: 'application/json',
              },
            )
          ).headers,
        ).fresh;
      const text = { text_field: 'body', text_query: 'plum' };
      const vector = { vector_field: 'emb', vector_query: [1, 1, 0, 0] };
      expect(await search(text)).toBe(60);
      expect(await search(vector)).toBe(60);
      // 20 of the 60 deleted: the exact scan reads 40 rows; under the cap again, appends are taken.
      expect((await tables.remove('notes', 'id < 20')).status).toBe(200);
      expect(await search(vector)).toBe(40);
      expect(await search(text)).toBe(40);
      // A replace adds no row to the exactly scanned column.
      expect((await tables.update('notes', 'id = 30', rows(30, 1, 'plum'))).status).toBe(200);
      expect(await search(vector)).toBe(40);
      expect((await tables.append('notes', rows(100, 5, 'plum'))).status).toBe(200);
      expect(await search(vector)).toBe(45);
      expect(await search({ ...text, k: 0 })).toBe(0);
    } finally {
      await server.close();
    }
  });

  test('eventual reads a built ANN index alone, and says so', async () => {
    const server = await startStrata({ ...HAND_RUN, STRATA_ANN_MIN_ROWS: '256' });
    try {
      const client = await server.as('acme');
      const tables = await notesTable(client, 'e');
      const spread = Array.from({ length: 300 }, (_, i) => ({
        id: i,
        body: `w${i}`,
        emb: [Math.cos(i), Math.sin(i), i / 300, 1],
      }));
      expect((await tables.append('notes', spread)).status).toBe(200);
      await upkeepPass(server, 'e'); // trains the ANN index on the 300 rows
      expect((await tables.append('notes', [{ id: 999, body: 'new', emb: [5, 5, 5, 5] }])).status).toBe(200);
      const nearest = async (consistency: string) => {
        const reply = await client.request<{ data: { id: number }[] }>(
          'POST',
          '/v1/hybrid_search/e',
          {
            table_name: 'notes',
            vector_field: 'emb',
            vector_query: [5, 5, 5, 5],
            k: 1,
            projection: ['id'],
            consistency,
          },
          { accept: 'application/json' },
        );
        return { id: reply.json.data[0]?.id, fresh: receipt(reply.headers).fresh };
      };
      expect(await nearest('strong')).toEqual({ id: 999, fresh: 1 });
      const eventual = await nearest('eventual');
      expect(eventual.fresh).toBe(0);
      expect(eventual.id).not.toBe(999);
    } finally {
      await server.close();
    }
  });
});

describe('a search racing a write of a row it finds', () => {
  type Methods = Record<string, (...args: unknown[]) => Promise<unknown>>;
  /**
   * How the replace's commit is answered: at once; never (it landed, and the bucket's answer was lost); or 2.5 s
   * after it landed (a slow bucket), longer than a leg waits for it.
   */
  const answers = ['answered', 'lost', 'slow'] as const;
  test.each(answers)(
    'a row replaced after a leg searched the fresh rows and before it read its index is found (its commit %s)',
    async (answer) => {
      const server = await startStrata({ ...HAND_RUN, STRATA_ANN_MIN_ROWS: '256' });
      try {
        const client = await server.as('acme');
        const tables = await notesTable(client, 'race');
        const row = (id: number) => ({ id, body: `w${id % 7} w${id % 3}`, emb: [id / 300, (id % 10) / 10, 1, 0] });
        const first = Array.from({ length: 300 }, (_, id) => row(id));
        expect((await tables.append('notes', first)).status).toBe(200);
        await upkeepPass(server, 'race'); // trains the ANN index and folds: row 7 is in both indexes
        // A tail, so that the legs read their indexes beside the fresh rows (not as exact answers alone).
        expect((await tables.append('notes', [row(300)])).status).toBe(200);
        const search = (body: Record<string, unknown>) =>
          client.request<{ data: { id: number }[] }>(
            'POST',
            '/v1/hybrid_search/race',
            { table_name: 'notes', k: 1000, projection: ['id'], ...body },
            { accept: 'application/json' },
          );
        const text = () => search({ text_field: 'body', text_query: 'w0' });
        const nearest = () => search({ vector_field: 'emb', vector_query: row(7).emb, k: 3 });
        // Once each first: BM25's statistics are gathered, and the vector scan thread started.
        expect((await text()).json.data.map((r) => r.id)).toContain(7);
        expect((await nearest()).json.data.map((r) => r.id)).toContain(7);
        const legs = [
          { leg: 'textLeg', fresh: 'searchText', kind: 'text', run: text },
          { leg: 'vectorLeg', fresh: 'searchVector', kind: 'vector', run: nearest },
        ] as const;
        for (const { leg, fresh, kind, run } of legs) {
          // Each leg starts from a fold after a commit (a lost commit lets the fresh rows go until one), and a tail.
          expect((await tables.append('notes', [row(301)])).status).toBe(200);
          await upkeepPass(server, 'race');
          expect((await tables.append('notes', [row(302)])).status).toBe(200);
          await onHandle(
            server,
            'race',
            async (handle) => {
              expect(handle.fresh.usable(kind)).toBe(true);
              // The order forced: the fresh rows are searched, then row 7 is replaced (its new version outside
              // the index), then the index is read (the old version deleted there).
              const tier = handle.fresh as unknown as Methods;
              const rows = handle.rows as unknown as Methods;
              const searchFresh = tier[fresh]?.bind(handle.fresh);
              const readIndex = rows[leg]?.bind(handle.rows);
              const replace = rows.replaceByKey?.bind(handle.rows);
              let searched: () => void = () => undefined;
              const freshDone = new Promise<void>((resolve, reject) => {
                searched = resolve;
                setTimeout(() => reject(new Error(`the ${kind} leg did not search the fresh rows`)), 10_000).unref();
              });
              let landed: () => void = () => undefined;
              const hasLanded = new Promise<void>((resolve) => (landed = resolve));
              let updating: Promise<{ status: number }> | undefined;
              tier[fresh] = async (...args) => {
                try {
                  return await searchFresh?.(...args);
                } finally {
                  searched();
                }
              };
              rows.replaceByKey = async (...args) => {
                const result = await replace?.(...args);
                landed();
                if (answer === 'lost') throw new Error('no answer from the bucket; the commit may have landed');
                if (answer === 'slow') await new Promise((resolve) => setTimeout(resolve, 2500));
                return result;
              };
              rows[leg] = async (...args) => {
                if (updating === undefined) {
                  await freshDone;
                  updating = tables.update('notes', 'id = 7', [row(7)]);
                  await hasLanded;
                  if (answer !== 'slow') await updating;
                }
                return readIndex?.(...args);
              };
              try {
                const reply = await run();
                expect((await updating)?.status).toBe(answer === 'lost' ? 500 : 200);
                expect(reply.json.data.map((r) => r.id)).toContain(7);
              } finally {
                delete tier[fresh];
                delete rows[leg];
                delete rows.replaceByKey;
              }
            },
            'notes',
          );
        }
      } finally {
        await server.close();
      }
    },
  );
});
