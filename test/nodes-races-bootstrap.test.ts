import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { newSecret } from '../src/control/keys.js';
import { rememberSecret } from './support/logs.js';
import { freshControlUrl } from './support/postgres.js';
import { cli, type Served, serveProcess } from './support/processes.js';
import { client } from './support/server.js';

/**
 * Nodes started at the same moment on an empty PostgreSQL: every one of them serves, and exactly one key is made
 * (and, when none was configured, printed once). Three `strata serve` processes per round, four rounds each with
 * and without STRATA_BOOTSTRAP_KEY (about 60 s). Rounds alternate between a fresh database and one whose schema
 * exists but holds no key (a CLI listed the keys first): on a fresh one the nodes queue for the migrations and
 * start their bootstrap a little apart, so the race there is narrow; without migrations to run it is lost in most
 * rounds. Then one node on SQLite, whose store makes the first key the same way.
 */

const ROUNDS = 4;
const PRINTED = /No API key existed[^\n]*\n\n(sk_[A-Za-z0-9_-]+)\n/g;

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

interface Started {
  served: Served[];
  failures: string[];
  keyRows: number;
}

/**
 * Three nodes started at once on a fresh control database (its schema made first when `migrated`); what started,
 * what failed, and the keys it holds.
 */
async function startTogether(env: Record<string, string>, migrated: boolean): Promise<Started> {
  const controlUrl = await freshControlUrl();
  if (migrated) await cli(['keys', 'list'], { STRATA_CONTROL_URL: controlUrl });
  const dataDir = mkdtempSync(join(tmpdir(), 'strata-bootstrap-races-'));
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const settled = await Promise.allSettled(
    [0, 1, 2].map(() => serveProcess(dataDir, { ...env, STRATA_CONTROL_URL: controlUrl })),
  );
  const served = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  cleanups.push(() => {
    for (const node of served) node.child.kill('SIGKILL');
  });
  const failures = settled.flatMap((s) => (s.status === 'rejected' ? [String(s.reason)] : []));
  const control = new pg.Client({ connectionString: controlUrl });
  await control.connect();
  try {
    const rows = await control.query<{ n: string }>('SELECT count(*) AS n FROM api_keys');
    return { served, failures, keyRows: Number(rows.rows[0]?.n) };
  } finally {
    await control.end();
  }
}

describe('three nodes started at once on an empty PostgreSQL', () => {
  test('with STRATA_BOOTSTRAP_KEY: all three serve, with that one key', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const secret = newSecret();
      rememberSecret(secret);
      const { served, failures, keyRows } = await startTogether({ STRATA_BOOTSTRAP_KEY: secret }, round % 2 === 1);

      expect(failures).toEqual([]);
      expect(keyRows).toBe(1);
      for (const node of served) {
        expect((await client(node.url, `Bearer ${secret}`).get('/v1/databases')).status).toBe(200);
        expect(node.output()).not.toContain('No API key existed');
      }
      for (const node of served) node.child.kill('SIGKILL');
    }
  }, 90_000);

  test('without one: all three serve, and exactly one key was made and printed once', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const { served, failures, keyRows } = await startTogether({}, round % 2 === 1);

      expect(failures).toEqual([]);
      expect(keyRows).toBe(1);
      const printed = served.flatMap((node) => [...node.output().matchAll(PRINTED)].map((m) => m[1] ?? ''));
      expect(printed).toHaveLength(1);
      const secret = printed[0] ?? '';
      rememberSecret(secret);
      for (const node of served) {
        expect((await client(node.url, `Bearer ${secret}`).get('/v1/databases')).status).toBe(200);
      }
      for (const node of served) node.child.kill('SIGKILL');
    }
  }, 90_000);
});

describe('one node on its embedded SQLite store', () => {
  test('it makes and prints its one key, and a restart makes none', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'strata-bootstrap-sqlite-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const first = await serveProcess(dataDir);
    const printed = [...first.output().matchAll(PRINTED)].map((m) => m[1] ?? '');
    expect(printed).toHaveLength(1);
    const secret = printed[0] ?? '';
    rememberSecret(secret);
    expect((await client(first.url, `Bearer ${secret}`).get('/v1/databases')).status).toBe(200);
    first.child.kill('SIGTERM');
    await first.exited;

    const again = await serveProcess(dataDir);
    cleanups.push(() => {
      again.child.kill('SIGKILL');
    });
    expect(again.output()).not.toContain('No API key existed');
    expect((await client(again.url, `Bearer ${secret}`).get('/v1/databases')).status).toBe(200);
  }, 30_000);
});
