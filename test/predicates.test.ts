import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { schemaOnlyStream } from '../src/arrow/ipc.js';
import { rememberSecret } from './support/logs.js';
import { serveProcess } from './support/processes.js';
import { activeLocalDatabase, client, serveFile } from './support/server.js';
import { readTable, tablesOf } from './support/tables.js';
import { NESTED_SCHEMA } from './support/types.js';

// Predicates (update, delete) and filters (search) are exactly one boolean expression (docs/api.md, Predicates):
// each case here was answered 200 once, with the tail dropped and every row deleted.
// Slow only because one case reads a `strata serve` process's stderr for backtraces (about 3–6 s in all).

const { strata, api } = serveFile({}, { database: 'shop' });
const db = tablesOf(api, 'shop');
const ROWS = Array.from({ length: 10 }, (_, i) => ({ id: i, title: `item ${i}`, price: i * 1.5 }));

beforeAll(async () => {
  await db.create({
    table_name: 'products',
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'title', type: 'utf8' },
      { name: 'price', type: 'f64' },
    ],
    indexes: { fts: ['title'] },
  });
});

beforeEach(async () => {
  await db.remove('products', 'true');
  await db.append('products', ROWS);
});

const TAILS: readonly [string, RegExp][] = [
  ['id >= 0 LIMIT 1', /found "LIMIT" at character 9.*LIMIT is not part of a predicate/],
  ['id >= 0 ORDER BY id', /found "ORDER"/],
  ['id >= 0 OFFSET 3', /found "OFFSET"/],
  ['id >= 0 GROUP BY id HAVING count(*) > 1', /found "GROUP"/],
  ['id >= 0 FETCH FIRST 1 ROWS ONLY', /found "FETCH"/],
  ['id >= 0 QUALIFY true', /found "QUALIFY"/],
  ['id >= 0 WINDOW w AS ()', /found "WINDOW"/],
  ['id >= 0 -- every row', /found a comment \("--"\) at character 9/],
  ['id >= 0; DROP TABLE products', /found ";" at character 8/],
  ['id >= 0 id < 3', /found "id" at character 9 after the end of the expression/],
];

describe('a predicate is exactly one boolean expression', () => {
  test.each(TAILS)('delete with %j is 400 and deletes nothing', async (predicate, message) => {
    const res = await db.remove('products', predicate);

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/^predicate: /);
    expect(res.json.error).toMatch(message);
    expect(await readTable(strata, 'acme', 'shop', 'products')).toHaveLength(10);
  });

  test.each(TAILS)('update with %j is 400 and changes nothing', async (predicate, message) => {
    const res = await db.update('products', predicate, [{ id: 99, title: 'x', price: 0 }]);

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
    expect((await readTable(strata, 'acme', 'shop', 'products')).map((r) => r.id)).not.toContain(99);
  });

  test.each(TAILS)('a search filter %j is 400', async (filter, message) => {
    const res = await api.post('/v1/hybrid_search/shop', {
      table_name: 'products',
      text_query: 'item',
      text_field: 'title',
      k: 10,
      filter,
    });

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/^filter: /);
    expect(res.json.error).toMatch(message);
  });

  test('a chain of 200 ORs is a predicate like any other', async () => {
    const predicate = Array.from({ length: 200 }, (_, i) => `id = ${i + 5}`).join(' OR ');
    const res = await db.remove('products', predicate);

    expect([res.status, res.json.matched]).toEqual([200, 5]);
  });

  test('what a predicate may say still works: comparisons, IN, BETWEEN, LIKE, functions, casts, case-insensitive names', async () => {
    const cases: [string, number][] = [
      ['id < 3', 3],
      ['ID == 4', 1],
      ['`id` IN (1, 2, 3) AND NOT price > 2', 1],
      ["id BETWEEN 2 AND 4 OR title LIKE '%9'", 4],
      ["lower(title) = 'item 5'", 1],
      ['CAST(price AS BIGINT) = 3', 1],
      ['price::BIGINT >= 12', 2],
      ['title IS NOT NULL AND (id % 2 = 0)', 5],
      ['id = -1 OR id = 0', 1],
    ];
    for (const [predicate, matched] of cases) {
      const res = await db.remove('products', predicate);
      expect([predicate, res.status, res.json.matched]).toEqual([predicate, 200, matched]);
      await db.remove('products', 'true');
      await db.append('products', ROWS);
    }
  });
});

describe('a path into a struct names only fields the table has', () => {
  test('a field name that smuggles SQL is refused; real fields are found', async () => {
    const schema = Buffer.from(schemaOnlyStream(NESTED_SCHEMA)).toString('base64');
    expect((await db.create({ table_name: 'nested', schema_ipc: schema })).status).toBe(200);
    const rows = [1, 2, 3].map((id) => ({
      id,
      address: { city: `c${id}`, zip: id },
      scores: [id],
      v64: [1, 2, 3, id],
    }));
    expect((await db.append('nested', rows)).status).toBe(200);

    const smuggled = await db.remove('nested', 'address.`x`` = 1 OR TRUE) LIMIT 1 --` = 1');
    const unknown = await db.remove('nested', 'address.street = 1');
    const notStruct = await db.remove('nested', 'id.x = 1');
    const found = await db.remove('nested', "ADDRESS.city = 'c2' AND address.`zip` = 2");

    expect(smuggled.status).toBe(400);
    expect(smuggled.json.error).toMatch(
      /`address` has no field "x` = 1 OR TRUE\) LIMIT 1 --" \(character 9\); its fields are city, zip/,
    );
    expect(unknown.json.error).toMatch(/`address` has no field "street"/);
    expect(notStruct.json.error).toMatch(/"`id`" has no fields .*it is not a struct/);
    expect([found.status, found.json.matched]).toEqual([200, 1]);
    expect(await readTable(strata, 'acme', 'shop', 'nested')).toHaveLength(2);
  });
});

