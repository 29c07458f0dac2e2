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

let server: TestPostgres | undefined;

/**
 * One PostgreSQL server for the whole test run; each test file makes its own database on it. A failure is written
 * to stderr here: vitest may end the run with exit 1 and nothing else when a global set-up rejects.
 */
export async function setup(project: TestProject): Promise<void> {
  try {
    server = await startPostgres(await freePort());
  } catch (err) {
    process.stderr.write(
      `\nThe test run's PostgreSQL did not start: ${err instanceof Error ? err.message : String(err)}\n\n`,
    );
    throw err;
  }
  project.provide('pgServerUrl', server.serverUrl);
}

export async function teardown(): Promise<void> {
  await server?.destroy();
}
