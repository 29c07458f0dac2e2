import { beforeAll, describe, expect, test } from 'vitest';
import { serveFile } from './support/server.js';
import { ARROW, openDataset, type Row, tablesOf } from './support/tables.js';

interface Hit extends Row {
  _score: number;
  _bm25: number | null;
  _distance: number | null;
}

const search = async (body: Record<string, unknown>) =>
  api.request<{ data: Hit[]; error?: string }>(
    'POST',
    '/v1/hybrid_search/s',
    { table_name: 'docs', ...body },
    { accept: 'application/json' },
  );
const count = async (body: Record<string, unknown>) =>
  api.request<{ count: number; error?: string }>('POST', '/v1/count/s', {
    table_name: 'docs',
    field_name: 'body',
    ...body,
  });
const rowsOf = async (path: string, body: Record<string, unknown>) =>
  api.request<{ data: Row[]; error?: string }>(
    'POST',
    `/v1/${path}/s`,
    { table_name: 'docs', ...body },
    { accept: 'application/json' },
  );

/** ascii_lower as API.md §4 defines it, written independently of the engine. */
const asciiLower = (text: string) =>
  text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((t) => t !== '');

const WORDS = ['apple', 'banana', 'cherry', 'date', 'elder', 'fig', 'grape'];
const DOCS = Array.from({ length: 40 }, (_, i) => {
  const n = 1 + (i % 5);
  const body = Array.from({ length: n + (i % 3) }, (_, j) => WORDS[(i * 3 + j * j) % WORDS.length]).join(' ');
  const angle = (i * Math.PI) / 20;
  return { id: i, body, kind: i % 2 === 0 ? 'even' : 'odd', emb: [Math.cos(angle), Math.sin(angle), (i % 7) / 7] };
});

const { strata, api } = serveFile({}, { database: 's' });
const db = tablesOf(api, 's');

beforeAll(async () => {
  const schema = [
    { name: 'id', type: 'i64', nullable: false },
    { name: 'body', type: 'utf8' },
    { name: 'kind', type: 'utf8' },
    { name: 'emb', type: 'vector', dim: 3 },
  ];
  await db.create({
    table_name: 'docs',
    schema,
    indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'cosine' }] },
  });
  for (const metric of ['l2', 'dot']) {
    await db.create({
      table_name: `docs_${metric}`,
      schema,
      indexes: { fts: ['body'], vector: [{ column: 'emb', metric }] },
    });
    await db.append(`docs_${metric}`, DOCS);
  }
  await db.append('docs', DOCS);
});

const dot = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * (b[i] ?? 0), 0);
const DISTANCES: Record<string, (a: number[], b: number[]) => number> = {
  docs: (a, b) => 1 - dot(a, b) / Math.sqrt(dot(a, a) * dot(b, b)),
  docs_l2: (a, b) => a.reduce((s, x, i) => s + (x - (b[i] ?? 0)) ** 2, 0),
  docs_dot: (a, b) => -dot(a, b),
};

describe('vector leg', () => {
  test.each(['docs', 'docs_l2', 'docs_dot'])('%s: order and distances equal exact computation', async (table) => {
    const query = [0.3, 0.9, 0.2];
    const res = await search({
      table_name: table,
      vector_field: 'emb',
      vector_query: query,
      k: 40,
      projection: ['id'],
    });

    expect(res.status).toBe(200);
    const distance = DISTANCES[table] as (a: number[], b: number[]) => number;
    const expected = DOCS.map((d) => ({
      id: d.id,
      distance: distance(d.emb.map(Math.fround), query.map(Math.fround)),
    })).sort((a, b) => a.distance - b.distance || a.id - b.id);
    const got = res.json.data;
    expect(got).toHaveLength(40);
    got.forEach((hit, i) => {
      expect(hit._distance).toBeCloseTo(expected[i]?.distance ?? Number.NaN, 4);
      expect(hit._bm25).toBeNull();
      expect(hit._score).toBeCloseTo(1 / (60 + i + 1), 12);
    });
    const gotIds = got.map((h) => h.id);
    const expectedIds = expected.map((e) => e.id);
    // Equal up to rows whose distances agree to float32 precision.
    gotIds.forEach((id, i) => {
      if (id !== expectedIds[i])
        expect(Math.abs((expected[i]?.distance ?? 0) - (got[i]?._distance ?? 0))).toBeLessThan(1e-5);
    });
  });
});

