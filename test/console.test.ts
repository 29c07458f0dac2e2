import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, onTestFailed, test } from 'vitest';
import { parseCsv, rowsOfCsv, rowsOfJsonLines } from '../console/src/files/csv.js';
import { cellText, toCsv } from '../console/src/format.js';
import { bodyOf, curlOf } from '../console/src/search-request.js';
import { CONSOLE_CSP } from '../src/http/console.js';
import { type BrowserPage, openBrowser } from './support/browser.js';
import { capturedLogs } from './support/logs.js';
import { startStrata, type TestServer } from './support/strata.js';

/**
 * The web console (docs/console.md) in real headless Chromium against a real server, as a user goes through it:
 * sign in, register and verify a database, create a table, load files, browse, search and explain, SQL, sign out.
 * Slow: it drives a browser (Debian's chromium) for about 20 s; the build it serves comes from the global setup.
 * The tests run in order and share the page; each saves a screenshot to test/artifacts/ when it fails.
 */

let server: TestServer;
let browser: BrowserPage;
let key: string;
let files: string;
/** Rows in the CSV file: more than one request's worth (console/src/panels/load.tsx sends 5000 a request). */
const CSV_ROWS = 12_000;
const LONG_TITLE = `kettle ${'very long words '.repeat(20)}end`;

beforeAll(async () => {
  server = await startStrata();
  const account = await server.as('acme');
  key = (account.auth.authorization ?? '').replace(/^Bearer /, '');
  files = mkdtempSync(join(tmpdir(), 'strata-console-files-'));
  browser = await openBrowser();
}, 60_000);

/** Runs a teardown step, saying which one is still running past 15 s (a CI run once timed out in this hook). */
async function step(name: string, run: () => Promise<void>): Promise<void> {
  const late = setTimeout(() => {
    // The server's last log lines say what its close waits on (a CI run under load once took past 45 s here).
    const last = capturedLogs().slice(-20).join('');
    process.stderr.write(
      `console.test.ts teardown: ${name} still running after 15 s; the server's last logs:\n${last}\n`,
    );
  }, 15_000);
  try {
    await run();
  } finally {
    clearTimeout(late);
  }
}

afterAll(async () => {
  await step('the browser closing', async () => browser?.close());
  await step('the server closing', async () => server?.close());
  if (files !== undefined) rmSync(files, { recursive: true, force: true });
}, 180_000);

/** Screenshots of the page as it was when a test failed, named for the panel. */
function screenshotOnFailure(name: string): void {
  onTestFailed(async () => {
    await browser.screenshot(`console-${name}`);
  });
}

const csvFile = () => {
  const lines = ['id,title,price,emb,maker'];
  for (let id = 0; id < CSV_ROWS; id++) {
    const title = id === 3 ? LONG_TITLE : `${['red', 'blue', 'green'][id % 3]} kettle, number ${id}`;
    const maker = id % 5 === 0 ? 'Red Kettle Works' : 'Acme';
    lines.push(
      `${id},"${title}",${(id % 50) + 0.5},"[${Math.cos(id).toFixed(4)}, ${Math.sin(id).toFixed(4)}, 0.5]",${maker}`,
    );
  }
  return Buffer.from(`${lines.join('\r\n')}\r\n`);
};