describe('constructs Lance cannot plan are refused before it sees them', () => {
  test.each([
    ['id = $1', /placeholder "\$1"/],
    ['id = ?', /placeholder "\?"/],
    ['id = :x', /placeholder/],
    ["title = N'item 1'", /N'…'/],
    ["title = B'0101'", /B'…'/],
    ["title = R'item'", /R'…'/],
    ['title = $$item 1$$', /dollar-quoted/],
    ['"title" = 1', /double quote/],
    ['id = (SELECT 1)', /subqueries are not allowed/],
    ['EXISTS (SELECT 1)', /subqueries are not allowed/],
    ['CASE WHEN id = 1 THEN true END', /CASE is not supported/],
  ])('%j is 400 naming what was found', async (predicate, message) => {
    const res = await db.remove('products', predicate);

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
    expect(await readTable(strata, 'acme', 'shop', 'products')).toHaveLength(10);
  });
});

describe('an error names only the user columns', () => {
  test('an unknown column lists the table columns, none of the service or Lance', async () => {
    const res = await db.remove('products', 'colour = 1');

    expect(res.status).toBe(400);
    expect(res.json.error).toBe(
      'predicate: no column named "colour" (character 1); the table\'s columns are id, title, price',
    );
  });

  test('a nested field that does not exist says so without listing internal columns', async () => {
    const res = await db.remove('products', "title = 1 AND price.cents = 'x'");

    expect(res.status).toBe(400);
    expect(res.json.error).not.toMatch(/_rowid|_rowaddr|_rowkey|_row_last_updated/);
  });
});

describe('a predicate cannot build unbounded values', () => {
  test('three lpad requests at once are refused at once, and memory does not move', async () => {
    const before = process.memoryUsage().rss;
    const started = Date.now();
    const answers = await Promise.all(
      [0, 1, 2].map(() => db.remove('products', "lpad(title, 2000000000, 'x') = title")),
    );

    expect(Date.now() - started).toBeLessThan(10_000);
    for (const res of answers) {
      expect(res.status).toBe(400);
      expect(res.json.error).toMatch(/function lpad is not allowed.*can build values of any size/);
    }
    expect(process.memoryUsage().rss - before).toBeLessThan(1024 ** 3);
  });

  test.each([
    ['repeat', "repeat(title, 1000000) = ''", /function repeat is not allowed/],
    ['replace', "replace(title, 'i', title) = ''", /function replace is not allowed/],
    [
      '40 joins by ||',
      `${Array.from({ length: 40 }, () => 'title').join(' || ')} = ''`,
      /joins text more than 16 times/,
    ],
    [
      'concat of 40',
      `concat(${Array.from({ length: 40 }, () => 'title').join(', ')}) = ''`,
      /joins text more than 16 times/,
    ],
    ['200 parentheses', `${'('.repeat(200)}id = 1${')'.repeat(200)}`, /nested deeper than 64 levels/],
    ['100 NOTs', `${'NOT '.repeat(100)}id = 1`, /nested deeper than 64 levels/],
    ['20 NOTs', `${'NOT '.repeat(20)}id = 1`, /nests 21 levels deep once its operators are grouped; the limit is 16/],
    ['DECIMAL(50, 2)', 'CAST(id AS DECIMAL(50, 2)) = 1', /DECIMAL takes a precision of 1 to 38/],
    ['DECIMAL(0, 0)', 'CAST(id AS DECIMAL(0, 0)) = 1', /DECIMAL takes a precision of 1 to 38/],
    ['sleep', 'sleep(10) IS NULL', /function sleep is not available in predicates/],
  ])('%s is 400', async (_, predicate, message) => {
    const res = await db.remove('products', predicate);

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
  });
});

describe('a refused predicate leaves no backtrace in the log', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'strata-predicates-'));
  const key = `sk_${'p'.repeat(43)}`;
  rememberSecret(key);
  let served: Awaited<ReturnType<typeof serveProcess>> | undefined;
  afterAll(() => {
    served?.child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('placeholders and prefixed strings are 400 and write nothing to stderr', async () => {
    served = await serveProcess(dataDir, { STRATA_BOOTSTRAP_KEY: key, LANCEDB_LOG: 'error' });
    const remote = client(served.url, `Bearer ${key}`);
    await activeLocalDatabase(remote, 'logs');
    const tables = tablesOf(remote, 'logs');
    await tables.create({ table_name: 't', schema: [{ name: 'id', type: 'i64' }] });
    await tables.append('t', [{ id: 1 }]);
    const logged = served.output().length;

    for (const predicate of ['id = $1', 'id = ?', 'id = :x', "id = N'1'", "id = B'1'", "id = R'1'", 'id = $$1$$']) {
      const res = await tables.remove('t', predicate);
      expect([predicate, res.status]).toEqual([predicate, 400]);
    }

    const output = served.output().slice(logged);
    expect(output).not.toMatch(/panicked|backtrace|not yet implemented|planner\.rs/);
  });
});
