import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, test } from 'vitest';

/**
 * The test run's PostgreSQL set-up (test/support/postgres-global.ts) says what failed when it cannot start the
 * server: a run that ends with exit 1 and no message leaves a new user nowhere. Runs vitest once more (about 5 s).
 */

const run = promisify(execFile);
const REPO = join(import.meta.dirname, '..');
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

// Only root's PostgreSQL runs as another user, which a private temporary folder keeps out.
test.runIf(process.getuid?.() === 0)(
  'a set-up that cannot start PostgreSQL prints why and fails the run',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-pg-setup-'));
    dirs.push(dir);
    const tmp = join(dir, 'private');
    mkdirSync(tmp);
    chmodSync(tmp, 0o700);
    writeFileSync(join(dir, 'empty.test.js'), "test('nothing', () => {});\n");
    // A configuration with nothing but the PostgreSQL set-up (no build), in a file of its own.
    writeFileSync(
      join(dir, 'vitest.config.mjs'),
      `export default { test: { root: ${JSON.stringify(dir)}, globals: true, include: ['*.test.js'],
         globalSetup: [${JSON.stringify(join(REPO, 'test', 'support', 'postgres-global.ts'))}] } };\n`,
    );

    const failed = await run('npx', ['vitest', 'run', '--config', join(dir, 'vitest.config.mjs')], {
      cwd: REPO,
      env: { ...process.env, TMPDIR: tmp },
    }).then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    );

    expect(failed?.code).toBe(1);
    expect(failed?.stderr).toMatch(
      /The test run's PostgreSQL did not start: the tests' PostgreSQL runs as postgres, who cannot enter .*private \(mode 700\).*set TMPDIR to a folder every user can enter/,
    );
  },
  60_000,
);
