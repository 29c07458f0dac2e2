import { createServer } from 'node:net';
import type { TestProject } from 'vitest/node';
import { startPostgres, type TestPostgres } from './postgres-server.js';

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const address = probe.address();
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** The server, shared by every project of the run that asks for it (service and slow): one vitest process, one PostgreSQL. */
interface Shared {
  server: Promise<TestPostgres>;
  projects: number;
}
const SHARED = Symbol.for('strata.test.postgres');
const run = globalThis as { [SHARED]?: Shared };

async function start(): Promise<TestPostgres> {
  try {
    return await startPostgres(await freePort());
  } catch (err) {
    process.stderr.write(
      `\nThe test run's PostgreSQL did not start: ${err instanceof Error ? err.message : String(err)}\n\n`,
    );
    throw err;
  }
}

/**
 * One PostgreSQL server for the whole test run, started by the first project that needs it and stopped after the
 * last; each test file makes its own database on it. A failure is written to stderr here: vitest may end the run
 * with exit 1 and nothing else when a global set-up rejects.
 */
export async function setup(project: TestProject): Promise<void> {
  run[SHARED] ??= { server: start(), projects: 0 };
  const shared = run[SHARED];
  shared.projects++;
  project.provide('pgServerUrl', (await shared.server).serverUrl);
}

export async function teardown(): Promise<void> {
  const shared = run[SHARED];
  if (shared === undefined || --shared.projects > 0) return;
  delete run[SHARED];
  await (await shared.server.catch(() => undefined))?.destroy();
}
