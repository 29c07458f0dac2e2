import { beforeAll, describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { rowsToJson } from '../src/arrow/to-json.js';
import { activeLocalDatabase, serveFile } from './support/server.js';
import { ARROW, ipcOf, type Row, tablesOf } from './support/tables.js';
import { ALL_TYPES, FULL_ROW, NULL_ROW } from './support/types.js';

const sqlOn = (database: string) => async (query: string) =>
  api.request<{ data: Row[]; error?: string; code?: string }>(
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

const { strata, api } = serveFile(
  {
    STRATA_SQL_MAX_ROWS: '5000',
    STRATA_SQL_TIMEOUT_MS: '5000',
    STRATA_UPKEEP_INTERVAL_MS: '50',
  },
  { database: 'q' },
);
const db = tablesOf(api, 'q');

beforeAll(async () => {
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
    expect(described.map((r) => [r.column_name, r.column_type, r.null])).toEqual([
      ['id', 'BIGINT', 'NO'],
      ['name', 'VARCHAR', 'YES'],
      ['team', 'VARCHAR', 'YES'],
      ['salary', 'DOUBLE', 'YES'],
      ['emb', 'FLOAT[3]', 'YES'],
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

describe('query_sql refuses anything but one read-only statement', () => {
  const refused = [
    'CREATE TABLE x (a INT)',
    'CREATE TABLE x AS SELECT * FROM people',
    'INSERT INTO people (id) VALUES (99)',
    'UPDATE people SET salary = 0',
    'DELETE FROM people',
    'DROP TABLE people',
    'ALTER TABLE people ADD COLUMN z INT',
    "COPY people TO 'out.csv'",
    "COPY (SELECT 1) TO '/tmp/strata-copy.csv'",
    "EXPORT DATABASE '/tmp/strata-export'",
    "ATTACH ':memory:' AS m",
    "ATTACH '/tmp/strata-attached.duckdb' AS f",
    'INSTALL httpfs',
    'LOAD httpfs',
    "SET memory_limit = '1TB'",
    'RESET memory_limit',
    'PRAGMA version',
    "PRAGMA memory_limit = '1TB'",
    'CHECKPOINT',
    'CALL pragma_version()',
    'EXPLAIN SELECT 1',
    'SELECT 1; SELECT 2',
    'SELECT 1; DROP TABLE people',
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM read_parquet('https://example.com/x.parquet')",
    "SELECT * FROM query('CREATE TABLE y (a INT)')",
    "SELECT getenv('HOME')",
    // The loader's own table function is in DuckDB's catalog; without the load's token it serves nothing.
    "SELECT * FROM __strata_feed('0123456789abcdef0123456789abcdef')",
    '',
    '   -- only a comment',
  ];
  test.each(refused)('%s → 400', async (query) => {
    const reply = await sql(query);
    expect(reply.status, JSON.stringify(reply.json)).toBe(400);
    expect(reply.json.error).toEqual(expect.any(String));
  });

  test('refusals name what was refused', async () => {
    expect((await sql('DROP TABLE people')).json.error).toMatch(/read-only.*DROP is not allowed/);
    expect((await sql('SELECT 1; SELECT 2')).json.error).toMatch(/exactly one statement; it has 2/);
    expect((await sql("SELECT * FROM read_csv('/etc/passwd')")).json.error).toMatch(/Permission Error/);
    expect((await sql('SELECT nope FROM people')).json.error).toMatch(/Binder Error.*nope/s);
    expect((await sql('SELEKT 1')).json.error).toMatch(/SELEKT is not allowed/);
    expect((await sql('SELECT FROM WHERE')).json.error).toMatch(/Parser Error/);
    expect((await sql("SELECT * FROM __strata_feed('x')")).json.error).toMatch(/internal to the service/);
  });

  test('the server keeps its data, its health and its settings after every refusal', async () => {
    expect((await api.get('/healthz')).status).toBe(200);
    expect(await rows('SELECT count(*) AS n FROM people')).toEqual([{ n: PEOPLE.length }]);
    expect(await rows("SELECT current_setting('enable_external_access') AS v")).toEqual([{ v: false }]);
    expect(await rows("SELECT current_setting('lock_configuration') AS v")).toEqual([{ v: true }]);
    expect(await rows("SELECT current_setting('preserve_insertion_order') AS v")).toEqual([{ v: true }]);
    expect(await rows('SHOW TABLES')).toEqual([{ name: 'people' }, { name: 'teams' }]);
  });

  test("a file of the server's own is unreachable by any path", async () => {
    const { writeFile } = await import('node:fs/promises');
    const { join } = await import('node:path');
    const secret = join(strata.dataDir, 'server-secret.csv');
    await writeFile(secret, 'token\nsuper-secret-value\n');
    for (const query of [
      `SELECT * FROM '${secret}'`,
      `SELECT * FROM read_csv('${secret}')`,
      `SELECT * FROM read_csv_auto('${secret}')`,
      `SELECT content FROM read_text('${secret}')`,
      `SELECT * FROM sniff_csv('${secret}')`,
    ]) {
      const reply = await sql(query);
      expect(reply.status, query).toBe(400);
      expect(JSON.stringify(reply.json)).not.toContain('super-secret-value');
    }
  });

  test("another database's tables do not exist here, under any name", async () => {
    await activeLocalDatabase(api, 'other');
    const other = tablesOf(api, 'other');
    await other.create({ table_name: 'vault', schema: [{ name: 'secret', type: 'utf8' }] });
    await other.append('vault', [{ secret: 'other-db-secret' }]);
    expect(await sqlOn('other')('SELECT * FROM vault')).toMatchObject({
      status: 200,
      json: { data: [{ secret: 'other-db-secret' }] },
    });
    for (const query of [
      'SELECT * FROM vault',
      'SELECT * FROM other.vault',
      'SELECT * FROM other.main.vault',
      "SELECT * FROM query_table('vault')",
    ]) {
      const reply = await sql(query);
      expect(reply.status, query).toBe(400);
      expect(JSON.stringify(reply.json)).not.toContain('other-db-secret');
    }
    // Nor does another account's database, by its name.
    const intruder = await strata.as('intruder');
    const reply = await intruder.request('POST', '/v1/query_sql/other', { query: 'SELECT * FROM vault' });
    expect(reply.status).toBe(404);
  });

  test('unknown database 404, unverified 409, unknown fields 400, no key 401, unacceptable Accept 406', async () => {
    expect((await sqlOn('nope')('SELECT 1')).status).toBe(404);
    await api.post('/v1/databases', { name: 'unproven', storage: { provider: 'local', bucket: 'unproven' } });
    const unverified = await sqlOn('unproven')('SELECT 1');
    expect(unverified.status).toBe(409);
    expect(unverified.json.error).toMatch(/not verified yet/);
    expect(unverified.json.code).toBe('database_not_verified');
    expect((await api.request('POST', '/v1/query_sql/q', { query: 'SELECT 1', extra: 1 })).status).toBe(400);
    expect((await api.request('POST', '/v1/query_sql/q', {})).status).toBe(400);
    expect((await strata.withAuth(undefined).request('POST', '/v1/query_sql/q', { query: 'SELECT 1' })).status).toBe(
      401,
    );
    const res = await api.raw('POST', '/v1/query_sql/q', { query: 'SELECT 1' }, { accept: 'text/csv' });
    expect(res.status).toBe(406);
  });
});

describe('query_sql sees every write at once', () => {
  const fresh = 'fresh';
  beforeAll(async () => {
    await db.create({
      table_name: fresh,
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'v', type: 'utf8' },
      ],
    });
  });
  const all = () => rows(`SELECT id, v FROM ${fresh} ORDER BY id`);

  test('append, append again, replace, delete, drop and create', async () => {
    expect(await all()).toEqual([]);
    await db.append(fresh, [
      { id: 1, v: 'a' },
      { id: 2, v: 'b' },
    ]);
    expect(await all()).toEqual([
      { id: 1, v: 'a' },
      { id: 2, v: 'b' },
    ]);
    await db.append(fresh, [{ id: 3, v: 'c' }]);
    expect(await all()).toEqual([
      { id: 1, v: 'a' },
      { id: 2, v: 'b' },
      { id: 3, v: 'c' },
    ]);
    await db.update(fresh, 'id = 2', [{ id: 2, v: 'B' }]);
    expect(await all()).toEqual([
      { id: 1, v: 'a' },
      { id: 2, v: 'B' },
      { id: 3, v: 'c' },
    ]);
    await db.append(fresh, [{ id: 4, v: 'd' }]);
    expect(await all()).toEqual([
      { id: 1, v: 'a' },
      { id: 2, v: 'B' },
      { id: 3, v: 'c' },
      { id: 4, v: 'd' },
    ]);
    await db.remove(fresh, 'id < 3');
    expect(await all()).toEqual([
      { id: 3, v: 'c' },
      { id: 4, v: 'd' },
    ]);

    await db.drop(fresh);
    const gone = await sql(`SELECT * FROM ${fresh}`);
    expect(gone.status).toBe(400);
    expect(gone.json.error).toMatch(/fresh.*does not exist/);
    await db.create({
      table_name: fresh,
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'v', type: 'utf8' },
      ],
    });
    expect(await all()).toEqual([]);
    await db.append(fresh, [{ id: 9, v: 'z' }]);
    expect(await all()).toEqual([{ id: 9, v: 'z' }]);
  });

  test('many appends with index upkeep between them load every row exactly once', async () => {
    await db.create({
      table_name: 'grow',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'w', type: 'utf8' },
      ],
      indexes: { fts: ['w'] },
    });
    let expected = 0;
    for (let round = 0; round < 6; round++) {
      const batch = Array.from({ length: 50 }, (_, i) => ({ id: round * 50 + i, w: `word${i % 5}` }));
      await db.append('grow', batch);
      expected += batch.length;
      // Upkeep runs every 50 ms here: let it fold the new rows (new Lance versions with the same rows).
      if (round % 2 === 1) await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await rows('SELECT count(*) AS n, count(DISTINCT id) AS d, sum(id) AS s FROM grow')).toEqual([
        { n: expected, d: expected, s: (expected * (expected - 1)) / 2 },
      ]);
    }
  });
});

