import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { activeLocalDatabase, type Client, startStrata, type TestServer, upkeepPass } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * Stemming analyzers (docs/api.md, analyzers): by a language's name or spelled out, declared at creation, shown
 * in canonical form, and used alike by the index, the rows outside it and BM25's statistics.
 */

let server: TestServer;
let api: Client;
let tables: ReturnType<typeof tablesOf>;

beforeAll(async () => {
  server = await startStrata({ STRATA_UPKEEP_INTERVAL_MS: '3600000' });
  api = await server.as('acme');
  await activeLocalDatabase(api, 'an');
  tables = tablesOf(api, 'an');
});
afterAll(() => server.close());

const SUMMARIES = [
  'image viewer for the desktop',
  'fast PDF viewers and readers',
  'viewing images from the command line',
  'password manager',
  'a viewer of viewers',
];

interface Hit {
  id: number;
  _bm25: number;
}
const search = (table: string, query: string) =>
  api.request<{ data: Hit[] }>(
    'POST',
    '/v1/hybrid_search/an',
    { table_name: table, text_query: query, text_field: 'summary', k: 10, projection: ['id'] },
    { accept: 'application/json' },
  );

describe('analyzers', () => {
  test('english stems and drops stop words: "viewers" finds every viewer, and the same scores before and after a fold', async () => {
    const created = await tables.create({
      table_name: 'pkgs',
      schema: [
        { name: 'id', type: 'i32' },
        { name: 'summary', type: 'utf8' },
      ],
      indexes: { fts: [{ column: 'summary', analyzer: 'English' }] },
    });
    expect(created.status).toBe(200);
    expect(created.json).toMatchObject({ indexes: { fts: [{ column: 'summary', analyzer: 'english' }] } });
    await tables.append(
      'pkgs',
      SUMMARIES.map((summary, id) => ({ id, summary })),
    );
    // Outside the index: found and scored by the service with Lance's tokens.
    const fresh = await search('pkgs', 'viewers');
    expect(fresh.json.data.map((r) => r.id).sort()).toEqual([0, 1, 4]);
    // A stop word alone finds nothing.
    expect((await search('pkgs', 'the')).json.data).toEqual([]);
    await upkeepPass(server, 'an');
    const folded = await search('pkgs', 'viewers');
    // Lance's scores are 32-bit floats; the service's its own in 64.
    expect(folded.json.data.map((r) => r.id)).toEqual(fresh.json.data.map((r) => r.id));
    for (const [a, b] of folded.json.data.map((r, i) => [r._bm25, fresh.json.data[i]?._bm25] as const)) {
      expect(a).toBeCloseTo(b as number, 6);
    }
    const counted = await api.request<{ count: number }>('POST', '/v1/count/an', {
      table_name: 'pkgs',
      field_name: 'summary',
      query: 'images',
    });
    // "image" and "images" share a stem.
    expect(counted.json.count).toBe(2);
  });

  test('the object form is answered with every member; /v1/schema shows it beside the column', async () => {
    const created = await tables.create({
      table_name: 'custom',
      schema: [{ name: 'summary', type: 'utf8' }],
      indexes: { fts: [{ column: 'summary', analyzer: { stem: 'english', ascii_folding: true } }] },
    });
    expect(created.status).toBe(200);
    const analyzer = { tokenizer: 'simple', lowercase: true, ascii_folding: true, stem: 'english', stop_words: null };
    expect(created.json).toMatchObject({ indexes: { fts: [{ column: 'summary', analyzer }] } });
    expect((await tables.schema('custom')).json).toEqual([
      { name: 'summary', type: 'utf8', nullable: true, indexes: [{ kind: 'fts', analyzer }] },
    ]);
  });

  test.each([
    ['klingon', /analyzer "klingon" is not one of ascii_lower, standard, arabic, .*turkish/],
    [{ stem: 'klingon' }, /analyzer.stem "klingon" is not one of arabic/],
    [{ stop_words: 'esperanto' }, /analyzer.stop_words "esperanto" is not one of/],
    [{ tokenizer: 'whitespace' }, /analyzer.tokenizer "whitespace" is not one of simple, icu/],
    [{ stem: 'english', stop_words: 'french' }, /stem and stop_words must name the same language/],
    [{ stemmer: 'english' }, /body.indexes.fts\[0\].analyzer has unknown property "stemmer"/],
  ])('refuses %j with a 400 naming it', async (analyzer, message) => {
    const res = await tables.create({
      table_name: 'bad',
      schema: [{ name: 'summary', type: 'utf8' }],
      indexes: { fts: [{ column: 'summary', analyzer }] },
    });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
  });

  test('list_tables says when upkeep last committed work on each table: null until it has', async () => {
    const listed = async () => (await tables.list()).json.tables.find((t) => t.table_name === 'pkgs');
    const before = Date.now();
    await tables.append('pkgs', [{ id: 99, summary: 'one more viewer' }]);
    await upkeepPass(server, 'an');
    const after = await listed();
    expect(after?.last_upkeep_ms).toBeGreaterThanOrEqual(before);
    expect(after?.last_upkeep_ms).toBeLessThanOrEqual(Date.now());
    await tables.create({ table_name: 'untouched', schema: [{ name: 'id', type: 'i32' }] });
    const untouched = (await tables.list()).json.tables.find((t) => t.table_name === 'untouched');
    expect(untouched).toEqual({ table_name: 'untouched', num_rows: 0, last_upkeep_ms: null });
  });
});
