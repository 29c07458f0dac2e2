// Test servers and clients with no tie to vitest, so that the fuzz harness (a plain script) can use them too.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { type Env, loadConfig } from '../../src/config.js';
import { issueKey } from '../../src/control/keys.js';
import { openControlStore } from '../../src/control/open.js';
import type { TableHandle } from '../../src/engine/tables/tables.js';
import type { HeldTails } from '../../src/engine/upkeep/upkeep.js';
import { buildService } from '../../src/node.js';
import { logSink, rememberSecret } from './logs.js';

export interface Reply<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  json: T;
}

export interface Client {
  /** The Authorization header this client sends (empty when none). */
  auth: Record<string, string>;
  /** The raw fetch response, for bodies that are not JSON. */
  raw(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
  request<T = Record<string, unknown>>(
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<Reply<T>>;
  get<T = Record<string, unknown>>(path: string): Promise<Reply<T>>;
  post<T = Record<string, unknown>>(path: string, body?: unknown): Promise<Reply<T>>;
  del<T = Record<string, unknown>>(path: string): Promise<Reply<T>>;
}

export interface TestServer {
  url: string;
  dataDir: string;
  app: FastifyInstance;
  /** A client holding a fresh key of the named account (created on first use). */
  as(account: string): Promise<Client>;
  /** A client sending exactly this Authorization header (or none). */
  withAuth(authorization: string | undefined): Client;
  close(): Promise<void>;
}

export function client(url: string, authorization: string | undefined): Client {
  const auth: Record<string, string> = authorization === undefined ? {} : { authorization };
  const raw = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const all: Record<string, string> = { ...auth, ...headers };
    const init: RequestInit = { method, headers: all };
    if (body !== undefined) {
      all['content-type'] ??= 'application/json';
      init.body = typeof body === 'string' || body instanceof Uint8Array ? (body as BodyInit) : JSON.stringify(body);
    }
    return fetch(`${url}${path}`, init);
  };
  const request = async <T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await raw(method, path, body, headers);
    const text = await res.text();
    let json: unknown = {};
    if (text !== '') {
      try {
        json = JSON.parse(text);
      } catch {
        json = { text };
      }
    }
    return { status: res.status, headers: res.headers, json: json as T };
  };
  return {
    auth,
    raw,
    request,
    get: (path) => request('GET', path),
    post: (path, body) => request('POST', path, body),
    del: (path) => request('DELETE', path),
  };
}

/** A real Strata on an ephemeral loopback port, with its own data dir, logging into the test's capture. */
export async function startStrata(env: Env = {}): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'strata-test-'));
  const config = loadConfig({ STRATA_DATA_DIR: dataDir, STRATA_PORT: '0', STRATA_LOG_LEVEL: 'info', ...env });
  const store = await openControlStore(config);
  const app = await buildService({ config, store, logStream: logSink });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const url = `http://127.0.0.1:${address.port}`;
  return {
    url,
    dataDir,
    app,
    async as(account) {
      const key = await issueKey(store, account);
      rememberSecret(key.secret);
      return client(url, `Bearer ${key.secret}`);
    },
    withAuth: (authorization) => client(url, authorization),
    async close() {
      await app.close();
      // The upkeep process ends once it notices the server gone, and may write a file meanwhile.
      rmSync(dataDir, { recursive: true, force: true, maxRetries: 30, retryDelay: 100 });
    },
  };
}

/** The server's Prometheus metrics, as scraped. */
export const metricsOf = async (server: TestServer): Promise<string> => (await fetch(`${server.url}/metrics`)).text();

/** Runs one upkeep pass over acme's database `name` by hand; resolves with the server's metrics after it. */
/** Runs `check` on the open handle of acme's table `table` in database `database`, as its worker holds it. */
export async function onTableHandle(
  server: TestServer,
  database: string,
  table: string,
  check: (handle: TableHandle) => Promise<void>,
): Promise<void> {
  const account = await server.app.ctx.store.ensureAccount('acme');
  const found = await server.app.ctx.store.findDatabase(account.id, database);
  const record = await server.app.ctx.store.findTable(found?.id ?? '', table);
  const lease = server.app.ctx.workers.leaseIfPlaced(found?.id ?? '');
  if (lease === undefined || record === undefined) throw new Error('no worker');
  try {
    await check(await lease.worker.tables.handleOf(record));
  } finally {
    lease.release();
  }
}

/**
 * Runs one upkeep pass over database `name`'s open tables and answers the metrics after it. It folds every tail
 * at once unless `heldTails` is `wait`, as the interval's passes do.
 */
export async function upkeepPass(server: TestServer, name: string, heldTails: HeldTails = 'fold'): Promise<string> {
  const account = await server.app.ctx.store.ensureAccount('acme');
  const database = await server.app.ctx.store.findDatabase(account.id, name);
  const lease = server.app.ctx.workers.leaseIfPlaced(database?.id ?? '');
  try {
    await lease?.worker.upkeep.run(heldTails);
  } finally {
    lease?.release();
  }
  return metricsOf(server);
}

/** Waits for the upkeep pass under way on database `name`'s worker (one a write started, say) to end. */
export async function passEnded(server: TestServer, name: string): Promise<void> {
  const account = await server.app.ctx.store.ensureAccount('acme');
  const database = await server.app.ctx.store.findDatabase(account.id, name);
  const lease = server.app.ctx.workers.leaseIfPlaced(database?.id ?? '');
  try {
    await lease?.worker.upkeep.settled();
  } finally {
    lease?.release();
  }
}

/** Polls until `check` passes or the time is up; returns the last value. */
export async function eventually<T>(probe: () => Promise<T>, done: (value: T) => boolean, ms = 5000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (done(value) || Date.now() > until) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Registers a local-folder database, verifies it and waits until it is active. */
export async function activeLocalDatabase(api: Client, name: string, bucket = name): Promise<void> {
  const created = await api.post('/v1/databases', { name, storage: { provider: 'local', bucket } });
  if (created.status !== 201) throw new Error(`register ${name}: ${created.status} ${JSON.stringify(created.json)}`);
  const verified = await api.post(`/v1/databases/${name}/storage/verify`);
  if (verified.status !== 200) throw new Error(`verify ${name}: ${verified.status} ${JSON.stringify(verified.json)}`);
  await eventually(
    () => stateOf(api, name),
    (state) => state === 'active',
  );
}

export async function stateOf(api: Client, name: string): Promise<string | undefined> {
  const list = await api.get<{ databases: { name: string; state: string }[] }>('/v1/databases');
  return list.json.databases.find((db) => db.name === name)?.state;
}

/** A TCP port free on 127.0.0.1 right now, for servers started as their own process. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}