describe('query_sql loads vector and list columns only for statements that read them', () => {
  const lazy = 'lazy';
  const LAZY = [
    { id: 1, tag: 'a', emb: [1, 0], marks: [1, 2] },
    { id: 2, tag: 'b', emb: [0, 1], marks: [] },
  ];
  /** The table afresh, and a first statement that loads it without its vector and list columns. */
  const recreate = async () => {
    await db.drop(lazy).catch(() => undefined);
    await db.create({
      table_name: lazy,
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'tag', type: 'utf8' },
        { name: 'emb', type: 'vector', dim: 2 },
        { name: 'marks', type: 'list', item: 'i32' },
      ],
    });
    await db.append(lazy, LAZY);
    expect(await rows(`SELECT count(*) AS n, max(tag) AS t FROM ${lazy}`)).toEqual([{ n: 2, t: 'b' }]);
  };

  test('a copy made without them is made again whole when a statement reads them, appends included', async () => {
    await recreate();
    await db.append(lazy, [{ id: 3, tag: 'c', emb: [0.5, 0.5], marks: [3] }]);
    expect(await rows(`SELECT count(*) AS n FROM ${lazy}`)).toEqual([{ n: 3 }]);
    expect(await rows(`SELECT id, emb[1] AS e FROM ${lazy} ORDER BY id`)).toEqual([
      { id: 1, e: 1 },
      { id: 2, e: 0 },
      { id: 3, e: 0.5 },
    ]);
    await db.append(lazy, [{ id: 4, tag: 'd', emb: [2, 2], marks: null }]);
    expect(await rows(`SELECT id, marks FROM ${lazy} WHERE id >= 3 ORDER BY id`)).toEqual([
      { id: 3, marks: [3] },
      { id: 4, marks: null },
    ]);
  });

  test('every way of reading a row whole sees them', async () => {
    for (const query of [
      `SELECT * FROM ${lazy} ORDER BY id`,
      `SELECT l.* FROM ${lazy} l ORDER BY id`,
      `FROM ${lazy} ORDER BY id`,
    ]) {
      await recreate();
      expect(await rows(query), query).toEqual(LAZY);
    }
    await recreate();
    const whole = await rows(`SELECT to_json(l) AS j FROM ${lazy} l ORDER BY id`);
    expect(JSON.parse(String(whole[0]?.j))).toEqual(LAZY[0]);
  });

  test("a word of the catalog's inside a string is only a string", async () => {
    await recreate();
    expect(await rows(`SELECT count(*) AS n FROM ${lazy} WHERE tag <> 'show describe'`)).toEqual([{ n: 2 }]);
    expect(await rows(`SELECT emb FROM ${lazy} WHERE tag = 'b'`)).toEqual([{ emb: [0, 1] }]);
  });

  test('the catalog shows them for a copy made without them', async () => {
    await recreate();
    const listed = await rows(
      "SELECT column_name FROM information_schema.columns WHERE table_name = 'lazy' ORDER BY ordinal_position",
    );
    expect(listed.map((c) => c.column_name)).toEqual(['id', 'tag', 'emb', 'marks']);
    await recreate();
    const described = await rows(`DESCRIBE ${lazy}`);
    expect(described.map((c) => c.column_name)).toEqual(['id', 'tag', 'emb', 'marks']);
  });
});