describe('what the console reads and writes, without a browser', () => {
  test('CSV: quoted delimiters, quotes, line breaks, CRLF and a byte-order mark', () => {
    const text = '\ufeffid,title\r\n1,"a, ""b""\nc"\r\n2,plain\r\n\r\n';
    expect(parseCsv(text)).toEqual([
      ['id', 'title'],
      ['1', 'a, "b"\nc'],
      ['2', 'plain'],
    ]);
    expect(parseCsv('a\tb\n1\t2', '\t')).toEqual([
      ['a', 'b'],
      ['1', '2'],
    ]);
    expect(() => parseCsv('a\n"open')).toThrow(/inside a quoted field/);
  });

  test("CSV text becomes the JSON each column takes; what does not parse goes as it is, for the server's message", () => {
    const columns = [
      { name: 'id', type: 'i64' },
      { name: 'small', type: 'i32' },
      { name: 'price', type: 'f64' },
      { name: 'ok', type: 'bool' },
      { name: 'emb', type: 'vector' },
      { name: 'Title', type: 'utf8' },
    ];
    const records = parseCsv('ID,small,price,ok,emb,title\n9007199254740993,7,2.5,TRUE,"[1, 2]",x\n,x7,,0,,\n');
    expect(rowsOfCsv(records, columns)).toEqual([
      { id: '9007199254740993', small: 7, price: 2.5, ok: true, emb: [1, 2], Title: 'x' },
      { id: null, small: 'x7', price: null, ok: false, emb: null, Title: null },
    ]);
    expect(rowsOfJsonLines('{"a":1}\n\n{"a":2}\n')).toEqual([{ a: 1 }, { a: 2 }]);
    expect(() => rowsOfJsonLines('{"a":1}\n[2]')).toThrow(/line 2 is not a JSON object/);
  });

  test('cells are shortened, CSV downloads quote what needs quoting', () => {
    expect(cellText('x'.repeat(100))).toBe(`${'x'.repeat(80)}… (100 chars)`);
    expect(cellText([0.123456789, 2, 3, 4, 5, 6])).toBe('[0.123457, 2, 3, 4, … 6 items]');
    expect(cellText(null)).toBe('');
    expect(
      toCsv(
        ['a', 'b'],
        [
          { a: 'x,y', b: [1, 2] },
          { a: 'say "hi"', b: null },
        ],
      ),
    ).toBe('a,b\r\n"x,y","[1,2]"\r\n"say ""hi""",\r\n');
  });

  test('a search as curl: the body the API takes, shell-quoted, the key as a variable', () => {
    const search = { text: 'red', textField: 'title', k: 5, filter: "name = 'x'" };
    expect(bodyOf('t', search)).toEqual({
      table_name: 't',
      text_query: 'red',
      text_field: 'title',
      k: 5,
      filter: "name = 'x'",
    });
    const curl = curlOf('http://127.0.0.1:8080', 'shop', 't', search);
    expect(curl).toContain('Authorization: Bearer $STRATA_API_KEY');
    // A single quote closes the shell word, is escaped, and opens it again.
    expect(curl).toContain(`"filter":"name = '\\''x'\\''"`);
    const fields = [
      { field: 'a', boost: 2 },
      { field: 'b', boost: 1 },
    ];
    expect(bodyOf('t', { text: 'red', textFields: fields, k: 1 })).toEqual({
      table_name: 't',
      text_query: 'red',
      text_fields: fields,
      k: 1,
    });
  });
});