describe('text leg', () => {
  test('count equals a reference count over the same tokens, for OR and AND', async () => {
    for (const query of ['apple', 'banana cherry', 'fig grape apple', 'kiwi']) {
      const tokens = asciiLower(query);
      const any = DOCS.filter((d) => asciiLower(d.body).some((t) => tokens.includes(t))).length;
      const all = DOCS.filter((d) => tokens.every((t) => asciiLower(d.body).includes(t))).length;

      expect((await count({ query })).json.count).toBe(any);
      expect((await count({ query, operator: 'AND' })).json.count).toBe(all);
    }
  });

  test('BM25 ranks by score, equal scores in row order, and AND keeps only rows with every token', async () => {
    const res = await search({ text_field: 'body', text_query: 'banana cherry', k: 40, projection: ['id', 'body'] });
    const hits = res.json.data;

    expect(hits.length).toBe((await count({ query: 'banana cherry' })).json.count);
    for (let i = 1; i < hits.length; i++) {
      const [a, b] = [hits[i - 1] as Hit, hits[i] as Hit];
      expect(a._bm25 ?? 0).toBeGreaterThanOrEqual(b._bm25 ?? 0);
      if (a._bm25 === b._bm25) expect(Number(a.id)).toBeLessThan(Number(b.id));
      expect(a._distance).toBeNull();
    }
    const and = await search({
      text_field: 'body',
      text_query: 'banana cherry',
      operator: 'and',
      k: 40,
      projection: ['body'],
    });
    for (const hit of and.json.data)
      expect(asciiLower(String(hit.body))).toEqual(expect.arrayContaining(['banana', 'cherry']));
  });

  test('BM25 order equals a reference BM25 over the same tokens (k1 1.2, b 0.75)', async () => {
    const query = asciiLower('apple elder grape');
    const docs = DOCS.map((d) => ({ id: d.id, tokens: asciiLower(d.body) }));
    const avgdl = docs.reduce((s, d) => s + d.tokens.length, 0) / docs.length;
    const idf = (t: string) => {
      const n = docs.filter((d) => d.tokens.includes(t)).length;
      return Math.log(1 + (docs.length - n + 0.5) / (n + 0.5));
    };
    const reference = docs
      .map((d) => ({
        id: d.id,
        score: query.reduce((s, t) => {
          const tf = d.tokens.filter((x) => x === t).length;
          return s + (tf === 0 ? 0 : (idf(t) * tf * 2.2) / (tf + 1.2 * (1 - 0.75 + (0.75 * d.tokens.length) / avgdl)));
        }, 0),
      }))
      .filter((d) => d.score > 0)
      .sort((a, b) => b.score - a.score || a.id - b.id);

    const res = await search({ text_field: 'body', text_query: 'apple elder grape', k: 40, projection: ['id'] });

    expect(res.json.data.map((h) => h.id)).toEqual(reference.map((r) => r.id));
  });

  test('a query without tokens counts 0 and does not run the text leg', async () => {
    expect((await count({ query: ' -- ' })).json.count).toBe(0);
    const res = await search({ text_field: 'body', text_query: '!!', k: 3 });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/nothing to search/);
  });
});

/** RRF of two single-leg rankings as API.md §6 defines it (ids are in row order), written apart from the engine. */
function rrf(text: Hit[], vector: Hit[], o: { rrfK: number; textWeight: number; vectorWeight: number; k: number }) {
  const rank = (hits: Hit[]) => new Map(hits.map((h, i) => [h.id, i + 1]));
  const [textRank, vectorRank] = [rank(text), rank(vector)];
  return [...new Set([...textRank.keys(), ...vectorRank.keys()])]
    .map((id) => {
      const t = textRank.get(id);
      const v = vectorRank.get(id);
      const score =
        (t === undefined ? 0 : o.textWeight / (o.rrfK + t)) + (v === undefined ? 0 : o.vectorWeight / (o.rrfK + v));
      return { id, score, best: Math.min(t ?? Infinity, v ?? Infinity) };
    })
    .sort((a, b) => b.score - a.score || a.best - b.best || Number(a.id) - Number(b.id))
    .slice(0, o.k);
}

