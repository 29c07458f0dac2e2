import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { rememberSecret } from './support/logs.js';
import { cli, type Served, serveProcess } from './support/processes.js';
import { activeLocalDatabase, type Client, client } from './support/server.js';

/**
 * `strata load` of files as users have them, against a real server: every column type DuckDB reads from Parquet,
 * CSV and JSON Lines loads under the service's own spelling with its values; paths with pattern characters are
 * paths; bad rows are refused with the file's row, the column and the value.
 * Slow: about 12–17 s, a `strata load` process per file against a `strata serve` process.
 */

const KEY = `sk_${'f'.repeat(43)}`;
const dir = mkdtempSync(join(tmpdir(), 'strata-load-files-'));
let server: Served;
let api: Client;

const file = (name: string) => join(dir, name);
const env = () => ({ STRATA_URL: server.url, STRATA_API_KEY: KEY, XDG_STATE_HOME: join(dir, 'state') });

/** `strata load FILE --database db --table TABLE [more]`, its exit code and stderr whether it failed or not. */
async function load(path: string, table: string, more: string[] = ['--create']) {
  return cli(['load', path, '--database', 'db', '--table', table, ...more], env()).then(
    (done) => ({ code: 0, stderr: done.stderr }),
    (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
  );
}

async function duckdb(statements: string[]): Promise<void> {
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  for (const statement of statements) await connection.run(statement);
  connection.closeSync();
  instance.closeSync();
}

async function sql(query: string): Promise<Record<string, unknown>[]> {
  const res = await api.request<{ data: Record<string, unknown>[] }>(
    'POST',
    '/v1/query_sql/db',
    { query },
    { accept: 'application/json' },
  );
  if (res.status !== 200) throw new Error(`${res.status} ${JSON.stringify(res.json)}`);
  return res.json.data;
}

/** The table's columns as the service describes them: name → type (list<item>, vector[dim]). */
async function spellings(table: string): Promise<Record<string, string>> {
  const res = await api.request<{ name: string; type: string; item?: string; dim?: number }[]>(
    'POST',
    '/v1/schema/db',
    { table_name: table },
  );
  return Object.fromEntries(
    res.json.map((c) => [
      c.name,
      c.item !== undefined ? `list<${c.item}>` : c.dim !== undefined ? `vector[${c.dim}]` : c.type,
    ]),
  );
}

const tableExists = async (table: string) =>
  (await api.request<{ tables: { table_name: string }[] }>('POST', '/v1/list_tables/db')).json.tables.some(
    (t) => t.table_name === table,
  );

beforeAll(async () => {
  rememberSecret(KEY);
  server = await serveProcess(join(dir, 'data'), { STRATA_BOOTSTRAP_KEY: KEY });
  api = client(server.url, `Bearer ${KEY}`);
  await activeLocalDatabase(api, 'db');
}, 120_000);

afterAll(() => {
  server?.child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** A row of every type DuckDB writes to Parquet, then a row of nulls. */
const EVERY_TYPE = `SELECT * FROM (VALUES
  (true, -8::TINYINT, -16::SMALLINT, -32::INTEGER, -64::BIGINT, 8::UTINYINT, 16::USMALLINT, 32::UINTEGER,
   64::UBIGINT, 1.5::FLOAT, 2.25::DOUBLE, 12.34::DECIMAL(10,2), 7 * 1.5, 1234567890123456789.12::DECIMAL(38,2),
   170141183460469231731687303715884105727::HUGEINT, 'text', '\\xAA\\xBB'::BLOB, DATE '2024-02-29',
   TIME '12:34:56', TIMESTAMP '2024-02-29 12:34:56.123456', TIMESTAMP_S '2024-02-29 12:34:56',
   TIMESTAMP_MS '2024-02-29 12:34:56.789', TIMESTAMP_NS '2024-02-29 12:34:56.123456789',
   TIMESTAMPTZ '2024-02-29 12:34:56.5+00', INTERVAL 90 MINUTE, '3e1b2c4d-0000-4000-8000-000000000001'::UUID,
   [1, 2, 3], {'a': 1, 'b': 'x'}, MAP {'k': 1}, [1.25, 2.5]::DECIMAL(10,2)[]),
  (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
) t(b, i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, money, price, big_money, huge, s, bin, d, tod, ts, ts_s,
    ts_ms, ts_ns, tstz, span, id, ints, obj, dict, prices)`;

describe('types: the service spelling of every type DuckDB reads, with the values', () => {
  test('Parquet', async () => {
    await duckdb([`COPY (${EVERY_TYPE}) TO '${file('types.parquet')}' (FORMAT PARQUET)`]);

    const loaded = await load(file('types.parquet'), 'parquet_types');

    expect(loaded.code, loaded.stderr).toBe(0);
    expect(loaded.stderr).toMatch(/note: column "money" DECIMAL\(10,2\): .* loaded as f64/);
    expect(loaded.stderr).toMatch(/note: column "big_money" DECIMAL\(38,2\) with values of more than 15 digits/);
    expect(await spellings('parquet_types')).toEqual({
      b: 'bool',
      i8: 'i8',
      i16: 'i16',
      i32: 'i32',
      i64: 'i64',
      u8: 'u8',
      u16: 'u16',
      u32: 'u32',
      u64: 'u64',
      f32: 'f32',
      f64: 'f64',
      money: 'f64',
      price: 'f64',
      big_money: 'utf8',
      // DuckDB writes a HUGEINT to Parquet as a DOUBLE (Parquet has no 128-bit integer).
      huge: 'f64',
      s: 'utf8',
      bin: 'binary',
      d: 'date32',
      tod: 'utf8',
      ts: 'timestamp_us',
      // DuckDB writes TIMESTAMP_S and TIMESTAMP_MS to Parquet as microseconds.
      ts_s: 'timestamp_us',
      ts_ms: 'timestamp_us',
      ts_ns: 'timestamp_us',
      tstz: 'timestamp_us',
      span: 'utf8',
      id: 'utf8',
      ints: 'list<i32>',
      obj: 'utf8',
      dict: 'utf8',
      prices: 'list<f64>',
    });
    const [values, nulls] = await sql(
      'SELECT * EXCLUDE (bin), base64(bin) AS bin FROM parquet_types ORDER BY b NULLS LAST',
    );
    expect(values).toMatchObject({
      b: true,
      i8: -8,
      u64: 64,
      f32: 1.5,
      money: 12.34,
      price: 10.5,
      big_money: '1234567890123456789.12',
      huge: 1.7014118346046923e38,
      s: 'text',
      bin: 'qrs=',
      tod: '12:34:56',
      ts: '2024-02-29T12:34:56.123456Z',
      ts_ms: '2024-02-29T12:34:56.789000Z',
      ts_ns: '2024-02-29T12:34:56.123456Z',
      tstz: '2024-02-29T12:34:56.500000Z',
      span: '01:30:00',
      id: '3e1b2c4d-0000-4000-8000-000000000001',
      ints: [1, 2, 3],
      obj: '{"a":1,"b":"x"}',
      dict: '{"k":1}',
      prices: [1.25, 2.5],
    });
    expect(Object.values(nulls ?? {}).every((value) => value === null)).toBe(true);
  }, 60_000);

  test('CSV, as DuckDB detects its types', async () => {
    writeFileSync(
      file('types.csv'),
      'flag,n,x,money,day,tod,seen,name\n' +
        'true,1,1.5,12.50,2024-02-29,12:34:56,2024-02-29 12:34:56,alpha\n' +
        'false,2,2.5,3.10,2024-03-01,01:02:03,2024-03-01 01:02:03,"beta, with a comma"\n',
    );

    const loaded = await load(file('types.csv'), 'csv_types');

    expect(loaded.code, loaded.stderr).toBe(0);
    expect(await spellings('csv_types')).toEqual({
      flag: 'bool',
      n: 'i64',
      x: 'f64',
      money: 'f64',
      day: 'date32',
      tod: 'utf8',
      seen: 'timestamp_us',
      name: 'utf8',
    });
    expect(
      await sql("SELECT money, tod, strftime(seen, '%Y-%m-%d %H:%M:%S') AS seen, name FROM csv_types ORDER BY n"),
    ).toEqual([
      { money: 12.5, tod: '12:34:56', seen: '2024-02-29 12:34:56', name: 'alpha' },
      { money: 3.1, tod: '01:02:03', seen: '2024-03-01 01:02:03', name: 'beta, with a comma' },
    ]);
  }, 60_000);

  test('JSON Lines, as DuckDB detects its types', async () => {
    writeFileSync(
      file('types.jsonl'),
      '{"flag":true,"n":1,"x":1.5,"day":"2024-02-29","at":"2024-02-29T12:34:56","name":"a","tags":["x","y"],' +
        '"obj":{"k":1},"big":12345678901234567890}\n' +
        '{"flag":false,"n":2,"x":2.5,"day":"2024-03-01","at":"2024-03-01T01:02:03","name":null,"tags":[],' +
        '"obj":{"k":2},"big":1}\n',
    );

    const loaded = await load(file('types.jsonl'), 'json_types');

    expect(loaded.code, loaded.stderr).toBe(0);
    expect(await spellings('json_types')).toEqual({
      flag: 'bool',
      n: 'i64',
      x: 'f64',
      day: 'date32',
      at: 'timestamp_us',
      name: 'utf8',
      tags: 'list<utf8>',
      obj: 'utf8',
      big: expect.stringMatching(/^(u64|f64|utf8)$/),
    });
    expect(await sql('SELECT n, tags, obj FROM json_types ORDER BY n')).toEqual([
      { n: 1, tags: ['x', 'y'], obj: '{"k":1}' },
      { n: 2, tags: [], obj: '{"k":2}' },
    ]);
  }, 60_000);
});

describe('a path is a path', () => {
  test("'a[1].csv' loads that file, not a1.csv; 'b*.csv' loads the file of that name, not every match", async () => {
    writeFileSync(file('a1.csv'), 'id,name\n1,from a1\n');
    writeFileSync(file('a[1].csv'), 'id,name\n2,from the brackets\n');
    writeFileSync(file('b1.csv'), 'id,name\n3,b1\n');
    writeFileSync(file('b2.csv'), 'id,name\n4,b2\n');

    expect((await load(file('a[1].csv'), 'brackets')).code).toBe(0);
    expect(await sql('SELECT id, name FROM brackets')).toEqual([{ id: 2, name: 'from the brackets' }]);

    const star = await load(file('b*.csv'), 'star');
    expect(star).toMatchObject({ code: 1, stderr: expect.stringMatching(/b\*\.csv: no such file/) });
    expect(await tableExists('star')).toBe(false);

    writeFileSync(file('b*.csv'), 'id,name\n5,the star itself\n');
    expect((await load(file('b*.csv'), 'star')).code).toBe(0);
    expect(await sql('SELECT id, name FROM star')).toEqual([{ id: 5, name: 'the star itself' }]);
  }, 60_000);
});

describe('bad rows are refused with the row, the column and the value', () => {
  test('--create refuses to make a column text because one row is not a number', async () => {
    const rows = Array.from({ length: 200 }, (_, i) => `${i},${i === 56 ? 'abc' : (i * 1.25).toFixed(2)}`);
    writeFileSync(file('one-bad.csv'), `id,price\n${rows.join('\n')}\n`);

    const refused = await load(file('one-bad.csv'), 'one_bad');

    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /one-bad\.csv: row 57, column "price": "abc" is not a number, as its other 199 values are\. --create will not make the column text/,
    );
    expect(refused.stderr).not.toMatch(/usage:/);
    expect(await tableExists('one_bad')).toBe(false);
  }, 60_000);

  test("a CSV value past DuckDB's sample that is not of its column's type", async () => {
    const rows = Array.from({ length: 30_000 }, (_, i) => `${i},${i === 29_999 ? 'n/a' : i * 2}`);
    writeFileSync(file('late-bad.csv'), `id,price\n${rows.join('\n')}\n`);

    const refused = await load(file('late-bad.csv'), 'late_bad');

    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/late-bad\.csv: row 30000, column "price": "n\/a" is not a whole number/);
    expect(refused.stderr).not.toMatch(/sniff|Possible solutions|usage:|SELECT|CAST/i);
  }, 60_000);

  test('a CSV row of another width is refused with its line, not loaded as one column of text', async () => {
    writeFileSync(file('wide-row.csv'), 'id,name\n1,a\n2,b,extra\n3,c\n');

    const refused = await load(file('wide-row.csv'), 'wide_row');

    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /wide-row\.csv: line 3: Expected Number of Columns: 2 Found: 3 \(the line: "2,b,extra"\)/,
    );
    expect(await tableExists('wide_row')).toBe(false);
  }, 60_000);

  test('a vector of the wrong length, and one that is not a list of numbers', async () => {
    writeFileSync(
      file('vectors.jsonl'),
      ['{"id":1,"emb":[1,0,0]}', '{"id":2,"emb":[0,1,0]}', '{"id":3,"emb":[0,1]}'].map((l) => `${l}\n`).join(''),
    );
    const short = await load(file('vectors.jsonl'), 'short_vectors', ['--create', '--vector', 'emb:cosine']);
    expect(short.code).toBe(1);
    expect(short.stderr).toMatch(
      /vectors\.jsonl: row 3, column "emb": a vector of 2 numbers \(\[0, 1\]\); the column's vectors have 3/,
    );
    expect(short.stderr).not.toMatch(/usage:|CAST|Conversion Error/);

    writeFileSync(file('vectors.csv'), 'id,emb\n1,"[1, 0, 0]"\n2,"oops"\n');
    const text = await load(file('vectors.csv'), 'text_vectors', ['--create', '--vector', 'emb:cosine']);
    expect(text.code).toBe(1);
    expect(text.stderr).toMatch(/vectors\.csv: row 2, column "emb": "oops" is not a list of numbers/);
  }, 60_000);
});
