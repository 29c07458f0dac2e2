import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { connect } from '@lancedb/lancedb';
import { Strata } from '@strata/client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ftsIndex } from '../src/engine/lance/indexes.js';
import { CLI } from './support/processes.js';
import { activeLocalDatabase, type Client, startStrata, type TestServer, upkeepPass } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * Multi-field, stemmed text search against a BM25 written here from its definition (docs/api.md, `text_fields`):
 * over a corpus of package-like summaries and descriptions under the `english` analyzer, the top 10 of each query
 * and their `_bm25` (Σ boost × BM25 of each field, k1 1.2, b 0.75, idf ln(1 + (N − n + 0.5)/(n + 0.5)) over the
 * live rows) are the reference's, with every row outside the indexes and again once upkeep folded them. The
 * tokens are Lance's own for the same analyzer, so only the scoring is under test.
 */

const ROWS = 240;
let server: TestServer;
let api: Client;
let dir: string;

/** A small generator of plausible package texts, the same every run. */
function corpus(): { id: number; summary: string; description: string }[] {
  let seed = 20261127;
  const pick = <T>(xs: readonly T[]): T => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return xs[seed % xs.length] as T;
  };
  const adjectives = ['fast', 'simple', 'lightweight', 'secure', 'graphical', 'command-line', 'small', 'powerful'];
  const things = ['image', 'images', 'PDF', 'password', 'passwords', 'music', 'video', 'photo', 'photos', 'e-mail'];
  const roles = ['viewer', 'viewers', 'reader', 'readers', 'manager', 'managers', 'editor', 'player', 'library'];
  const tails = [
    'for the desktop',
    'written in Rust',
    'with plugins',
    'for GNOME',
    'and tools',
    'for viewing and editing',
    'that manages collections',
    'for readers of documents',
  ];
  return Array.from({ length: ROWS }, (_, id) => {
    const summary = `${pick(adjectives)} ${pick(things)} ${pick(roles)} ${pick(tails)}`;
    const sentences = Array.from(
      { length: 1 + (id % 3) },
      () => `This package provides a ${pick(adjectives)} ${pick(things)} ${pick(roles)} ${pick(tails)}.`,
    );
    return { id, summary, description: sentences.join(' ') };
  });
}

const rows = corpus();
const BOOSTS = { summary: 2, description: 1 } as const;
const QUERIES = [
  'image viewers',
  'pdf reader',
  'password managers',
  'music player',
  'photo editing',
  'viewing photos',
  'secure password',
  'readers of documents',
  'fast video player for gnome',
  'managing collections',
];

/** Each field's tokens of each row, and of each query, under `english` as Lance makes them. */
const tokens: Record<'summary' | 'description', string[][]> = { summary: [], description: [] };
const queryTokens = new Map<string, string[]>();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'strata-relevance-'));
  const db = await connect(dir);
  const table = await db.createTable('t', [{ body: 'x' }]);
  await table.createIndex('body', { config: ftsIndex('english') });
  const tokenize = async (text: string) => (await table.tokenize(text, { column: 'body' })).map((t) => t.text);
  for (const row of rows) {
    tokens.summary.push(await tokenize(row.summary));
    tokens.description.push(await tokenize(row.description));
  }
  for (const q of QUERIES) queryTokens.set(q, await tokenize(q));
  table.close();
  db.close();

  server = await startStrata({ STRATA_UPKEEP_INTERVAL_MS: '3600000' });
  api = await server.as('acme');
  await activeLocalDatabase(api, 'rel');
  const tables = tablesOf(api, 'rel');
  const created = await tables.create({
    table_name: 'pkgs',
    schema: [
      { name: 'id', type: 'i32' },
      { name: 'summary', type: 'utf8' },
      { name: 'description', type: 'utf8' },
    ],
    indexes: {
      fts: [
        { column: 'summary', analyzer: 'english' },
        { column: 'description', analyzer: 'english' },
      ],
    },
  });
  expect(created.status).toBe(200);
  // In four appends, so that the rows lie in several fragments.
  for (let at = 0; at < ROWS; at += ROWS / 4)
    expect((await tables.append('pkgs', rows.slice(at, at + ROWS / 4))).status).toBe(200);
}, 60_000);
afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** BM25 of one field over every row, from its definition. */
function bm25(field: 'summary' | 'description', query: readonly string[]): number[] {
  const docs = tokens[field].filter((t) => t.length > 0);
  const avg = docs.reduce((n, t) => n + t.length, 0) / docs.length;
  const idf = (term: string) => {
    const n = docs.filter((t) => t.includes(term)).length;
    return Math.log(1 + (docs.length - n + 0.5) / (n + 0.5));
  };
  return tokens[field].map((row) =>
    query.reduce((sum, term) => {
      const tf = row.filter((t) => t === term).length;
      return tf === 0 ? sum : sum + (idf(term) * (tf * 2.2)) / (tf + 1.2 * (0.25 + (0.75 * row.length) / avg));
    }, 0),
  );
}

/** The reference's top 10: best sum first, ties in row order. */
function reference(query: string): { id: number; score: number }[] {
  const q = queryTokens.get(query) ?? [];
  const summary = bm25('summary', q);
  const description = bm25('description', q);
  return rows
    .map((row, i) => ({
      id: row.id,
      score: BOOSTS.summary * (summary[i] ?? 0) + BOOSTS.description * (description[i] ?? 0),
    }))
    .filter((r) => r.score > 0)
    .sort((a, b) => b.score - a.score || a.id - b.id)
    .slice(0, 10);
}