describe('fusion', () => {
  test('fused scores are the RRF of the two single-leg rankings, with weights and rrf_k', async () => {
    const common = { window: 40, projection: ['id'] };
    const text = await search({ ...common, text_field: 'body', text_query: 'apple date', k: 40 });
    const vector = await search({ ...common, vector_field: 'emb', vector_query: [1, 0, 0], k: 40 });
    const fused = await search({
      ...common,
      text_field: 'body',
      text_query: 'apple date',
      vector_field: 'emb',
      vector_query: [1, 0, 0],
      k: 10,
      rrf_k: 10,
      text_weight: 2,
      vector_weight: 0.5,
    });

    const expected = rrf(text.json.data, vector.json.data, { rrfK: 10, textWeight: 2, vectorWeight: 0.5, k: 10 });

    expect(fused.json.data.map((h) => h.id)).toEqual(expected.map((e) => e.id));
    fused.json.data.forEach((hit, i) => {
      expect(hit._score).toBeCloseTo(expected[i]?.score ?? 0, 12);
    });
  });

  test('pages with the same window concatenate to the unpaged list', async () => {
    const common = {
      text_field: 'body',
      text_query: 'fig elder',
      vector_field: 'emb',
      vector_query: [0, 1, 0.5],
      window: 40,
    };
    const all = await search({ ...common, k: 30 });
    const pages = [];
    for (let offset = 0; offset < 30; offset += 7) pages.push(...(await search({ ...common, k: 7, offset })).json.data);

    expect(pages.slice(0, 30)).toEqual(all.json.data);
  });

  test('one leg alone pages the same way, its fused score that of its rank', async () => {
    // One leg reads only up to the page's end (search.ts): pages must still be slices of the one ranking.
    const legs = [
      { text_field: 'body', text_query: 'fig elder apple' },
      { vector_field: 'emb', vector_query: [0, 1, 0.5] },
    ];
    for (const leg of legs) {
      const all = (await search({ ...leg, k: 30, window: 40 })).json.data;
      const pages = [];
      for (let offset = 0; offset < 30; offset += 7) {
        pages.push(...(await search({ ...leg, k: 7, offset, window: 40 })).json.data);
      }
      expect(pages.slice(0, 30)).toEqual(all);
      all.forEach((hit, i) => {
        expect(hit._score).toBeCloseTo(1 / (60 + i + 1), 12);
      });
    }
  });

  test('ties far past a window edge are ranked in row order, in each leg and fused', async () => {
    await db.create({
      table_name: 'ties',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'body', type: 'utf8' },
        { name: 'emb', type: 'vector', dim: 3 },
      ],
      indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'l2' }] },
    });
    // 200 rows alike in four appends: every score and every distance ties.
    for (let from = 0; from < 200; from += 50) {
      await db.append(
        'ties',
        Array.from({ length: 50 }, (_, i) => ({ id: from + i, body: 'same words here', emb: [1, 0, 0] })),
      );
    }
    const page = { table_name: 'ties', k: 10, offset: 150, projection: ['id'] };
    const legs = [
      { text_field: 'body', text_query: 'words' },
      { vector_field: 'emb', vector_query: [0.5, 0.5, 0] },
      { text_field: 'body', text_query: 'words', vector_field: 'emb', vector_query: [0.5, 0.5, 0], window: 200 },
    ];
    for (const leg of legs) {
      const res = await search({ ...page, ...leg });
      expect(res.json.data.map((h) => Number(h.id))).toEqual(Array.from({ length: 10 }, (_, i) => 150 + i));
    }
  });

  test('a filter applies to both legs before ranking', async () => {
    const res = await search({
      text_field: 'body',
      text_query: 'apple',
      vector_field: 'emb',
      vector_query: [1, 0, 0],
      k: 40,
      filter: "kind = 'odd'",
      projection: ['id', 'kind'],
    });

    expect(res.json.data.length).toBeGreaterThan(0);
    for (const hit of res.json.data) expect(hit.kind).toBe('odd');
  });

  test('k = 0 answers no rows but the schema', async () => {
    const res = await api.raw('POST', '/v1/hybrid_search/s', {
      table_name: 'docs',
      vector_field: 'emb',
      vector_query: [1, 0, 0],
      k: 0,
    });
    const { arrow } = await import('../src/arrow/arrow.js');
    const table = arrow.tableFromIPC(new Uint8Array(await res.arrayBuffer()));

    expect(table.numRows).toBe(0);
    expect(table.schema.fields.map((f) => f.name)).toEqual([
      'id',
      'body',
      'kind',
      'emb',
      '_score',
      '_bm25',
      '_distance',
    ]);
  });
});