describe('query_sql loads tables larger than one load segment', () => {
  // A load reads and inserts segments of STRATA_SQL_THREADS × 122,880 rows, the next read while one is inserted.
  const batchOf = (from: number, n: number) =>
    ipcOf(
      new arrow.Table({
        id: arrow.vectorFromArray(
          Array.from({ length: n }, (_, i) => BigInt(from + i)),
          new arrow.Int64(),
        ),
        tag: arrow.vectorFromArray(
          Array.from({ length: n }, (_, i) => ((from + i) % 3 === 0 ? null : `t${(from + i) % 7}`)),
          new arrow.Utf8(),
        ),
      }),
    );
  const summary = () =>
    rows(`SELECT count(*) AS n, count(DISTINCT id) AS d, sum(id) AS s, count(tag) AS tagged,
                 count(DISTINCT tag) AS tags, max(id) AS top FROM big`);
  const expected = (n: number) => ({
    n,
    d: n,
    s: (n * (n - 1)) / 2,
    tagged: n - Math.ceil(n / 3),
    tags: 7,
    top: n - 1,
  });

  test('every row of a 600k-row table goes in once, and 250k more appended after go in once', async () => {
    await db.create({
      table_name: 'big',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'tag', type: 'utf8' },
      ],
    });
    expect((await db.appendArrow('big', batchOf(0, 600_000), ARROW)).status).toBe(200);
    expect(await summary()).toEqual([expected(600_000)]);
    expect((await db.appendArrow('big', batchOf(600_000, 250_000), ARROW)).status).toBe(200);
    expect(await summary()).toEqual([expected(850_000)]);
  });
});