describe('the console, in a browser', () => {
  test('its pages are public, with a strict Content-Security-Policy', async () => {
    screenshotOnFailure('headers');
    const redirect = await fetch(`${server.url}/console`, { redirect: 'manual' });
    expect(redirect.status).toBe(301);
    expect(redirect.headers.get('location')).toBe('/console/');
    const response = await browser.page.goto(`${server.url}/console`);
    expect(response?.status()).toBe(200);
    const headers = response?.headers() ?? {};
    expect(headers['content-security-policy']).toBe(CONSOLE_CSP);
    expect(CONSOLE_CSP).toContain("default-src 'none'");
    expect(CONSOLE_CSP).toContain("script-src 'self'");
    expect(CONSOLE_CSP).toContain("style-src 'self'");
    expect(CONSOLE_CSP).toContain("frame-ancestors 'none'");
    expect(headers['x-content-type-options']).toBe('nosniff');
    expect(headers['referrer-policy']).toBe('no-referrer');
    // Its assets carry the same headers, and so does every file the build holds.
    const html = await (await fetch(`${server.url}/console/`)).text();
    const assets = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((match) => match[1]);
    expect(assets.length).toBeGreaterThanOrEqual(2);
    for (const asset of assets) {
      const reply = await fetch(`${server.url}${asset}`);
      expect(reply.status).toBe(200);
      expect(reply.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
    }
    // No inline script or style the CSP would refuse.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|style="/);
  });

  test('sign-in refuses a wrong key with the server’s code, then takes a good one, by keyboard', async () => {
    screenshotOnFailure('signin');
    const { page } = browser;
    await page.locator('#api-key').focus();
    await page.keyboard.type('sk_wrongwrongwrongwrongwrongwrongwrong');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('.error').textContent()).toContain('unauthorized');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await page.locator('#api-key').fill(key);
    await page.keyboard.press('Enter');
    await page.locator('#databases-title').waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem('strata.apiKey'))).toBe(key);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(await browser.context.cookies()).toEqual([]);
  });

  test('registers a local database, shows the external id, verifies it with each check’s time', async () => {
    screenshotOnFailure('databases');
    const { page } = browser;
    await page.locator('#register-name').fill('shop');
    await page.locator('#register-bucket').fill('shop');
    await page.locator('.register button[type=submit]').click();
    await page.locator('tr[data-database="shop"]').waitFor();
    await expect.poll(() => page.locator('[data-external-id]').textContent()).toMatch(/^ext_/);
    await page.locator('tr[data-database="shop"] button', { hasText: 'Verify' }).click();
    const checks = page.locator('.verify tr[data-step]');
    await expect.poll(() => checks.count()).toBe(6);
    expect(await page.locator('.verify tr[data-step="put"]').textContent()).toMatch(/ok\d+(\.\d+)? (ms|s)/);
    await expect
      .poll(() => page.locator('tr[data-database="shop"] .state').textContent(), { timeout: 15_000 })
      .toBe('active');
  });

  test('deletes a database only once its name is typed out', async () => {
    screenshotOnFailure('databases-delete');
    const { page } = browser;
    await page.locator('#register-name').fill('scratch');
    await page.locator('#register-bucket').fill('scratch');
    await page.locator('.register button[type=submit]').click();
    await page.locator('tr[data-database="scratch"] button', { hasText: 'Delete' }).click();
    const confirm = page.getByRole('button', { name: 'Delete scratch' });
    expect(await confirm.isDisabled()).toBe(true);
    // The confirmation takes the focus: the name is typed, and Enter deletes once it matches.
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe('delete-confirm');
    await page.keyboard.type('scratc');
    expect(await confirm.isDisabled()).toBe(true);
    await page.keyboard.type('h');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('tr[data-database="scratch"]').count()).toBe(0);
    expect(await page.locator('tr[data-database="shop"]').count()).toBe(1);
  });

  test('creates a table with indexes, and shows its columns, indexes and index health', async () => {
    screenshotOnFailure('database');
    const { page } = browser;
    await page.locator('a', { hasText: /^shop$/ }).click();
    await page.locator('#database-title').waitFor();
    await page.locator('#create-name').fill('products');
    const column = (n: number, what: string) => page.getByLabel(`Column ${n} ${what}`, { exact: true });
    await column(2, 'name').fill('title');
    await column(2, 'index').selectOption('fts:ascii_lower');
    await page.getByRole('button', { name: 'Add column' }).click();
    await column(3, 'name').fill('price');
    await column(3, 'type').selectOption('f64');
    await column(3, 'index').selectOption('scalar:btree');
    await page.getByRole('button', { name: 'Add column' }).click();
    await column(4, 'name').fill('emb');
    await column(4, 'type').selectOption('vector');
    await column(4, 'dimensions').fill('3');
    await column(4, 'index').selectOption('vector:cosine');
    await page.getByRole('button', { name: 'Add column' }).click();
    await column(5, 'name').fill('maker');
    await column(5, 'index').selectOption('fts:standard');
    await page.locator('#create-primary-key').selectOption('id');
    await page.getByRole('button', { name: 'Create table' }).click();
    const card = page.locator('article[data-table="products"]');
    await card.waitFor();
    await expect.poll(() => card.locator('.rows-count').textContent()).toBe('0 rows');
    expect(await card.locator('.last-upkeep').textContent()).toMatch(
      /^(no upkeep yet|last upkeep \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC)$/,
    );
    await expect.poll(() => card.locator('table.schema').textContent()).toContain('vector(3)');
    const schema = await card.locator('table.schema').textContent();
    expect(schema).toContain('full-text (ascii_lower)');
    expect(schema).toContain('vector (cosine)');
    expect(schema).toContain('scalar (btree)');
    expect(await card.locator('.primary-key').textContent()).toMatch(/^Primary key: id /);
    expect(schema).toContain('full-text (standard)');
    await expect.poll(() => card.locator('table.health tr[data-index]').count()).toBe(3);
    // A second table, dropped once its name is typed out; its files stay where the reply says.
    await page.locator('#create-name').fill('scratch');
    await page.getByRole('button', { name: 'Create table' }).click();
    await page.locator('article[data-table="scratch"] button', { hasText: 'Drop' }).click();
    const drop = page.getByRole('button', { name: 'Drop scratch' });
    expect(await drop.isDisabled()).toBe(true);
    await page.locator('#drop-confirm').fill('scratch');
    await drop.click();
    await expect
      .poll(() => page.locator('.confirm[role=status]').textContent())
      .toMatch(/Dropped scratch; its files stay at local:\/\/shop\//);
    await page.getByRole('button', { name: 'OK' }).click();
    await expect.poll(() => page.locator('article[data-table="scratch"]').count()).toBe(0);
  });

  test('loads a CSV file with progress through idempotent appends; loading it again writes nothing twice', async () => {
    screenshotOnFailure('load');
    const { page } = browser;
    await page.locator('article[data-table="products"] a.button', { hasText: 'Browse' }).click();
    await page.locator('#table-title').waitFor();
    await page.locator('#load-file').setInputFiles({ name: 'products.csv', mimeType: 'text/csv', buffer: csvFile() });
    await expect.poll(() => page.locator('.file-summary').textContent()).toBe('products.csv: csv, 12,000 rows');
    await page.getByRole('button', { name: 'Load', exact: true }).click();
    const report = page.locator('.load-report');
    await expect
      .poll(() => report.textContent(), { timeout: 20_000 })
      .toMatch(/Loaded 12,000 rows in 3 requests \(0 already there\)/);
    expect(await page.locator('.progress progress').getAttribute('value')).toBe(String(CSV_ROWS));
    // Sent again with the same keys, every request is answered as already done, and the table keeps 12,000 rows.
    await page.getByRole('button', { name: 'Load', exact: true }).click();
    await expect.poll(() => report.textContent(), { timeout: 20_000 }).toMatch(/in 3 requests \(3 already there\)/);
    const count = await server
      .withAuth(`Bearer ${key}`)
      .post<{ tables: { num_rows: number }[] }>('/v1/list_tables/shop');
    expect(count.json.tables[0]?.num_rows).toBe(CSV_ROWS);
    // The table has a primary key: a load may upsert, replacing the rows whose keys it holds.
    const upsert = 'id,title,price,emb\n1,renamed kettle,9.5,"[1, 0, 0]"\n50000,new kettle,9.5,"[0, 1, 0]"\n';
    await page
      .locator('#load-file')
      .setInputFiles({ name: 'changes.csv', mimeType: 'text/csv', buffer: Buffer.from(upsert) });
    await expect.poll(() => page.locator('.file-summary').textContent()).toBe('changes.csv: csv, 2 rows');
    await page.locator('#load-upsert').check();
    await page.getByRole('button', { name: 'Load', exact: true }).click();
    await expect.poll(() => report.textContent()).toMatch(/Loaded 2 rows in 1 requests .*: 1 inserted, 1 updated;/);
  });

  test('loads JSON Lines, Parquet (Snappy, gzip, Zstandard) and Arrow files too', async () => {
    screenshotOnFailure('load-more');
    const { page } = browser;
    const jsonl = `${JSON.stringify({ id: 20_000, title: 'jsonl kettle', price: 1.5, emb: [1, 0, 0] })}\n`;
    await page
      .locator('#load-file')
      .setInputFiles({ name: 'more.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from(jsonl) });
    await expect.poll(() => page.locator('.file-summary').textContent()).toBe('more.jsonl: jsonl, 1 rows');
    await page.getByRole('button', { name: 'Load', exact: true }).click();
    await expect.poll(() => page.locator('.load-report').textContent()).toMatch(/Loaded 1 rows in 1 requests/);
    // Parquet as DuckDB writes it by default (Snappy), and compressed with gzip and with Zstandard.
    const instance = await DuckDBInstance.create(':memory:');
    const connection = await instance.connect();
    for (const [at, codec] of [
      [0, 'snappy'],
      [2, 'gzip'],
      [4, 'zstd'],
    ] as const) {
      const parquet = join(files, `more-${codec}.parquet`);
      await connection.run(
        `COPY (SELECT 30000 + ${at} + i AS id, 'parquet kettle ' || (${at} + i) AS title, i * 1.0 AS price, [0.0, 1.0, (${at} + i) * 1.0]::FLOAT[3] AS emb FROM range(2) t(i)) TO '${parquet}' (FORMAT PARQUET, COMPRESSION ${codec})`,
      );
      await page.locator('#load-file').setInputFiles(parquet);
      await expect
        .poll(() => page.locator('.file-summary').textContent())
        .toBe(`more-${codec}.parquet: parquet, 2 rows`);
      await page.getByRole('button', { name: 'Load', exact: true }).click();
      await expect.poll(() => page.locator('.load-report').textContent()).toMatch(/Loaded 2 rows in 1 requests/);
    }
    connection.closeSync();
    instance.closeSync();
    // An Arrow IPC stream as Strata itself answers one: the console sends it as Arrow, re-batched by the client.
    const arrow = await server.withAuth(`Bearer ${key}`).raw(
      'POST',
      '/v1/query_sql/shop',
      {
        query:
          "SELECT 40000::BIGINT AS id, 'arrow kettle' AS title, 2.5::DOUBLE AS price, [0.5, 0.5, 0.0]::FLOAT[3] AS emb",
      },
      { accept: 'application/vnd.apache.arrow.stream' },
    );
    expect(arrow.status).toBe(200);
    await page.locator('#load-file').setInputFiles({
      name: 'more.arrows',
      mimeType: 'application/vnd.apache.arrow.stream',
      buffer: Buffer.from(await arrow.arrayBuffer()),
    });
    await expect.poll(() => page.locator('.file-summary').textContent()).toBe('more.arrows: arrow, 1 rows');
    await page.getByRole('button', { name: 'Load', exact: true }).click();
    await expect.poll(() => page.locator('.load-report').textContent()).toMatch(/Loaded 1 rows in 1 requests/);
    const rows = await server
      .withAuth(`Bearer ${key}`)
      .request<{ data: Record<string, unknown>[] }>(
        'POST',
        '/v1/query_sql/shop',
        { query: 'SELECT id, title, emb FROM products WHERE id >= 20000 ORDER BY id' },
        { accept: 'application/json' },
      );
    expect(rows.json.data).toEqual([
      { id: 20_000, title: 'jsonl kettle', emb: [1, 0, 0] },
      ...[0, 1, 2, 3, 4, 5].map((i) => ({ id: 30_000 + i, title: `parquet kettle ${i}`, emb: [0, 1, i] })),
      { id: 40_000, title: 'arrow kettle', emb: [0.5, 0.5, 0] },
      { id: 50_000, title: 'new kettle', emb: [0, 1, 0] },
    ]);
  });

  test('browses rows a page at a time, long text shortened, a row opened in full', async () => {
    screenshotOnFailure('browse');
    const { page } = browser;
    await expect.poll(() => page.locator('.page-info').textContent()).toBe('rows 1–25');
    const grid = page.locator('table.grid').first();
    expect(await grid.locator('tbody tr').count()).toBe(25);
    // The upserted row took its new title in its place.
    await expect.poll(() => grid.locator('tbody tr').nth(1).textContent()).toContain('renamed kettle');
    const long = await grid.locator('tbody tr').nth(3).textContent();
    expect(long).toContain(`… (${LONG_TITLE.length} chars)`);
    expect(long).not.toContain(LONG_TITLE);
    await page.getByRole('button', { name: 'Next →' }).click();
    await expect.poll(() => page.locator('.page-info').textContent()).toBe('rows 26–50');
    await expect.poll(() => grid.locator('tbody tr').first().locator('td').nth(1).textContent()).toBe('25');
    await page.getByRole('button', { name: '← Previous' }).click();
    await expect.poll(() => page.locator('.page-info').textContent()).toBe('rows 1–25');
    // Keyboard: the row's button takes Enter, Escape closes the dialog.
    await page.getByRole('button', { name: 'Open row 4' }).focus();
    await page.keyboard.press('Enter');
    await page.locator('dialog.row-dialog[open]').waitFor();
    expect(await page.locator('dialog.row-dialog pre').textContent()).toContain(LONG_TITLE);
    await page.keyboard.press('Escape');
    await expect.poll(() => page.locator('dialog.row-dialog').count()).toBe(0);
    // A filter narrows the pages.
    await page.locator('#browse-filter').fill('id < 3');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('.page-info').textContent()).toBe('rows 1–3');
  });

  test('searches by text and vector, explains a hit, and shows the request as curl and client code', async () => {
    screenshotOnFailure('search');
    const { page } = browser;
    await page.locator('.crumbs a', { hasText: 'Search' }).click();
    await page.locator('#search-title').waitFor();
    await expect.poll(() => page.getByLabel('Text field 1', { exact: true }).inputValue()).toBe('title');
    await expect.poll(() => page.locator('#search-vector-field').inputValue()).toBe('emb');
    await page.locator('#search-text').fill('red kettle');
    await page.locator('#search-vector').fill('[1, 0, 0.5]');
    await page.locator('#search-filter').fill('price < 40');
    await page.locator('#search-k').fill('5');
    // Two text fields: sent as text_fields, with their boosts.
    await page.getByRole('button', { name: 'Add text field' }).click();
    await page.getByLabel('Text field 2', { exact: true }).selectOption('maker');
    await page.getByLabel('Boost of text field 2', { exact: true }).fill('2');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    const results = page.locator('.results table.grid').last();
    await expect.poll(() => results.locator('tbody tr').count(), { timeout: 10_000 }).toBe(5);
    const head = await results.locator('thead').textContent();
    expect(head).toContain('_score');
    expect(head).toContain('_bm25');
    expect(head).toContain('_distance');
    expect(await page.locator('table.explain-summary').textContent()).toContain('text');
    await page.getByRole('button', { name: 'Open row 1' }).click();
    await page.locator('dialog.row-dialog[open]').waitFor();
    const legs = page.locator('dialog.row-dialog table.explain-row');
    await expect.poll(() => legs.locator('tr[data-leg="text"]').textContent()).toMatch(/text\d+/);
    // The vector leg ran; the best fused row need not be among its candidates.
    expect(await legs.locator('tr[data-leg="vector"]').textContent()).toMatch(/^vector(\d+|not returned)/);
    if (process.env.STRATA_CONSOLE_SCREENSHOT !== undefined) {
      await page.locator('dialog.row-dialog button', { hasText: 'Close' }).click();
      await page.screenshot({ path: process.env.STRATA_CONSOLE_SCREENSHOT, fullPage: true });
    } else await page.keyboard.press('Escape');
    await expect.poll(() => page.locator('dialog.row-dialog').count()).toBe(0);
    await page.locator('details.request summary').click();
    const curl = await page.locator('pre[data-copy="curl"]').textContent();
    expect(curl).toContain(`${server.url}/v1/hybrid_search/shop`);
    expect(curl).toContain('"text_fields":[{"field":"title","boost":1},{"field":"maker","boost":2}]');
    expect(curl).toContain('$STRATA_API_KEY');
    expect(curl).not.toContain(key);
    const code = await page.locator('pre[data-copy="@strata/client"]').textContent();
    expect(code).toContain('searchWithReceipt');
    expect(code).toContain('textFields: [{"field":"title","boost":1},{"field":"maker","boost":2}]');
  });

  test('runs SQL with Ctrl+Enter, shows the time, downloads CSV, and shows an error with its code', async () => {
    screenshotOnFailure('sql');
    const { page } = browser;
    await page.locator('.crumbs a', { hasText: 'SQL' }).click();
    const editor = page.locator('#sql-editor');
    await editor.fill('SELECT id, title FROM products WHERE id < 3 ORDER BY id');
    await editor.press('Control+Enter');
    await expect.poll(() => page.locator('.result-summary').textContent()).toMatch(/^3 rows in \d/);
    const downloading = page.waitForEvent('download');
    await page.getByRole('link', { name: 'Download CSV' }).click();
    const download = await downloading;
    expect(download.suggestedFilename()).toBe('shop-query.csv');
    const csv = readFileSync((await download.path()) ?? '', 'utf8');
    expect(csv).toBe('id,title\r\n0,"red kettle, number 0"\r\n1,renamed kettle\r\n2,"green kettle, number 2"\r\n');
    await editor.fill('SELECT nope FROM products');
    await editor.press('Control+Enter');
    await expect.poll(() => page.locator('.error .error-code').textContent()).toBe('bad_request · HTTP 400');
    expect(await page.locator('.error .error-message').textContent()).toMatch(/nope/);
  });

  test('is readable 390 px wide: nothing runs off the side of the page', async () => {
    screenshotOnFailure('narrow');
    const { page } = browser;
    for (const view of ['#/db/shop/search', '#/db/shop/t/products', '#/db/shop', '#/']) {
      await page.setViewportSize({ width: 390, height: 800 });
      await page.evaluate((hash) => {
        location.hash = hash;
      }, view);
      await page.waitForTimeout(300);
      expect(await page.evaluate(() => document.documentElement.scrollWidth), view).toBeLessThanOrEqual(390);
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  test('sign-out forgets the key', async () => {
    screenshotOnFailure('signout');
    const { page } = browser;
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.locator('#api-key').waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem('strata.apiKey'))).toBeNull();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
  });

  test('the page asked no other host, put the key in no URL, broke no CSP rule; the log holds no key', () => {
    const origin = new URL(server.url).origin;
    const others = browser.requests.filter((url) => !url.startsWith('blob:') && new URL(url).origin !== origin);
    expect(others).toEqual([]);
    expect(browser.requests.length).toBeGreaterThan(10);
    expect(browser.requests.filter((url) => url.includes(key) || url.includes(key.slice(0, 24)))).toEqual([]);
    expect(browser.complaints.filter((text) => !/401|400 \(Bad Request\)/.test(text))).toEqual([]);
    const logs = capturedLogs().join('');
    expect(logs).toContain('/v1/hybrid_search/shop');
    expect(logs).not.toContain(key);
    expect(logs).not.toContain(key.slice(0, 24));
  });
});