describe('hybrid_search refusals', () => {
  test.each([
    ['no leg', { k: 3 }, /nothing to search/],
    [
      'a text field without an FTS index',
      { text_field: 'kind', text_query: 'odd', k: 3 },
      /text_field: column "kind" has no full-text index/,
    ],
    [
      'a vector field without a vector index',
      { vector_field: 'body', vector_query: [1, 2, 3], k: 3 },
      /vector_field: column "body" has no vector index/,
    ],
    [
      'a vector of the wrong length',
      { vector_field: 'emb', vector_query: [1, 2], k: 3 },
      /vector_query has 2 numbers; column "emb" has dim 3/,
    ],
    [
      'an all-zero vector under cosine',
      { vector_field: 'emb', vector_query: [0, 0, -0], k: 3 },
      /vector_query has no direction as 32-bit floats \(all zeros, or too small\): its cosine distance to any row of "emb" is undefined/,
    ],
    [
      'a vector that is zero once it is f32, under cosine',
      { vector_field: 'emb', vector_query: [1e-45, 0, 0], k: 3 },
      /vector_query has no direction as 32-bit floats/,
    ],
    [
      'a vector whose squared length is zero in f32, under cosine',
      { vector_field: 'emb', vector_query: [1e-30, 1e-30, 0], k: 3 },
      /vector_query has no direction as 32-bit floats/,
    ],
    [
      'a number past the range of f32',
      { vector_field: 'emb', vector_query: [1, 1e39, 0], k: 3 },
      /vector_query\[1\] = 1e\+39 is outside the range of a 32-bit float/,
    ],
    [
      'a vector whose squared length overflows f32',
      { vector_field: 'emb', vector_query: [1e20, 1e20, 0], k: 3 },
      /vector_query is too long: its squared length overflows a 32-bit float/,
    ],
    [
      'an unknown projection column',
      { vector_field: 'emb', vector_query: [1, 2, 3], k: 3, projection: ['id', 'nope'] },
      /projection\[1\]: no column named "nope"/,
    ],
    [
      'an unknown operator',
      { text_field: 'body', text_query: 'apple', k: 3, operator: 'xor' },
      /operator must be "or" or "and"/,
    ],
    [
      'a window below offset + k',
      { vector_field: 'emb', vector_query: [1, 2, 3], k: 5, offset: 10, window: 12 },
      /window 12 must be at least offset \+ k = 15/,
    ],
    ['k over 10000', { vector_field: 'emb', vector_query: [1, 2, 3], k: 10001 }, /body.k must be <= 10000/],
    [
      'a negative weight',
      { vector_field: 'emb', vector_query: [1, 2, 3], k: 1, vector_weight: -1 },
      /vector_weight must be >= 0/,
    ],
    ['rrf_k below 1', { vector_field: 'emb', vector_query: [1, 2, 3], k: 1, rrf_k: 0 }, /rrf_k must be >= 1/],
    [
      'a filter on an unknown column',
      { vector_field: 'emb', vector_query: [1, 2, 3], k: 1, filter: 'nope = 1' },
      /filter: no column named "nope" \(character 1\); the table's columns are /,
    ],
    [
      'a filter on the row key',
      { vector_field: 'emb', vector_query: [1, 2, 3], k: 1, filter: '_rowkey = 1' },
      /filter: no column named "_rowkey"/,
    ],
    [
      'an unknown property',
      { vector_field: 'emb', vector_query: [1, 2, 3], k: 1, fuzzy: true },
      /unknown property "fuzzy"/,
    ],
    ['no k', { vector_field: 'emb', vector_query: [1, 2, 3] }, /missing required property "k"/],
  ])('%s is 400', async (_, body, message) => {
    const res = await search(body);

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
  });

  test.each(['docs_l2', 'docs_dot'])('an all-zero vector is a query like any other for %s', async (table) => {
    const res = await search({ table_name: table, vector_field: 'emb', vector_query: [0, 0, 0], k: 3 });

    expect(res.status).toBe(200);
    expect(res.json.data).toHaveLength(3);
  });

  test('an unknown table is 404 and an Accept it cannot produce is 406', async () => {
    expect((await search({ table_name: 'nope', vector_field: 'emb', vector_query: [1, 2, 3], k: 1 })).status).toBe(404);
    const res = await api.request(
      'POST',
      '/v1/hybrid_search/s',
      { table_name: 'docs', vector_field: 'emb', vector_query: [1, 2, 3], k: 1 },
      { accept: 'text/html' },
    );
    expect(res.status).toBe(406);
  });
});

