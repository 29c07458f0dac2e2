import { type ChildProcess, execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, test } from 'vitest';
import { rememberSecret } from './support/logs.js';
import { CLI, type Served, serveProcess } from './support/processes.js';
import { client } from './support/server.js';

/**
 * `strata serve` and `strata keys` as a user runs them: the built CLI (`dist/cli.js`) in processes of its own.
 * Slow: about 17 s, a `strata serve` process per test and `strata` run some ten times besides.
 */

const run = promisify(execFile);
const dirs: string[] = [];
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'strata-cli-'));
  dirs.push(dir);
  return dir;
}

/** `strata serve` as its own process, stopped after the file's tests. */
async function serve(dataDir: string, env: Record<string, string> = {}): Promise<Served> {
  const served = await serveProcess(dataDir, env);
  children.push(served.child);
  return served;
}

const cli = async (...args: string[]) => run(process.execPath, [CLI, ...args]);
const keysIn = (text: string) => text.match(/sk_[A-Za-z0-9_-]{32,}/g) ?? [];

describe('strata serve and strata keys', () => {
  test('first start prints one new key for account default; later starts print none', async () => {
    const dataDir = tempDir();
    const first = await serve(dataDir);
    const printed = keysIn(first.output());
    printed.forEach(rememberSecret);

    expect(printed).toHaveLength(1);
    const api = client(first.url, `Bearer ${printed[0]}`);
    expect((await api.get('/v1/databases')).status).toBe(200);

    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const second = await serve(dataDir);
    expect(keysIn(second.output())).toEqual([]);
    expect((await client(second.url, `Bearer ${printed[0]}`).get('/v1/databases')).status).toBe(200);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  test('keys are created, listed and revoked while the server runs; logs never carry one', async () => {
    const dataDir = tempDir();
    const bootstrap = `sk_${'b'.repeat(40)}`;
    rememberSecret(bootstrap);
    const server = await serve(dataDir, { STRATA_BOOTSTRAP_KEY: bootstrap });
    expect(keysIn(server.output())).toEqual([]);

    const created = await cli('keys', 'create', '--account', 'acme', '--data-dir', dataDir);
    const secret = created.stdout.trim();
    rememberSecret(secret);
    expect(secret).toMatch(/^sk_[A-Za-z0-9_-]{43}$/);
    const api = client(server.url, `Bearer ${secret}`);
    const registered = await api.post('/v1/databases', { name: 'mine', storage: { provider: 'local', bucket: 'm' } });
    expect(registered.status).toBe(201);
    const boot = client(server.url, `Bearer ${bootstrap}`);
    expect((await boot.get<{ databases: unknown[] }>('/v1/databases')).json.databases).toEqual([]);

    const listed = await cli('keys', 'list', '--data-dir', dataDir);
    const rows = listed.stdout
      .trim()
      .split('\n')
      .map((line) => line.split('\t'));
    expect(rows.map((row) => row[1])).toEqual(['default', 'acme']);
    expect(keysIn(listed.stdout)).toEqual([]);
    const id = rows[1]?.[0] ?? '';

    const revoked = await cli('keys', 'revoke', id, '--data-dir', dataDir);
    expect(revoked.stdout).toMatch(`revoked ${id}`);
    const refused = await api.get('/v1/databases');
    expect(refused.status).toBe(401);
    expect((await cli('keys', 'list', '--data-dir', dataDir)).stdout).toMatch(
      new RegExp(`${id}\\tacme\\t\\S+\\trevoked`),
    );

    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    const logLines = server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'));
    expect(logLines.length).toBeGreaterThan(3);
    expect(keysIn(logLines.join('\n'))).toEqual([]);
  });

  test('bad usage exits non-zero and says how to call it', async () => {
    const dataDir = tempDir();
    const missingAccount = await cli('keys', 'create', '--data-dir', dataDir).catch(
      (err: { code: number; stderr: string }) => err,
    );
    const unknownRevoke = await cli('keys', 'revoke', 'key_nope', '--data-dir', dataDir).catch(
      (err: { code: number; stderr: string }) => err,
    );
    const badFlag = await cli('serve', '--colour', 'blue').catch((err: { code: number; stderr: string }) => err);

    expect(missingAccount).toMatchObject({ code: 2, stderr: expect.stringMatching(/--account NAME/) });
    expect(unknownRevoke).toMatchObject({ code: 1, stderr: expect.stringMatching(/no active key with id key_nope/) });
    expect(badFlag).toMatchObject({ code: 2, stderr: expect.stringMatching(/unknown option --colour/) });
  });

  test('a bare strata prints the usage and exits 2 instead of starting a server', async () => {
    const cwd = tempDir();

    const bare = await run(process.execPath, [CLI], { cwd, timeout: 10_000 }).catch(
      (err: { code: number; stdout: string; stderr: string }) => err,
    );

    expect(bare).toMatchObject({ code: 2, stdout: '', stderr: expect.stringMatching(/^usage:\n {2}strata serve /) });
    expect(bare.stderr).toMatch(/strata keys create --account NAME/);
    expect(readdirSync(cwd)).toEqual([]);
  });
});
