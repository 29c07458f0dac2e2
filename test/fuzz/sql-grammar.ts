import type { DataType, Field } from 'apache-arrow';
import fc from 'fast-check';
import { arrow } from '../../src/arrow/arrow.js';
import { anyString, weighted } from './hostile.js';
import type { WorldTable } from './world.js';

type Kind =
  | 'int'
  | 'float'
  | 'text'
  | 'binary'
  | 'bool'
  | 'date'
  | 'timestamp'
  | 'vector'
  | 'list'
  | 'struct'
  | 'other';

function kindOf(type: DataType): Kind {
  switch (type.typeId) {
    case arrow.Type.Int:
      return 'int';
    case arrow.Type.Float:
      return 'float';
    case arrow.Type.Utf8:
    case arrow.Type.LargeUtf8:
      return 'text';
    case arrow.Type.Binary:
    case arrow.Type.LargeBinary:
      return 'binary';
    case arrow.Type.Bool:
      return 'bool';
    case arrow.Type.Date:
      return 'date';
    case arrow.Type.Timestamp:
      return 'timestamp';
    case arrow.Type.FixedSizeList:
      return 'vector';
    case arrow.Type.List:
      return 'list';
    case arrow.Type.Struct:
      return 'struct';
    default:
      return 'other';
  }
}

const sqlString = (text: string) => `'${text.replace(/'/g, "''")}'`;

const intLiterals = fc.oneof(
  fc.constantFrom(
    '0',
    '-1',
    '5',
    '9223372036854775807',
    '-9223372036854775808',
    '9223372036854775808',
    '-9223372036854775809',
    '18446744073709551615',
    '170141183460469231731687303715884105727',
    '1e400',
    '0x10',
    "'5'",
    'NULL',
  ),
  fc.integer({ min: -50, max: 50 }).map(String),
);

const floatLiterals = fc.constantFrom(
  '0.5',
  '-0.0',
  "'NaN'::DOUBLE",
  "'Infinity'::DOUBLE",
  "CAST('nan' AS FLOAT)",
  '1e308',
  '1e-320',
  '3.5e38',
  '1e999',
);

const textLiterals = fc.oneof(
  fc.constantFrom("'apple'", "''", "'it''s'", "'Über'", "'%'", "'\\'", "'a\u0000b'", "'🚀'", "E'\\x00'"),
  anyString.map(sqlString),
);

const dateLiterals = fc.constantFrom(
  "DATE '2024-02-29'",
  "DATE '-5877641-06-25'",
  "DATE '5881580-07-11'",
  "DATE '0001-01-01'",
  "DATE 'infinity'",
  "'2024-13-40'",
  "DATE '294247-01-10'",
);

const timestampLiterals = fc.constantFrom(
  "TIMESTAMP '1970-01-01 00:00:00'",
  "TIMESTAMP '294247-01-10 04:00:54.775807'",
  "TIMESTAMP '-290308-12-21 19:59:05.224192'",
  "TIMESTAMP '294247-01-10 04:00:54.775808'",
  "TIMESTAMP 'infinity'",
  "TIMESTAMPTZ '2024-01-01 00:00:00+14:00'",
  "'2024-01-01T00:00:00Z'",
  '1700000000000',
);

const literalFor = (kind: Kind): fc.Arbitrary<string> => {
  switch (kind) {
    case 'int':
      return intLiterals;
    case 'float':
      return fc.oneof(floatLiterals, intLiterals);
    case 'text':
      return textLiterals;
    case 'binary':
      return fc.constantFrom("X'00FF'", "'\\x00'::BLOB", "'abc'");
    case 'bool':
      return fc.constantFrom('true', 'false', 'NULL', "'t'", '1');
    case 'date':
      return dateLiterals;
    case 'timestamp':
      return timestampLiterals;
    case 'vector':
      return fc.constantFrom('[1, 2, 3]', '[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]', '[]', "'[1,2]'");
    default:
      return fc.oneof(intLiterals, textLiterals);
  }
};

/** A reference to a column as SQL (DataFusion for predicates, DuckDB for queries) may spell it. */
const refs = (field: Field, quote: '`' | '"') => {
  const plain = /^[A-Za-z][A-Za-z0-9_]*$/.test(field.name);
  const quoted = `${quote}${field.name.replaceAll(quote, quote + quote)}${quote}`;
  return plain ? fc.constantFrom(field.name, quoted, field.name.toUpperCase()) : fc.constant(quoted);
};

