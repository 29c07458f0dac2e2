import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FLAG_TO_ENV } from '../src/config.js';
import { rememberSecret } from './support/logs.js';
import { CLI, cli, type Served, serveProcess } from './support/processes.js';
import { activeLocalDatabase, type Client, client } from './support/server.js';

/**
 * What `strata` prints: each command's own usage for --help (every flag it takes), usage errors in its own words,
 * and the service's answers as aligned tables on a terminal, JSON lines in a pipe, with no double-encoded values.
 * Slow: about 15 s, the built `strata` run once or more per case (some on a pseudo-terminal), against a
 * `strata serve` process.
 */

const run = promisify(execFile);
const KEY = `sk_${'o'.repeat(43)}`;
const dir = mkdtempSync(join(tmpdir(), 'strata-cli-output-'));
let server: Served;
let api: Client;
const env = () => ({ STRATA_URL: server.url, STRATA_API_KEY: KEY, XDG_STATE_HOME: join(dir, 'state') });

/** `strata ARGS` with its exit code, whether it failed or not. */
const strata = (args: string[]) =>
  cli(args, server === undefined ? {} : env()).then(
    (done) => ({ code: 0, stdout: done.stdout, stderr: done.stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({
      code: err.code,
      stdout: err.stdout,
      stderr: err.stderr,
    }),
  );

/** `strata ARGS` on a terminal (a pseudo-terminal from script(1)), as a person runs it. */
async function onTerminal(args: string[]): Promise<string> {
  const command = [process.execPath, CLI, ...args].map((arg) => `'${arg.replaceAll("'", `'\\''`)}'`).join(' ');
  const done = await run('script', ['-qec', command, '/dev/null'], { env: { ...process.env, ...env() } });
  return done.stdout.replaceAll('\r\n', '\n');
}

beforeAll(async () => {
  rememberSecret(KEY);
  server = await serveProcess(join(dir, 'data'), { STRATA_BOOTSTRAP_KEY: KEY });
  api = client(server.url, `Bearer ${KEY}`);
  await activeLocalDatabase(api, 'db');
  const created = await api.post('/v1/create_table/db', {
    table_name: 'notes',
    schema: [
      { name: 'id', type: 'i64' },
      { name: 'body', type: 'utf8' },
      { name: 'emb', type: 'vector', dim: 2 },
    ],
    indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'cosine' }] },
  });
  expect(created.status).toBe(200);
  const appended = await api.request('POST', '/v1/append/db?table=notes', {
    data: [
      { id: 1, body: 'first line\nsecond line', emb: [1, 0] },
      { id: 2, body: 'short', emb: [0, 1] },
    ],
  });
  expect(appended.status).toBe(200);
}, 120_000);

afterAll(() => {
  server?.child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** The columns of an aligned table start where its header's do, on every line. */
function expectAligned(table: string): void {
  const lines = table.trimEnd().split('\n');
  const header = lines[0] ?? '';
  const starts = [...header.matchAll(/\S+/g)].map((m) => m.index);
  const rule = lines[1] ?? '';
  expect(rule).toMatch(/^-+( {2}-+)*$/);
  expect([...rule.matchAll(/-+/g)].map((m) => m.index)).toEqual(starts);
  const body = lines.slice(2, -1);
  for (const line of body) {
    // Each column begins after a space (or after the line's end, where the last cells are empty).
    for (const start of starts.slice(1))
      expect(line[start - 1] ?? ' ', `${JSON.stringify(line)} at ${start}`).toBe(' ');
  }
  expect(lines.at(-1)).toMatch(/^\(\d+ rows?\)$/);
}

describe('--help and usage errors', () => {
  const FLAGS: Record<string, string[]> = {
    serve: Object.keys(FLAG_TO_ENV).map((flag) => `--${flag}`),
    keys: ['create', 'list', 'revoke', '--account', '--data-dir'],
    load: ['--database', '--table', '--create', '--fts', '--vector', '--scalar', '--batch-rows', '--concurrency'],
    sql: ['--database'],
    search: [
      '--database',
      '--table',
      '--text',
      '--text-field',
      '--vector',
      '--vector-field',
      '-k',
      '--filter',
      '--operator',
      '--explain',
    ],
    count: ['--database', '--table', '--field', '--operator'],
    databases: ['list', 'create', 'verify', 'delete', '--bucket', '--prefix', '--purge'],
    tables: ['list', 'schema', 'drop', '--database', '--purge'],
    upkeep: ['status', 'pause', 'resume', '--admin-key'],
  };

  test.each(Object.keys(FLAGS))('strata %s --help prints its own usage with every flag, exit 0', async (command) => {
    const help = await strata([command, '--help']);

    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(new RegExp(`^usage:\\n {2}strata ${command} `));
    for (const flag of FLAGS[command] ?? []) expect(help.stdout).toContain(flag);
    expect(help.stdout).not.toMatch(/Unknown option|unknown option/);
    if (command !== 'serve' && command !== 'keys') expect(help.stdout).toMatch(/--url URL[\s\S]*--format F/);
  });

  test('an unknown option is named in our words, with the command usage, exit 2', async () => {
    const bad = await strata(['load', 'x.csv', '--database', 'db', '--table', 't', '--colour', 'blue']);

    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^strata load: unknown option --colour\nusage:\n {2}strata load /);
    expect(bad.stderr).not.toMatch(/To specify a positional argument|"--colour"'/);
    expect(bad.stderr).not.toMatch(/strata keys create/);
  });
});

describe('what the service answers', () => {
  test('tables list, databases list and tables schema are aligned tables on a terminal', async () => {
    const tables = await onTerminal(['tables', 'list', '--database', 'db']);
    expect(tables).toMatch(/^table_name +num_rows +last_upkeep_ms\n-+ +-+ +-+\nnotes +2 +(\d+)?\n\(1 row\)\n$/);
    expectAligned(tables);

    const databases = await onTerminal(['databases', 'list']);
    expect(databases).toMatch(/^name +state +created_ms +external_id\n/);
    expect(databases).toMatch(/\ndb +active +\d+ +ext_/);
    expectAligned(databases);

    const schema = await onTerminal(['tables', 'schema', 'notes', '--database', 'db']);
    expectAligned(schema);
    expect(schema).toMatch(/^name +type +nullable +dim +indexes\n/);
    expect(schema).toMatch(/\nbody +utf8 +true +fts \(ascii_lower\)\n/);
    expect(schema).toMatch(/\nemb +vector +true +2 +vector \(cosine\)\n/);
  });

  test('in a pipe, lists are JSON lines; a schema keeps the index declarations as the service gives them', async () => {
    const tables = await strata(['tables', 'list', '--database', 'db']);
    expect(tables.stdout).toMatch(/^\{"table_name":"notes","num_rows":2,"last_upkeep_ms":(null|\d+)\}\n$/);

    const schema = await strata(['tables', 'schema', 'notes', '--database', 'db']);
    const columns = schema.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(columns.map((c) => c.name)).toEqual(['id', 'body', 'emb']);
    expect(columns[1]).toMatchObject({ indexes: [{ kind: 'fts', analyzer: 'ascii_lower' }] });
    expect(columns[2]).toMatchObject({ dim: 2, indexes: [{ kind: 'vector', metric: 'cosine' }] });
  });

  test('a cell with a line break stays on its row of the table', async () => {
    const rows = await strata([
      'sql',
      '--database',
      'db',
      '--format',
      'table',
      'SELECT id, body FROM notes ORDER BY id',
    ]);

    expect(rows.stdout.split('\n')).toEqual([
      'id  body',
      '--  -----------------------',
      '1   first line\\nsecond line',
      '2   short',
      '(2 rows)',
      '',
    ]);
    expectAligned(rows.stdout);
  });

  test('HUGEINT and DECIMAL values are JSON strings once, as the service answers them', async () => {
    const query =
      'SELECT 170141183460469231731687303715884105727::HUGEINT AS huge, sum(id)::HUGEINT AS small, 12.50::DECIMAL(10,2) AS money, -0.05::DECIMAL(4,2) AS cents FROM notes';
    const printed = await strata(['sql', '--database', 'db', '--format', 'json', query]);
    const served = await api.request<{ data: Record<string, unknown>[] }>(
      'POST',
      '/v1/query_sql/db',
      { query },
      { accept: 'application/json' },
    );

    expect(JSON.parse(printed.stdout)).toEqual({
      huge: '170141183460469231731687303715884105727',
      small: 3,
      money: '12.50',
      cents: '-0.05',
    });
    expect(JSON.parse(printed.stdout)).toEqual(served.json.data[0]);
  });
});