describe('query_sql limits', () => {
  test('a query over the time limit is interrupted with 408, and nothing else waits for it', async () => {
    const started = Date.now();
    const slow = sql('SELECT sum(a.range * b.range) AS s FROM range(200000) a, range(200000) b');
    const other = await sqlOn('other')('SELECT count(*) AS n FROM vault');
    expect(other.status).toBe(200);
    const reply = await slow;
    expect(reply.status).toBe(408);
    expect(reply.json.error).toMatch(/time limit of 5000 ms/);
    expect(reply.json.code).toBe('sql_timeout');
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(await rows('SELECT 1 AS one')).toEqual([{ one: 1 }]);
  });

  test('a result over the row cap is 400 that says so; at the cap it is whole', async () => {
    const over = await sql('SELECT * FROM range(5001)');
    expect(over.status).toBe(400);
    expect(over.json.error).toMatch(/more than 5000 rows \(STRATA_SQL_MAX_ROWS\)/);
    expect((await rows('SELECT * FROM range(5000)')).length).toBe(5000);
  });
});

describe('query_sql reads every type back', () => {
  beforeAll(async () => {
    await db.create({ table_name: 'typed', schema: ALL_TYPES });
    await db.append('typed', [FULL_ROW, NULL_ROW]);
  });

  test('every JSON type of API.md §4, in JSON', async () => {
    expect(await rows('SELECT * FROM typed ORDER BY id DESC')).toEqual([FULL_ROW, NULL_ROW]);
  });

  test('every JSON type of API.md §4, in Arrow', async () => {
    const res = await api.raw('POST', '/v1/query_sql/q', { query: 'SELECT * FROM typed ORDER BY id DESC' });
    expect(res.status).toBe(200);
    const table = arrow.tableFromIPC(new Uint8Array(await res.arrayBuffer()));
    expect(rowsToJson(table)).toEqual([FULL_ROW, NULL_ROW]);
    const types = Object.fromEntries(table.schema.fields.map((f) => [f.name, String(f.type)]));
    expect(types).toMatchObject({ id: 'Int64', u64: 'Uint64', f16: 'Float32', v: 'FixedSizeList[3]<Float32>' });
    expect(types.tags).toMatch(/^List<Utf8>$/);
  });

  test('values compute as their types: integer limits, NaN, dates, timestamps, binary, lists', async () => {
    expect(
      await rows(
        `SELECT id + 0 AS id, u64 // 2 AS half, isnan(f64) AS nan, d + 1 AS next_day, epoch_ms(tms) AS ms,
                octet_length(bin) AS bytes, len(tags) AS n, tags[3] AS third, v[2] AS v2, upper(s) AS up
         FROM typed WHERE i8 = -128`,
      ),
    ).toEqual([
      {
        id: '9223372036854775807',
        half: '9223372036854775807',
        nan: true,
        next_day: '2024-03-01',
        ms: 1704164645678,
        bytes: 5,
        n: 3,
        third: 'c',
        v2: -2.5,
        up: 'CAFÉ 🚀',
      },
    ]);
  });

  test('empty and nested results keep their column types in Arrow', async () => {
    const res = await api.raw('POST', '/v1/query_sql/q', {
      query: 'SELECT []::HUGEINT[] AS e, [[1::HUGEINT]] AS n, sum(id) AS s FROM people',
    });
    expect(res.status).toBe(200);
    const table = arrow.tableFromIPC(new Uint8Array(await res.arrayBuffer()));
    expect(table.schema.fields.map((f) => String(f.type))).toEqual([
      'List<Decimal[38e0]>',
      'List<List<Decimal[38e0]>>',
      'Int64',
    ]);
    expect(rowsToJson(table)).toEqual([{ e: [], n: [['1']], s: 15 }]);
  });

  test('results of SQL types a table cannot hold come back too', async () => {
    expect(
      await rows(
        `SELECT 12345678901234567890123::HUGEINT AS huge, sum(x) AS total, 1.25::DECIMAL(10, 2) AS dec,
                {'a': 1, 'b': 'x'} AS st, [[1, 2], [3]] AS nested, INTERVAL 90 MINUTE AS span,
                '00000000-0000-0000-0000-000000000001'::UUID AS id, TIME '10:11:12.5' AS t, NULL AS nothing
         FROM (VALUES (1), (2)) v(x)`,
      ),
    ).toEqual([
      {
        huge: '12345678901234567890123',
        total: 3,
        dec: '1.25',
        st: { a: 1, b: 'x' },
        nested: [[1, 2], [3]],
        span: '01:30:00',
        id: '00000000-0000-0000-0000-000000000001',
        t: expect.any(Number),
        nothing: null,
      },
    ]);
  });
});