async function strata(query: string): Promise<{ id: number; score: number }[]> {
  const res = await api.request<{ data: { id: number; _bm25: number }[] }>(
    'POST',
    '/v1/hybrid_search/rel',
    {
      table_name: 'pkgs',
      text_query: query,
      text_fields: [
        { field: 'summary', boost: BOOSTS.summary },
        { field: 'description', boost: BOOSTS.description },
      ],
      k: 10,
      projection: ['id'],
    },
    { accept: 'application/json' },
  );
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  return res.json.data.map((r) => ({ id: r.id, score: r._bm25 }));
}

function expectSame(got: { id: number; score: number }[], want: { id: number; score: number }[], query: string) {
  expect(
    got.map((r) => r.id),
    query,
  ).toEqual(want.map((r) => r.id));
  got.forEach((r, i) => {
    const wanted = want[i]?.score as number;
    expect(Math.abs(r.score - wanted) / wanted, `${query}: row ${r.id}`).toBeLessThan(1e-6);
  });
}

describe('text_fields under english, against BM25 from its definition', () => {
  test('every row outside the indexes (the fresh rows beside them)', async () => {
    for (const query of QUERIES) expectSame(await strata(query), reference(query), query);
  });

  test('every row folded into the indexes', async () => {
    await upkeepPass(server, 'rel');
    for (const query of QUERIES) expectSame(await strata(query), reference(query), query);
  });

  test('text_fields beside text_field, a column twice or without a full-text index, is 400 naming it', async () => {
    const refused = async (body: object) => {
      const res = await api.request<{ error: string; code: string }>('POST', '/v1/hybrid_search/rel', {
        table_name: 'pkgs',
        text_query: 'viewer',
        k: 3,
        ...body,
      });
      expect(res.status).toBe(400);
      expect(res.json.code).toBe('bad_request');
      return res.json.error;
    };
    expect(await refused({ text_field: 'summary', text_fields: [{ field: 'summary' }] })).toBe(
      'send one of text_field and text_fields, not both',
    );
    expect(await refused({ text_fields: [{ field: 'summary' }, { field: 'summary', boost: 2 }] })).toBe(
      'text_fields[1]: column "summary" is listed twice',
    );
    expect(await refused({ text_fields: [{ field: 'id' }] })).toBe(
      'text_fields[0].field: column "id" has no full-text index',
    );
    expect(await refused({ text_fields: [{ field: 'summary', boost: 0 }] })).toMatch(/text_fields\/0\/boost|boost/);
    expect(await refused({ text_fields: [] })).toMatch(/text_fields/);
  });

  test('count and token_match take text_fields: a row matching in either column, once', async () => {
    const matching = (query: string) =>
      rows.filter((_, i) => {
        const q = queryTokens.get(query) ?? [];
        return q.some((t) => tokens.summary[i]?.includes(t) || tokens.description[i]?.includes(t));
      }).length;
    for (const query of ['pdf reader', 'viewing photos']) {
      const counted = await api.request<{ count: number }>('POST', '/v1/count/rel', {
        table_name: 'pkgs',
        text_fields: [{ field: 'summary' }, { field: 'description' }],
        query,
      });
      expect(counted.json.count, query).toBe(matching(query));
      const listed = await api.request<{ data: { id: number }[] }>(
        'POST',
        '/v1/token_match/rel',
        {
          table_name: 'pkgs',
          text_fields: [{ field: 'summary' }, { field: 'description' }],
          query,
          projection: ['id'],
        },
        { accept: 'application/json' },
      );
      expect(listed.json.data).toHaveLength(matching(query));
      expect(new Set(listed.json.data.map((r) => r.id)).size).toBe(matching(query));
    }
  });

  test('the client and the CLI search several columns with boosts, and count over them', async () => {
    const apiKey = (api.auth.authorization ?? '').replace(/^Bearer /, '');
    const pkgs = new Strata({ url: server.url, apiKey }).database('rel').table('pkgs');
    const query = 'pdf reader';
    const textFields = [
      { field: 'summary', boost: 2 },
      { field: 'description', boost: 1 },
    ];
    const found = (await pkgs.search({ text: query, textFields, k: 10, projection: ['id'] }, { rows: true })) as {
      id: number;
      _bm25: number;
    }[];
    expectSame(
      found.map((r) => ({ id: r.id, score: r._bm25 })),
      reference(query),
      query,
    );
    const fields = [{ field: 'summary' }, { field: 'description' }];
    expect(await pkgs.count(fields, query)).toBeGreaterThan(await pkgs.count('summary', query));

    const run = promisify(execFile);
    const args = ['search', '--url', server.url, '--database', 'rel', '--table', 'pkgs', '--text', query];
    const { stdout } = await run(
      process.execPath,
      [CLI, ...args, '--text-field', 'summary:2', '--text-field', 'description', '--format', 'json'],
      { env: { ...process.env, STRATA_API_KEY: apiKey } },
    );
    const ids = stdout
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { id: number }).id);
    expect(ids).toEqual(reference(query).map((r) => r.id));
  });
});
