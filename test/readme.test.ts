import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, test } from 'vitest';
import { rememberSecret } from './support/logs.js';
import { client, freePort } from './support/server.js';

/**
 * The README's walk-through and its shell block, run as written (curl, and the built `strata`) against fresh
 * `strata serve` processes. Slow: about 9 s, two server processes and every request of the walk-through.
 */

const run = promisify(execFile);
const CLI = join(import.meta.dirname, '..', 'dist', 'cli.js');
const README = readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8');
const KEY = `sk_${'r'.repeat(43)}`;
/** Put right before a ```sh block of the walk-through that cannot run here (it needs AWS). */
const SKIP = /<!-- readme-test: skip \([^)]*\) -->\s*$/;

const dataDir = mkdtempSync(join(tmpdir(), 'strata-readme-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

interface Block {
  code: string;
  skipped: boolean;
}

/** The ```sh blocks of the README's "Walk-through" section, in order. */
function walkThrough(markdown: string): Block[] {
  const start = markdown.indexOf('\n## Walk-through\n');
  if (start < 0) throw new Error('README has no "## Walk-through" section');
  const end = markdown.indexOf('\n## ', start + 1);
  const section = markdown.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => ({
    code: m[1] as string,
    skipped: SKIP.test(section.slice(0, m.index)),
  }));
}

/** `strata serve` as its own process, as `npm start` runs it, with a key the walk-through can use. */
async function serve(data = dataDir): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, 'serve', '--data-dir', data, '--port', String(port)], {
    env: { ...process.env, STRATA_BOOTSTRAP_KEY: KEY, STRATA_LOG_LEVEL: 'warn' },
    stdio: 'ignore',
  });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  const up = async () => (await fetch(`${url}/healthz`).catch(() => undefined))?.ok === true;
  for (let i = 0; i < 400; i++) {
    if (await up()) return url;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('server did not start');
}

/**
 * The blocks as one bash script: the walk-through's own `URL=` and `KEY=` lines point at this server, and `curl`
 * fails on any status over 399 (showing the error body) and reports every status on stderr.
 */
function script(blocks: readonly Block[], url: string): string {
  const preamble = [
    'set -euo pipefail',
    `curl() { command curl --fail-with-body --show-error --write-out '%{stderr}readme-test: %{http_code} %{method} %{url_effective}\\n' "$@"; }`,
  ];
  const body = blocks.flatMap((block, i) =>
    block.skipped
      ? []
      : [
          `echo 'readme-test: block ${i + 1}' >&2`,
          block.code.replace(/^URL=.*$/m, `URL=${url}`).replace(/^KEY=.*$/m, `KEY=${KEY}`),
        ],
  );
  return [...preamble, ...body].join('\n');
}

test("the README's walk-through runs top to bottom against a fresh server, every request answered 2xx", async () => {
  rememberSecret(KEY);
  const blocks = walkThrough(README);
  const ran = blocks.filter((block) => !block.skipped);
  expect(ran.length).toBeGreaterThanOrEqual(5);
  expect(blocks.filter((block) => block.skipped).map((block) => block.code)).toEqual([
    expect.stringMatching(/"provider": "s3"/),
  ]);
  // The walk-through says where the server is and which key to send; the test's own take their place.
  expect(ran[0]?.code).toMatch(/^URL=http:\/\/127\.0\.0\.1:8080$/m);
  expect(ran[0]?.code).toMatch(/^KEY=sk_/m);
  expect(ran.map((block) => block.code).join('\n')).not.toMatch(/localhost|:8080\//);

  const url = await serve();
  const path = join(dataDir, 'walk-through.sh');
  writeFileSync(path, script(blocks, url));
  const done = await run('bash', [path], { timeout: 90_000, maxBuffer: 16 * 1024 * 1024 }).catch(
    (err: { code: number; stdout: string; stderr: string }) => err,
  );

  const statuses = done.stderr
    .split('\n')
    .filter((line) => /^readme-test: \d{3} /.test(line))
    .map((line) => line.slice('readme-test: '.length));
  expect(done, `walk-through failed:\n${done.stderr}\n${done.stdout}`).not.toHaveProperty('code');
  expect(statuses.filter((status) => !/^2\d\d /.test(status))).toEqual([]);
  // Every curl of the blocks that ran was reached (the wait loop may add a few).
  const curls = ran.reduce((n, block) => n + (block.code.match(/^\s*(?:until )?curl /gm)?.length ?? 0), 0);
  expect(statuses.length).toBeGreaterThanOrEqual(curls);
  // It ends by deleting its database, after everything else, and leaves the server as it found it.
  expect(statuses.at(-1)).toMatch(/^200 DELETE .*\/v1\/databases\/shop\?purge=true$/);
  const api = client(url, `Bearer ${KEY}`);
  expect((await api.get<{ databases: unknown[] }>('/v1/databases')).json.databases).toEqual([]);
}, 120_000);

/** The ```sh block of the README's "From the shell" section. */
function shellBlock(markdown: string): string {
  const start = markdown.indexOf('\n## From the shell\n');
  if (start < 0) throw new Error('README has no "## From the shell" section');
  const block = /```sh\n([\s\S]*?)```/.exec(markdown.slice(start));
  if (block === null) throw new Error('"From the shell" has no ```sh block');
  return block[1] as string;
}

test("the README's shell block runs as written from the repository, against a fresh server", async () => {
  const block = shellBlock(README);
  expect(block).toMatch(/^export STRATA_URL=http:\/\/127\.0\.0\.1:8080 STRATA_API_KEY=sk_\.\.\.$/m);

  const url = await serve(join(dataDir, 'shell'));
  // `npx strata` is this checkout's CLI; the block's own export points it at this server.
  const preamble = ['set -euo pipefail', `npx() { [ "$1" = strata ] && shift; node ${CLI} "$@"; }`];
  const path = join(dataDir, 'shell.sh');
  writeFileSync(
    path,
    [...preamble, block.replace(/^export .*$/m, `export STRATA_URL=${url} STRATA_API_KEY=${KEY}`)].join('\n'),
  );
  const done = await run('bash', [path], {
    cwd: join(import.meta.dirname, '..'),
    env: { ...process.env, XDG_STATE_HOME: join(dataDir, 'state') },
    timeout: 90_000,
  }).catch((err: { code: number; stdout: string; stderr: string }) => err);

  expect(done, `shell block failed:\n${done.stderr}\n${done.stdout}`).not.toHaveProperty('code');
  expect(done.stderr).toMatch(/loaded 12 rows/);
  const lines = done.stdout.trim().split('\n');
  expect(lines).toContain('{"count_star()":12}');
  expect(lines.filter((line) => line.includes('"title":"The Lance format"'))).toHaveLength(1);
  expect(lines).toContainEqual(expect.stringMatching(/^\{"table_name":"articles","num_rows":12,"last_upkeep_ms":/));
  expect(lines).toContainEqual(expect.stringMatching(/^\{"name":"body","type":"utf8".*"kind":"fts"/));
}, 120_000);
