import { DuckDBInstance } from '@duckdb/node-api';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { serveFile } from './support/server.js';
import { type Row, tablesOf } from './support/tables.js';

/**
 * Random SELECTs over random tables give through query_sql what the same SELECT gives on a DuckDB the test
 * loads itself, with SQL literals, from the same rows: the loading, the type mapping and the result
 * encoding of the service are all on trial, the engine is not.
 */

let reference: DuckDBInstance;

const { api } = serveFile({}, { account: 'prop', database: 'p' });

beforeAll(async () => {
  reference = await DuckDBInstance.create(':memory:');
});
afterAll(async () => {
  reference?.closeSync();
});

type Kind = 'i64' | 'i32' | 'f64' | 'utf8' | 'bool' | 'date32' | 'list_i32';

const SQL_TYPE: Record<Kind, string> = {
  i64: 'BIGINT',
  i32: 'INTEGER',
  f64: 'DOUBLE',
  utf8: 'VARCHAR',
  bool: 'BOOLEAN',
  date32: 'DATE',
  list_i32: 'INTEGER[]',
};

const CHARS = ['a', 'b', 'Z', ' ', "'", '"', '\\', 'é', '🚀', '0'];

const VALUES_OF: Record<Kind, fc.Arbitrary<unknown>> = {
  i64: fc.integer({ min: -1e9, max: 1e9 }),
  i32: fc.integer({ min: -1000, max: 1000 }),
  f64: fc.double({ min: -1e6, max: 1e6, noNaN: true }).map((x) => (Object.is(x, -0) ? 0 : x)),
  utf8: fc.array(fc.constantFrom(...CHARS), { maxLength: 6 }).map((cs) => cs.join('')),
  bool: fc.boolean(),
  date32: fc
    .integer({ min: -20_000, max: 40_000 })
    .map((days) => new Date(days * 86_400_000).toISOString().slice(0, 10)),
  list_i32: fc.array(fc.integer({ min: -50, max: 50 }), { maxLength: 4 }),
};

function literal(kind: Kind, value: unknown): string {
  if (value === null) return 'NULL';
  switch (kind) {
    case 'utf8':
      return `'${String(value).replaceAll("'", "''")}'`;
    case 'date32':
      return `DATE '${String(value)}'`;
    case 'list_i32':
      return `[${(value as number[]).join(', ')}]::INTEGER[]`;
    case 'f64':
      // Quoted: an unquoted literal is read as DECIMAL first and can round differently on its way to DOUBLE.
      return `'${String(value)}'::DOUBLE`;
    default:
      return String(value);
  }
}

const tableArb = fc
  .array(fc.constantFrom<Kind>('i64', 'i32', 'f64', 'utf8', 'bool', 'date32', 'list_i32'), {
    minLength: 1,
    maxLength: 5,
  })
  .chain((kinds) =>
    fc.record({
      kinds: fc.constant(kinds),
      rows: fc.array(fc.tuple(...kinds.map((k) => fc.option(VALUES_OF[k], { freq: 5 }))), { maxLength: 40 }),
      query: fc.integer({ min: 0, max: 1000 }),
    }),
  );

/** A SELECT over the table, picked by `n` among shapes that exercise projection, filters and aggregates. */
function queryOf(n: number, table: string, kinds: readonly Kind[]): string {
  const c = (i: number) => `c${i % kinds.length}`;
  const col = c(n);
  const kind = kinds[n % kinds.length] as Kind;
  const numeric = kinds.findIndex((k) => k === 'i64' || k === 'i32');
  const shapes = [
    `SELECT * FROM ${table} ORDER BY ALL`,
    `SELECT ${col}, count(*) AS n FROM ${table} GROUP BY ${col} ORDER BY ALL`,
    `SELECT count(*) AS n, count(${col}) AS nn, min(${col}) AS lo, max(${col}) AS hi FROM ${table}`,
    `SELECT * FROM ${table} WHERE ${col} IS NOT NULL ORDER BY ALL LIMIT ${1 + (n % 7)}`,
    `SELECT ${col}, row_number() OVER (ORDER BY ${kinds.map((_, i) => `c${i}`).join(', ')}) AS r FROM ${table} ORDER BY ALL`,
    numeric >= 0
      ? `SELECT sum(c${numeric}) AS s, avg(c${numeric}::BIGINT) AS a FROM ${table}`
      : `SELECT count(DISTINCT ${col}) AS d FROM ${table}`,
    kind === 'list_i32'
      ? `SELECT len(${col}) AS l, list_sum(${col}) AS s FROM ${table} ORDER BY ALL`
      : `WITH x AS (SELECT ${col} AS v FROM ${table}) SELECT v FROM x WHERE v IS NULL OR v = v ORDER BY ALL`,
  ];
  return shapes[n % shapes.length] as string;
}

/** Engine results and service results in one comparable form (integers as numbers; they are small here). */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, canonical(v)]));
  }
  if (typeof value === 'string' && /^-?\d+$/.test(value) && value.length < 16) return Number(value);
  return value;
}

let tableNo = 0;

test('random SELECTs agree with DuckDB loaded directly from the same rows', async () => {
  const db = tablesOf(api, 'p');
  await fc.assert(
    fc.asyncProperty(tableArb, async ({ kinds, rows, query }) => {
      const table = `t${tableNo++}`;
      const schema = kinds.map((kind, i) =>
        kind === 'list_i32' ? { name: `c${i}`, type: 'list', item: 'i32' } : { name: `c${i}`, type: kind },
      );
      expect((await db.create({ table_name: table, schema })).status).toBe(200);
      const data = rows.map((row) => Object.fromEntries(row.map((v, i) => [`c${i}`, v])));
      if (data.length > 0) expect((await db.append(table, data)).status).toBe(200);

      const connection = await reference.connect();
      try {
        await connection.run(`CREATE TABLE ${table} (${kinds.map((k, i) => `c${i} ${SQL_TYPE[k]}`).join(', ')})`);
        if (rows.length > 0) {
          const values = rows.map((row) => `(${row.map((v, i) => literal(kinds[i] as Kind, v)).join(', ')})`);
          await connection.run(`INSERT INTO ${table} VALUES ${values.join(', ')}`);
        }
        const sql = queryOf(query, table, kinds);
        const expected = (await connection.runAndReadAll(sql)).getRowObjectsJson();
        const reply = await api.request<{ data: Row[]; error?: string }>(
          'POST',
          '/v1/query_sql/p',
          { query: sql },
          { accept: 'application/json' },
        );
        expect(reply.json.error, sql).toBeUndefined();
        expect(canonical(reply.json.data), sql).toEqual(canonical(expected));
      } finally {
        connection.closeSync();
      }
    }),
    { numRuns: Number(process.env.SQL_PROPERTY_RUNS ?? 40) },
  );
});