const oddRefs = (quote: '`' | '"') =>
  fc.constantFrom(
    `${quote}nope${quote}`,
    'nope',
    '_rowkey',
    '_rowid',
    '_distance',
    `${quote}${quote}`,
    `${quote}a${quote}${quote}b${quote}`,
    'docs.id',
    'id.x',
    'tags[1]',
    'emb[0]',
    'address.city',
    "address['city']",
    '*',
    '1',
    'NULL',
  );

const COMPARE = ['=', '!=', '<>', '<', '<=', '>', '>=', 'LIKE', 'ILIKE', 'IS', 'IS NOT', '~', '@@', '<=>', '=='];

const FUNCTION_ATOMS: readonly ((ref: string) => string)[] = [
  (r) => `lower(${r}) = 'a'`,
  (r) => `regexp_match(${r}, '(')`,
  (r) => `${r} BETWEEN 1 AND 0`,
  (r) => `CAST(${r} AS BIGINT) > 0`,
  (r) => `${r} + 1 > 9223372036854775807`,
  (r) => `array_has(${r}, 'a')`,
  (r) => `${r}[1] = 'a'`,
  (r) => `${r} = (SELECT 1)`,
  () => 'EXISTS (SELECT 1)',
  () => 'sleep(10) IS NULL',
];

const PLAIN_LITERALS: Partial<Record<Kind, fc.Arbitrary<string>>> = {
  int: fc.integer({ min: -5, max: 50 }).map(String),
  float: fc.constantFrom('0.5', '3', '-1.25'),
  text: fc.constantFrom("'apple'", "'cherry fig'", "''"),
  bool: fc.constantFrom('true', 'false'),
  date: fc.constantFrom("DATE '2015-01-10'", "DATE '2020-05-15'"),
  timestamp: fc.constantFrom("TIMESTAMP '2023-11-14 22:13:20'"),
};

/** Predicates a well-behaved client writes: one or two comparisons of scalar columns with literals of their type. */
export function plainPredicates(table: WorldTable): fc.Arbitrary<string> {
  const scalar = table.schema.fields.filter((f) => PLAIN_LITERALS[kindOf(f.type)] !== undefined);
  if (scalar.length === 0) return fc.constant('true');
  const atom = fc
    .constantFrom(...scalar)
    .chain((f) =>
      fc
        .tuple(
          refs(f, '`'),
          fc.constantFrom('=', '<', '>=', '!='),
          PLAIN_LITERALS[kindOf(f.type)] as fc.Arbitrary<string>,
        )
        .map(([r, op, lit]) => `${r} ${op} ${lit}`),
    );
  return fc.oneof(
    atom,
    fc.tuple(atom, fc.constantFrom(' AND ', ' OR '), atom).map((parts) => parts.join('')),
    fc.constantFrom(...scalar).chain((f) => refs(f, '`').map((r) => `${r} IS NOT NULL`)),
  );
}

/** Predicates over a table's columns (update, delete, filter): plausible atoms, odd names, nesting, junk. */
export function predicates(table: WorldTable, quote: '`' | '"' = '`'): fc.Arbitrary<string> {
  const fields = table.schema.fields;
  const column = fc.constantFrom(...fields);
  const atom: fc.Arbitrary<string> = weighted(
    [
      6,
      column.chain((f) =>
        fc
          .tuple(refs(f, quote), fc.constantFrom(...COMPARE), literalFor(kindOf(f.type)))
          .map(([r, op, lit]) => `${r} ${op} ${lit}`),
      ),
    ],
    [2, column.chain((f) => refs(f, quote)).map((r) => `${r} IS NULL`)],
    [
      2,
      column.chain((f) =>
        fc
          .tuple(refs(f, quote), fc.array(literalFor(kindOf(f.type)), { minLength: 0, maxLength: 5 }))
          .map(([r, lits]) => `${r} IN (${lits.join(', ')})`),
      ),
    ],
    [1, fc.tuple(oddRefs(quote), literalFor('int')).map(([r, lit]) => `${r} = ${lit}`)],
    [1, fc.constantFrom('true', 'false', 'NULL', '1', '1 = 1', 'NOT NULL')],
    [
      1,
      column.chain((f) => fc.tuple(refs(f, quote), fc.constantFrom(...FUNCTION_ATOMS)).map(([r, atomOf]) => atomOf(r))),
    ],
  );
  const combined = fc
    .array(fc.tuple(atom, fc.constantFrom(' AND ', ' OR ', ' AND NOT ', ' OR ')), { minLength: 1, maxLength: 4 })
    .map((parts) =>
      parts
        .map(([a, join], i) => (i === parts.length - 1 ? a : `${a}${join}`))
        .join('')
        .trim(),
    );
  return weighted(
    [10, combined],
    [
      1,
      fc
        .tuple(atom, fc.integer({ min: 1, max: 3000 }))
        .map(([a, depth]) => `${'('.repeat(depth)}${a}${')'.repeat(depth)}`),
    ],
    [1, fc.tuple(atom, fc.integer({ min: 1, max: 3000 })).map(([a, n]) => `${'NOT '.repeat(n)}${a}`)],
    [
      1,
      fc
        .integer({ min: 100, max: 10_000 })
        .map((n) => `${fields[0]?.name ?? 'id'} IN (${Array.from({ length: n }, (_, i) => i).join(',')})`),
    ],
    [
      1,
      fc.constantFrom(
        '',
        ' ',
        ';',
        'id = 1; DROP TABLE docs',
        'id = 1 --',
        '/* */ id = 1',
        'id =',
        '(',
        ')',
        "'unterminated",
        '`unterminated',
        'id = 1 AND',
        'SELECT 1',
        'true UNION SELECT * FROM docs',
      ),
    ],
    [1, anyString],
  );
}

