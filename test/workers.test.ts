import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { admit } from '../src/engine/workers/gate.js';
import { StrataError } from '../src/errors.js';
import { statusOf } from '../src/http/errors.js';
import { activeLocalDatabase, eventually, startStrata, stateOf, type TestServer } from './support/server.js';

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function setup(env: Record<string, string> = {}) {
  const strata = await startStrata(env);
  servers.push(strata);
  const api = await strata.as('acme');
  const account = await strata.app.ctx.store.ensureAccount('acme');
  const open = async (name: string) =>
    admit(strata.app.ctx.workers, await strata.app.ctx.databases.get(account.id, name));
  return { strata, api, open };
}

async function refusal(promise: Promise<unknown>): Promise<StrataError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof StrataError)) throw new Error(`expected a StrataError, got ${String(err)}`);
  return err;
}

describe('the data-plane guard', () => {
  test('an unverified database is 409 telling the caller to verify', async () => {
    const { api, open } = await setup();
    await api.post('/v1/databases', { name: 'fresh', storage: { provider: 'local', bucket: 'fresh' } });

    const err = await refusal(open('fresh'));

    expect(statusOf(err)).toBe(409);
    expect(err.message).toMatch(/not verified yet: call POST \/v1\/databases\/fresh\/storage\/verify/);
    expect(err).toMatchObject({ kind: 'conflict', code: 'database_not_verified' });
  });

  test('a database whose verification failed is 409 carrying the failed step', async () => {
    const { strata, api, open } = await setup();
    await api.post('/v1/databases', { name: 'broken', storage: { provider: 'local', bucket: 'broken' } });
    mkdirSync(join(strata.dataDir, 'buckets'), { recursive: true });
    writeFileSync(join(strata.dataDir, 'buckets', 'broken'), 'not a folder');
    await api.post('/v1/databases/broken/storage/verify');

    const err = await refusal(open('broken'));

    expect(statusOf(err)).toBe(409);
    expect(err.message).toMatch(/failed its last storage verification \(storage verification failed at credentials/);
    expect(err).toMatchObject({ kind: 'conflict', code: 'database_verify_failed' });
  });

  test("an unknown or another account's database is 404", async () => {
    const { strata, open } = await setup();
    const other = await strata.as('other');
    await activeLocalDatabase(other, 'theirs');

    expect(statusOf(await refusal(open('theirs')))).toBe(404);
    expect(statusOf(await refusal(open('missing')))).toBe(404);
  });

  test('an active database gets its worker, held until released', async () => {
    const { strata, api, open } = await setup();
    await activeLocalDatabase(api, 'live');

    const lease = await open('live');

    expect(lease.worker.ref.name).toBe('live');
    expect(lease.worker.busy).toBe(true);
    lease.release();
    lease.release();
    expect(lease.worker.busy).toBe(false);
    expect(strata.app.ctx.workers.size).toBe(1);
  });
});

describe('capacity', () => {
  test('a full node lets the least recently used idle worker go; the evicted database stays active', async () => {
    const { strata, api, open } = await setup({ STRATA_MAX_ACTIVE_DATABASES: '1' });
    await activeLocalDatabase(api, 'first');
    await activeLocalDatabase(api, 'second');

    expect(strata.app.ctx.workers.size).toBe(1);
    expect(await stateOf(api, 'first')).toBe('active');

    const lease = await open('first');
    expect(lease.worker.ref.name).toBe('first');
    lease.release();
    expect(strata.app.ctx.workers.size).toBe(1);
  });

  test('when every worker is busy, placing another is 503 with Retry-After until one is free', async () => {
    const { api, open } = await setup({ STRATA_MAX_ACTIVE_DATABASES: '1' });
    await activeLocalDatabase(api, 'busy');
    const held = await open('busy');
    await api.post('/v1/databases', { name: 'waiting', storage: { provider: 'local', bucket: 'waiting' } });
    await api.post('/v1/databases/waiting/storage/verify');

    const err = await refusal(open('waiting'));

    expect(statusOf(err)).toBe(503);
    expect(err.retryAfterS).toBeGreaterThan(0);
    expect(await stateOf(api, 'waiting')).toBe('activating');

    const overHttp = await api.get('/v1/list_tables/waiting');
    expect(overHttp.status).toBe(503);
    expect(Number(overHttp.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(overHttp.json.error).toMatch(/no capacity is free|activating/);

    held.release();
    const lease = await eventually(
      () => open('waiting').catch(() => undefined),
      (l) => l !== undefined,
    );
    expect(lease?.worker.ref.name).toBe('waiting');
    expect(await stateOf(api, 'waiting')).toBe('active');
  });

  test('idle workers are let go after STRATA_WORKER_IDLE_MS and placed again on demand', async () => {
    const { strata, api, open } = await setup({ STRATA_WORKER_IDLE_MS: '100' });
    await activeLocalDatabase(api, 'sleepy');

    await eventually(
      async () => strata.app.ctx.workers.size,
      (n) => n === 0,
    );
    expect(strata.app.ctx.workers.size).toBe(0);
    expect(await stateOf(api, 'sleepy')).toBe('active');

    const lease = await open('sleepy');
    expect(lease.worker.ref.name).toBe('sleepy');
    lease.release();
  });

  test('a failed re-verification lets the worker go', async () => {
    const { strata, api } = await setup();
    await activeLocalDatabase(api, 'gone');
    expect(strata.app.ctx.workers.size).toBe(1);
    renameSync(join(strata.dataDir, 'buckets', 'gone'), join(strata.dataDir, 'gone-moved'));
    writeFileSync(join(strata.dataDir, 'buckets', 'gone'), 'now a file');

    const res = await api.post('/v1/databases/gone/storage/verify');

    expect(res.status).toBe(422);
    expect(strata.app.ctx.workers.size).toBe(0);
  });
});