describe('analyzers (API.md §4 examples)', () => {
  test('ascii_lower splits on non-alphanumerics, lowercases and folds accents; standard keeps words whole', async () => {
    await db.create({
      table_name: 'words',
      schema: [
        { name: 'a', type: 'utf8' },
        { name: 'b', type: 'utf8' },
      ],
      indexes: { fts: ['a', { column: 'b', analyzer: 'standard' }] },
    });
    await db.append('words', [{ a: 'Café NAÏVE e-mail', b: 'Über foo_bar e-mail U.S.A.' }]);
    const hits = async (field: string, query: string) =>
      (await api.request<{ count: number }>('POST', '/v1/count/s', { table_name: 'words', field_name: field, query }))
        .json.count;

    for (const token of ['cafe', 'CAFÉ', 'naive', 'e', 'mail']) expect(await hits('a', token), token).toBe(1);
    for (const token of ['über', 'foo_bar', 'e', 'mail', 'u.s.a']) expect(await hits('b', token), token).toBe(1);
    expect(await hits('b', 'uber')).toBe(0);
    expect(await hits('b', 'foo')).toBe(0);
  });
});

describe('count, token_match and exact_match', () => {
  test('token_match returns the rows count counts, in row order, with projection and limit', async () => {
    const n = (await count({ query: 'grape' })).json.count;
    const res = await rowsOf('token_match', { field_name: 'body', query: 'grape', projection: ['id'] });
    const limited = await rowsOf('token_match', { field_name: 'body', query: 'grape', projection: ['id'], limit: 2 });

    expect(res.json.data).toHaveLength(n);
    const ids = res.json.data.map((r) => Number(r.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(limited.json.data).toEqual(res.json.data.slice(0, 2));
  });

  test('count on a field without an index is 400; an unknown table 404', async () => {
    const res = await count({ field_name: 'kind', query: 'odd' });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/no full-text index/);
    expect((await count({ table_name: 'ghost', query: 'x' })).status).toBe(404);
  });

  test('exact_match parses the value per column type and returns rows in row order', async () => {
    await db.create({
      table_name: 'typed',
      schema: [
        { name: 'i', type: 'i64' },
        { name: 'f', type: 'f32' },
        { name: 'b', type: 'bool' },
        { name: 's', type: 'utf8' },
        { name: 'd', type: 'date32' },
        { name: 't', type: 'timestamp_us' },
        { name: 'v', type: 'vector', dim: 2 },
        { name: 'l', type: 'list', item: 'i32' },
        { name: 'bin', type: 'binary' },
      ],
    });
    const rows = [
      { i: 1, f: 0.1, b: true, s: "it's", d: '2024-02-29', t: '2024-01-01T00:00:00.000001Z' },
      { i: 2, f: 0.5, b: false, s: 'x', d: '2024-03-01', t: '2024-01-01T00:00:00Z' },
      { i: 1, f: 0.1, b: true, s: "it's", d: '2024-02-29', t: '2024-01-01T00:00:00.000001Z' },
    ];
    await db.append('typed', rows);
    const match = async (field_name: string, value: string, extra: Record<string, unknown> = {}) =>
      rowsOf('exact_match', { table_name: 'typed', field_name, value, projection: ['i'], ...extra });

    expect((await match('i', '1')).json.data).toEqual([{ i: 1 }, { i: 1 }]);
    expect((await match('f', '0.1')).json.data).toEqual([{ i: 1 }, { i: 1 }]);
    expect((await match('b', 'false')).json.data).toEqual([{ i: 2 }]);
    expect((await match('s', "it's")).json.data).toEqual([{ i: 1 }, { i: 1 }]);
    expect((await match('d', '2024-03-01')).json.data).toEqual([{ i: 2 }]);
    expect((await match('t', '2024-01-01T00:00:00.000001Z')).json.data).toEqual([{ i: 1 }, { i: 1 }]);
    expect((await match('s', "x' OR '1'='1")).json.data).toEqual([]);
    expect((await match('i', '1', { limit: 1 })).json.data).toEqual([{ i: 1 }]);

    for (const [field, value, message] of [
      ['i', 'one', /is not an integer/],
      ['b', 'yes', /is not true or false/],
      ['d', '2023-02-29', /is not a date/],
      ['v', '[1,2]', /cannot compare column "v"/],
      ['l', '1', /cannot compare column "l"/],
      ['bin', 'AA==', /cannot compare column "bin"/],
      ['nope', '1', /no column named "nope"/],
    ] as const) {
      const res = await match(field, value);
      expect(res.status, field).toBe(400);
      expect(res.json.error).toMatch(message);
    }
  });
});

describe('freshness', () => {
  /** A table of id, text and a 2-d vector, with an FTS and a vector index. */
  const createSearchable = (table_name: string) =>
    db.create({
      table_name,
      schema: [
        { name: 'id', type: 'i64' },
        { name: 'body', type: 'utf8' },
        { name: 'emb', type: 'vector', dim: 2 },
      ],
      indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'l2' }] },
    });

  test('a row appended, replaced or deleted is reflected by the very next count, text and vector search', async () => {
    await createSearchable('fresh');
    const counted = async (query: string) =>
      (await api.request<{ count: number }>('POST', '/v1/count/s', { table_name: 'fresh', field_name: 'body', query }))
        .json.count;
    const nearest = async () =>
      (await search({ table_name: 'fresh', vector_field: 'emb', vector_query: [5, 5], k: 1, projection: ['id'] })).json
        .data[0]?.id;
    const textHit = async (q: string) =>
      (await search({ table_name: 'fresh', text_field: 'body', text_query: q, k: 1, projection: ['id'] })).json.data[0]
        ?.id;

    await db.append('fresh', [{ id: 1, body: 'zebra', emb: [5, 5] }]);
    expect([await counted('zebra'), await nearest(), await textHit('zebra')]).toEqual([1, 1, 1]);

    await db.update('fresh', 'id = 1', [{ id: 2, body: 'yak', emb: [5, 5] }]);
    expect([await counted('zebra'), await counted('yak'), await nearest(), await textHit('yak')]).toEqual([0, 1, 2, 2]);

    await db.remove('fresh', 'id = 2');
    expect([await counted('yak'), await nearest()]).toEqual([0, undefined]);
  });

  test('hybrid results stay the RRF of the single legs after deletes and a compaction move rows', async () => {
    // Both legs together read Lance row ids, which a compaction changes; each leg alone reads row keys.
    await createSearchable('moved');
    for (let part = 0; part < 4; part++) {
      await db.append(
        'moved',
        Array.from({ length: 10 }, (_, i) => {
          const id = part * 10 + i;
          return { id, body: WORDS.filter((_, w) => (id >> w) & 1).join(' ') || 'none', emb: [id % 7, id % 5] };
        }),
      );
    }
    const query = { table_name: 'moved', text_query: 'apple cherry', vector_query: [3, 2], window: 40 };
    const check = async () => {
      const leg = async (body: Record<string, unknown>) =>
        (await search({ ...query, ...body, k: 40, projection: ['id'] })).json.data;
      const text = await leg({ text_field: 'body', vector_query: undefined });
      const vector = await leg({ vector_field: 'emb', text_query: undefined });
      const fused = (await search({ ...query, text_field: 'body', vector_field: 'emb', k: 12, projection: ['id'] }))
        .json.data;
      const expected = rrf(text, vector, { rrfK: 60, textWeight: 1, vectorWeight: 1, k: 12 });
      expect(fused.map((h) => h.id)).toEqual(expected.map((e) => e.id));
      fused.forEach((hit, i) => {
        expect(hit._score).toBeCloseTo(expected[i]?.score ?? 0, 12);
      });
      return fused.map((h) => h.id);
    };
    const before = await check();
    await db.remove('moved', `id IN (${before.slice(0, 3).join(', ')})`);
    const { lance, close } = await openDataset(strata, 'acme', 's', 'moved');
    try {
      const fragments = (await lance.stats()).fragmentStats.numFragments;
      await lance.optimize();
      expect((await lance.stats()).fragmentStats.numFragments).toBeLessThan(fragments);
    } finally {
      close();
    }
    const after = await check();
    expect(after).not.toContain(before[0]);
    expect(after.length).toBe(12);
  });
});

