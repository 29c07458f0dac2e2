import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { rowsToJson } from '../src/arrow/to-json.js';
import { activeLocalDatabase, type Client, startStrata, type TestServer } from './support/server.js';
import { ARROW, type Row, tablesOf } from './support/tables.js';

let strata: TestServer;
let api: Client;
let db: ReturnType<typeof tablesOf>;

const sqlOn = (database: string) => async (query: string) =>
  api.request<{ data: Row[]; error?: string }>(
    'POST',
    `/v1/query_sql/${database}`,
    { query },
    { accept: 'application/json' },
  );
const sql = sqlOn('q');

/** Rows of a successful query; fails the test with the service's error otherwise. */
async function rows(query: string): Promise<Row[]> {
  const reply = await sql(query);
  expect(reply.json.error, query).toBeUndefined();
  expect(reply.status).toBe(200);
  return reply.json.data;
}

const PEOPLE = [
  { id: 1, name: 'ada', team: 'eng', salary: 120.5, emb: [1, 0, 0] },
  { id: 2, name: 'bob', team: 'eng', salary: 99.25, emb: [0, 1, 0] },
  { id: 3, name: 'cy', team: 'ops', salary: 80, emb: [0, 0, 1] },
  { id: 4, name: 'di', team: 'ops', salary: null, emb: [1, 1, 0] },
  { id: 5, name: 'ed', team: 'sales', salary: 70, emb: [0.5, 0.5, 0.5] },
];
const TEAMS = [
  { team: 'eng', floor: 3 },
  { team: 'ops', floor: 1 },
  { team: 'hr', floor: 2 },
];

beforeAll(async () => {
  strata = await startStrata({ STRATA_SQL_MAX_ROWS: '5000', STRATA_SQL_TIMEOUT_MS: '1500' });
  api = await strata.as('acme');
  await activeLocalDatabase(api, 'q');
  db = tablesOf(api, 'q');
  await db.create({
    table_name: 'people',
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'name', type: 'utf8' },
      { name: 'team', type: 'utf8' },
      { name: 'salary', type: 'f64' },
      { name: 'emb', type: 'vector', dim: 3 },
    ],
  });
  await db.create({
    table_name: 'teams',
    schema: [
      { name: 'team', type: 'utf8' },
      { name: 'floor', type: 'i32' },
    ],
  });
  await db.append('people', PEOPLE);
  await db.append('teams', TEAMS);
});
afterAll(() => strata?.close());

describe('query_sql reads the database tables', () => {
  test('selects rows, and never shows the row key', async () => {
    const out = await rows('SELECT * FROM people ORDER BY id');
    expect(out).toEqual(PEOPLE);
  });

  test('joins, aggregates, window functions and CTEs', async () => {
    expect(
      await rows(
        'SELECT p.team, t.floor, count(*) AS n FROM people p JOIN teams t ON p.team = t.team GROUP BY ALL ORDER BY p.team',
      ),
    ).toEqual([
      { team: 'eng', floor: 3, n: 2 },
      { team: 'ops', floor: 1, n: 2 },
    ]);
    expect(
      await rows(
        'SELECT name, rank() OVER (PARTITION BY team ORDER BY salary DESC NULLS LAST) AS r FROM people ORDER BY id',
      ),
    ).toEqual([
      { name: 'ada', r: 1 },
      { name: 'bob', r: 2 },
      { name: 'cy', r: 1 },
      { name: 'di', r: 2 },
      { name: 'ed', r: 1 },
    ]);
    expect(
      await rows(
        'WITH rich AS (SELECT * FROM people WHERE salary > 90) SELECT sum(id) AS s, avg(salary) AS a FROM rich',
      ),
    ).toEqual([{ s: 3, a: (120.5 + 99.25) / 2 }]);
  });

  test('vector columns are arrays of floats', async () => {
    const out = await rows(
      'SELECT id, array_cosine_similarity(emb, [1, 0, 0]::FLOAT[3]) AS sim, emb[2] AS y FROM people ORDER BY sim DESC, id LIMIT 2',
    );
    expect(out[0]).toEqual({ id: 1, sim: 1, y: 0 });
    expect(out[1]?.id).toBe(4);
    expect(out[1]?.sim).toBeCloseTo(Math.SQRT1_2, 6);
  });

  test('SHOW TABLES, DESCRIBE and VALUES', async () => {
    expect(await rows('SHOW TABLES')).toEqual([{ name: 'people' }, { name: 'teams' }]);
    const described = await rows('DESCRIBE people');
    expect(described.map((r) => [r.column_name, r.column_type])).toEqual([
      ['id', 'BIGINT'],
      ['name', 'VARCHAR'],
      ['team', 'VARCHAR'],
      ['salary', 'DOUBLE'],
      ['emb', 'FLOAT[3]'],
    ]);
    expect(await rows('VALUES (1, 2), (3, 4)')).toEqual([
      { col0: 1, col1: 2 },
      { col0: 3, col1: 4 },
    ]);
  });

  test('Arrow is the default encoding', async () => {
    const res = await api.raw('POST', '/v1/query_sql/q', { query: 'SELECT id, name, emb FROM people ORDER BY id' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain(ARROW);
    const table = arrow.tableFromIPC(new Uint8Array(await res.arrayBuffer()));
    expect(table.schema.fields.map((f) => String(f.type))).toEqual(['Int64', 'Utf8', 'FixedSizeList[3]<Float32>']);
    expect(rowsToJson(table)).toEqual(PEOPLE.map(({ id, name, emb }) => ({ id, name, emb })));
  });
});