const tableRef = (name: string) => (/^[A-Za-z][A-Za-z0-9_]*$/.test(name) ? name : `"${name}"`);

/** SQL for query_sql: a small grammar of selects over the tables, literal edge cases, heavy and forbidden work. */
export function sqlQueries(tables: WorldTable[], foreignTable: string): fc.Arbitrary<string> {
  const table = fc.constantFrom(...tables);
  const select = table.chain((t) => {
    const fields = t.schema.fields;
    const projection = fc.oneof(
      fc.constant('*'),
      fc.constant('count(*)'),
      fc.subarray(fields, { minLength: 1 }).map((fs) => fs.map((f) => `"${f.name.replaceAll('"', '""')}"`).join(', ')),
      fc.constantFrom(...fields).map((f) => `"${f.name.replaceAll('"', '""')}"::VARCHAR AS v, 1 AS "_score"`),
    );
    return fc
      .tuple(
        projection,
        fc.option(predicates(t, '"'), { freq: 2 }),
        fc.option(fc.constantFrom(...fields).map((f) => `"${f.name.replaceAll('"', '""')}"`)),
        fc.option(fc.constantFrom('0', '1', '10', '-1', '9223372036854775807', '18446744073709551616')),
      )
      .map(
        ([proj, where, order, limit]) =>
          `SELECT ${proj} FROM ${tableRef(t.name)}${where === null ? '' : ` WHERE ${where}`}${
            order === null ? '' : ` ORDER BY ${order}`
          }${limit === null ? '' : ` LIMIT ${limit}`}`,
      );
  });
  const literals = fc.constantFrom(
    "SELECT DATE '-5877641-06-25'",
    "SELECT DATE '5881580-07-11'",
    "SELECT DATE 'infinity', DATE '-infinity'",
    "SELECT TIMESTAMP '294247-01-10 04:00:54.775807'",
    "SELECT TIMESTAMP 'infinity'",
    "SELECT TIMESTAMP_NS '2262-04-11 23:47:16.854775807'",
    "SELECT TIMESTAMPTZ '2024-01-01 00:00:00+14'",
    "SELECT TIME '23:59:59.999999', TIMETZ '12:00:00+05'",
    'SELECT INTERVAL 1 DAY, INTERVAL 178000000 YEAR',
    'SELECT -9223372036854775808, 9223372036854775807',
    'SELECT 9223372036854775807 + 1',
    'SELECT 170141183460469231731687303715884105727::HUGEINT',
    'SELECT 340282366920938463463374607431768211455::UHUGEINT',
    'SELECT 12345678901234567890123456789.123456789::DECIMAL(38,9)',
    'SELECT 1.5::DECIMAL(4,1), 0.1::DECIMAL(18,18)',
    'SELECT 1/0, 1 // 0, 0/0',
    "SELECT 'NaN'::DOUBLE, 'Infinity'::FLOAT, '-0'::DOUBLE",
    "SELECT '\\x00\\xff'::BLOB, ''::BLOB",
    "SELECT 'a'::BIT, '0101'::BITSTRING",
    'SELECT uuid(), gen_random_uuid()',
    "SELECT {'a': 1, 'b': [1, 2]} AS s",
    "SELECT MAP {'k': 1} AS m",
    "SELECT [1, NULL, 3] AS l, [[1], []] AS ll, ['a']::VARCHAR[1] AS fixed",
    "SELECT union_value(a := 1) AS u, 'x'::ENUM('x', 'y') AS e",
    'SELECT NULL, NULL::INTEGER',
    'SELECT 1 AS a, 2 AS a',
    'SELECT 1 AS ""',
    'SELECT 1 AS "_rowkey", 2 AS "_score"',
    "SELECT repeat('x', 100000) AS big",
    "SELECT '\uD83D'",
    "SELECT chr(0), chr(1114111), '\u0000'",
    "VALUES (1, 'a'), (2, NULL)",
    "VALUES (1), ('a')",
    'SHOW TABLES',
    'DESCRIBE docs',
    'DESCRIBE "odd-names"',
    'DESCRIBE SELECT 1',
    'SUMMARIZE docs',
    'EXPLAIN SELECT 1',
    'EXPLAIN ANALYZE SELECT * FROM docs',
    'WITH t AS (SELECT 1 AS x) SELECT * FROM t',
    'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r',
    'SELECT * FROM docs, docs AS b, docs AS c, docs AS d',
    'SELECT count(*) FROM range(10000000000)',
    'SELECT * FROM range(2000000)',
    'SELECT list(range) FROM range(3000000)',
    "SELECT string_agg(repeat('x', 1000), '') FROM range(100000)",
    'SELECT emb, emb::FLOAT[8] FROM docs',
    'SELECT array_cosine_similarity(emb, emb) FROM docs',
    'SELECT * FROM nested',
    'SELECT address.city, scores[1], v64 FROM nested',
    'SELECT * FROM all_types',
    'SELECT u64 + 1, i8 * 1000, f16 FROM all_types',
    'SELECT * FROM "odd-names"',
    'SELECT "x-y", "a\'b", """q""" FROM "odd-names"',
  );
  const forbidden = fc.constantFrom(
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_csv_auto('/etc/hostname')",
    "SELECT * FROM read_text('/proc/self/environ')",
    "SELECT * FROM read_blob('/proc/self/cmdline')",
    "SELECT * FROM read_parquet('x.parquet')",
    "SELECT * FROM read_json_auto('http://127.0.0.1:9/x')",
    "SELECT * FROM 'control.sqlite'",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM glob('*')",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "SELECT getenv('HOME')",
    "SELECT current_setting('memory_limit')",
    'SELECT * FROM duckdb_settings()',
    'SELECT * FROM duckdb_databases()',
    'SELECT * FROM duckdb_extensions()',
    'SELECT * FROM information_schema.tables',
    'SELECT * FROM pragma_database_list',
    `SELECT * FROM ${foreignTable}`,
    `SELECT * FROM beta.${foreignTable}`,
    'SELECT * FROM beta.main.docs',
    "ATTACH ':memory:' AS m",
    "ATTACH '/tmp/x.db' AS x",
    'DETACH alpha',
    'USE memory',
    "COPY docs TO '/tmp/fuzz-copy.csv'",
    "COPY (SELECT 1) TO '/tmp/fuzz-copy.parquet' (FORMAT PARQUET)",
    "EXPORT DATABASE '/tmp/fuzz-export'",
    'PRAGMA database_list',
    'PRAGMA version',
    "CALL pragma_table_info('docs')",
    'INSTALL httpfs',
    'LOAD httpfs',
    'SET threads = 64',
    "SET memory_limit = '100GB'",
    'RESET ALL',
    'CREATE TABLE x AS SELECT 1',
    'CREATE MACRO m() AS 1',
    'CREATE VIEW v AS SELECT 1',
    'DROP TABLE docs',
    'DELETE FROM docs',
    'UPDATE docs SET id = 0',
    'INSERT INTO docs SELECT * FROM docs',
    'CHECKPOINT',
    'VACUUM',
    'BEGIN',
    'SELECT 1; SELECT 2',
    'SELECT 1;',
    ';',
    '',
    '   ',
    '-- only a comment',
    '/* unterminated',
    'SELECT',
    'SELECT * FROM',
    'SELECT * FROM nope',
    "SELECT 'unterminated",
  );
  return weighted(
    [6, select],
    [3, literals],
    [3, forbidden],
    [1, fc.tuple(select, fc.constantFrom(' UNION ALL ', '; ', ' -- ', ' EXCEPT ')).map(([q, j]) => `${q}${j}${q}`)],
    [1, anyString],
  );
}