test('deleting a database while its SQL runs lets the query end on its own terms first, and the server stays up', async () => {
  await activeLocalDatabase(api, 'doomed');
  const slow = sqlOn('doomed')('SELECT sum(a.range * b.range) AS s FROM range(300000) a, range(300000) b');
  await new Promise((resolve) => setTimeout(resolve, 300));
  // Calls in flight get up to 10 s to finish before the database's worker closes (docs/api.md): this one ends
  // at its time limit, then the deletion.
  const deleted = api.del('/v1/databases/doomed');
  const reply = await slow;
  expect(reply.status).toBe(408);
  expect(reply.json.code).toBe('sql_timeout');
  expect((await deleted).status).toBe(200);
  expect((await sqlOn('doomed')('SELECT 1 AS one')).json.code).toBe('unknown_database');
  expect((await api.get('/healthz')).status).toBe(200);
  expect(await rows('SELECT 1 AS one')).toEqual([{ one: 1 }]);
});

test('a table dropped while a query or a search reads it gives 200, 400 or 404, never 500', async () => {
  const rowsOf = Array.from({ length: 3000 }, (_, i) => ({ id: i, v: `value ${i}`.repeat(4) }));
  for (let round = 0; round < 3; round++) {
    const name = `racing${round}`;
    await db.create({
      table_name: name,
      schema: [
        { name: 'id', type: 'i64' },
        { name: 'v', type: 'utf8' },
      ],
    });
    await db.append(name, rowsOf);
    const query = sql(`SELECT count(*) AS n FROM ${name}`);
    const match = api.request('POST', '/v1/exact_match/q', { table_name: name, field_name: 'id', value: '7' });
    await new Promise((resolve) => setTimeout(resolve, round * 3));
    const dropped = db.drop(name, true);
    const [reply, drop, matched] = await Promise.all([query, dropped, match]);
    expect([200, 404], JSON.stringify(matched.json)).toContain(matched.status);
    expect(drop.status, JSON.stringify(drop.json)).toBe(200);
    expect([200, 400], JSON.stringify(reply.json)).toContain(reply.status);
    if (reply.status === 200) expect(reply.json.data).toEqual([{ n: rowsOf.length }]);
  }
  expect(await rows('SELECT 1 AS one')).toEqual([{ one: 1 }]);
});