describe('exact_match at its edges', () => {
  test('a match with no rows on a table with list and vector columns answers an empty stream', async () => {
    await db.create({
      table_name: 'vec',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'v', type: 'vector', dim: 4 },
        { name: 'tags', type: 'list', item: 'utf8' },
      ],
    });
    await db.append('vec', [{ id: 1 }, { id: 2 }, { id: 3 }]);

    const none = await api.request(
      'POST',
      '/v1/exact_match/s',
      { table_name: 'vec', field_name: 'id', value: '999' },
      { accept: ARROW },
    );
    const asJson = await api.request(
      'POST',
      '/v1/exact_match/s',
      { table_name: 'vec', field_name: 'id', value: '999' },
      { accept: 'application/json' },
    );

    expect(none.status).toBe(200);
    expect(asJson.json).toEqual({ data: [] });
  });

  test('exact_match on the smallest i64 finds its row', async () => {
    await db.create({ table_name: 'big', schema: [{ name: 'n', type: 'i64' }] });
    await db.append('big', [{ n: '-9223372036854775808' }, { n: '9223372036854775807' }, { n: 0 }]);

    const low = await api.post('/v1/exact_match/s', {
      table_name: 'big',
      field_name: 'n',
      value: '-9223372036854775808',
    });
    const high = await api.request(
      'POST',
      '/v1/exact_match/s',
      { table_name: 'big', field_name: 'n', value: '9223372036854775807' },
      { accept: 'application/json' },
    );

    expect(low.status).toBe(200);
    expect(high.json).toEqual({ data: [{ n: '9223372036854775807' }] });
  });

  test('a projection naming a column twice is 400', async () => {
    const res = await api.post('/v1/exact_match/s', {
      table_name: 'vec',
      field_name: 'id',
      value: '1',
      projection: ['id', 'id'],
    });

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/projection\[1\]: column "id" is listed twice/);
  });

  describe('under a cap on replies (STRATA_MAX_RESULT_BYTES)', () => {
    const capped = serveFile({ STRATA_MAX_RESULT_BYTES: '65536' }, { database: 'capped' });
    const t = tablesOf(capped.api, 'capped');

    test('a row reply over the cap is refused too', async () => {
      await t.create({ table_name: 'wide', schema: [{ name: 's', type: 'utf8' }] });
      const value = 'y'.repeat(10_000);
      // A write's reply is the rows written: never refused once they are committed, whatever the cap.
      const appended = await t.append(
        'wide',
        Array.from({ length: 10 }, () => ({ s: value })),
      );
      expect(appended.status).toBe(200);
      expect(appended.json.data).toHaveLength(10);

      const res = await capped.api.post('/v1/exact_match/capped', { table_name: 'wide', field_name: 's', value });

      expect(res.status).toBe(400);
      expect(res.json.code).toBe('result_too_large');
    });
  });
});
