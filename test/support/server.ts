import { afterAll, beforeAll } from 'vitest';
import type { Env } from '../../src/config.js';
import { activeLocalDatabase, type Client, startStrata, type TestServer } from './strata.js';

export * from './strata.js';

/** A test file's server and a client of its account, usable from the file's tests on. */
export interface FileServer {
  strata: TestServer;
  api: Client;
}

/**
 * One server for the whole test file: started before its tests (with a client of `account`, and an active local
 * database when one is named) and closed after them. What it returns can be held at the top of the file and used
 * inside tests.
 */
export function serveFile(env: Env = {}, options: { account?: string; database?: string } = {}): FileServer {
  let server: TestServer | undefined;
  let account: Client | undefined;
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the file server is used before its beforeAll ran');
    return value;
  };
  beforeAll(async () => {
    server = await startStrata(env);
    account = await server.as(options.account ?? 'acme');
    if (options.database !== undefined) await activeLocalDatabase(account, options.database);
  });
  afterAll(() => server?.close());
  const strata: TestServer = {
    get url() {
      return started(server).url;
    },
    get dataDir() {
      return started(server).dataDir;
    },
    get app() {
      return started(server).app;
    },
    as: (name) => started(server).as(name),
    withAuth: (authorization) => started(server).withAuth(authorization),
    close: () => started(server).close(),
  };
  const api: Client = {
    get auth() {
      return started(account).auth;
    },
    raw: (method, path, body, headers) => started(account).raw(method, path, body, headers),
    request: <T>(method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
      started(account).request<T>(method, path, body, headers),
    get: <T>(path: string) => started(account).get<T>(path),
    post: <T>(path: string, body?: unknown) => started(account).post<T>(path, body),
    del: <T>(path: string) => started(account).del<T>(path),
  };
  return { strata, api };
}