test('queries during replaces and reloads each see one consistent version', async () => {
  await db.create({
    table_name: 'ledger',
    schema: [
      { name: 'side', type: 'utf8', nullable: false },
      { name: 'amount', type: 'i64', nullable: false },
    ],
  });
  await db.append('ledger', [
    { side: 'a', amount: 0 },
    { side: 'b', amount: 0 },
  ]);
  // Every version of the table has two rows summing to zero; a query that mixed two versions would not.
  const writer = (async () => {
    for (let x = 1; x <= 12; x++) {
      const res = await db.update('ledger', "side IN ('a', 'b')", [
        { side: 'a', amount: x },
        { side: 'b', amount: -x },
      ]);
      expect(res.status).toBe(200);
    }
  })();
  const seen: Row[] = [];
  const reader = (async () => {
    for (let i = 0; i < 25; i++) seen.push(...(await rows('SELECT count(*) AS n, sum(amount) AS s FROM ledger')));
  })();
  await Promise.all([writer, reader]);
  expect(seen.length).toBe(25);
  for (const row of seen) expect(row).toEqual({ n: 2, s: 0 });
  expect(await rows('SELECT amount FROM ledger ORDER BY side')).toEqual([{ amount: 12 }, { amount: -12 }]);
});

describe('query_sql answers values JavaScript cannot hold', () => {
  test('dates beyond the range of JavaScript dates are written as ISO 8601 extended years', async () => {
    const res = await api.request(
      'POST',
      '/v1/query_sql/q',
      {
        query: "SELECT DATE '-5877641-06-25' AS d, DATE '300000-01-01' AS e, TIMESTAMP '2024-02-29 12:34:56.789' AS t",
      },
      { accept: 'application/json' },
    );

    expect(res.json.error).toBeUndefined();
    expect(res.json).toEqual({
      data: [{ d: '-5877641-06-25', e: '+300000-01-01', t: '2024-02-29T12:34:56.789000Z' }],
    });
  });
});

describe('query_sql under a cap on replies (STRATA_MAX_RESULT_BYTES)', () => {
  const capped = serveFile({ STRATA_MAX_RESULT_BYTES: '65536' }, { database: 'capped' });

  test('a SQL result over STRATA_MAX_RESULT_BYTES is 400 result_too_large naming the cap', async () => {
    const big = await capped.api.post('/v1/query_sql/capped', {
      query: "SELECT range AS n, repeat('x', 100) AS s FROM range(100000)",
    });
    const oneValue = await capped.api.request(
      'POST',
      '/v1/query_sql/capped',
      { query: "SELECT repeat('x', 200000) AS s" },
      { accept: 'application/json' },
    );

    expect(big.status).toBe(400);
    expect(big.json.code).toBe('result_too_large');
    expect(big.json.error).toMatch(/65536-byte cap/);
    expect(oneValue.status).toBe(400);
    expect(oneValue.json.code).toBe('result_too_large');
  });
});
