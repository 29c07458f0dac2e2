import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { activeLocalDatabase, eventually, serveFile, startStrata, stateOf } from './support/server.js';

const { strata, api } = serveFile();

const local = (name: string, storage: Record<string, unknown> = {}) =>
  api.post('/v1/databases', { name, storage: { provider: 'local', bucket: name, ...storage } });

describe('register', () => {
  test('a local database is registered unverified and answered 201', async () => {
    const before = Date.now();
    const res = await local('alpha');

    expect(res.status).toBe(201);
    expect(res.json).toEqual({
      name: 'alpha',
      created_ms: expect.any(Number),
      state: 'unverified',
      external_id: expect.stringMatching(/^ext_[0-9a-f]{32}$/),
    });
    expect(res.json.created_ms).toBeGreaterThanOrEqual(before);
  });

  test('the same name twice in one account is 409', async () => {
    await local('twice');
    const res = await local('twice');

    expect(res.status).toBe(409);
    expect(res.json.error).toMatch(/"twice" is already registered/);
    expect(res.json.code).toBe('database_exists');
  });

  test.each([
    ['an empty name', { name: '', storage: { provider: 'local', bucket: 'b' } }, /body.name/],
    ['a leading underscore', { name: '_x', storage: { provider: 'local', bucket: 'b' } }, /body.name must be 1–128/],
    ['a dot in the name', { name: 'a.b', storage: { provider: 'local', bucket: 'b' } }, /body.name must be 1–128/],
    ['129 characters', { name: 'a'.repeat(129), storage: { provider: 'local', bucket: 'b' } }, /body.name/],
    ['no storage', { name: 'x' }, /missing required property "storage"/],
    ['no provider', { name: 'x', storage: { bucket: 'b' } }, /body.storage is missing required property "provider"/],
    ['an unknown provider', { name: 'x', storage: { provider: 'gcs', bucket: 'b' } }, /body.storage.provider/],
    [
      'an unknown top-level property',
      { name: 'x', storage: { provider: 'local', bucket: 'b' }, extra: 1 },
      /unknown property "extra"/,
    ],
    [
      'an s3 field on local',
      { name: 'x', storage: { provider: 'local', bucket: 'b', region: 'eu-west-1' } },
      /body.storage has unknown property "region"/,
    ],
    [
      'an unknown s3 property',
      { name: 'x', storage: { provider: 's3', bucket: 'bkt', color: 'red' } },
      /unknown property "color"/,
    ],
    ['a number for a name', { name: 5, storage: { provider: 'local', bucket: 'b' } }, /body.name must be string/],
    [
      'a string for requester_pays',
      { name: 'x', storage: { provider: 's3', bucket: 'bkt', requester_pays: 'yes' } },
      /requester_pays must be boolean/,
    ],
    ['a malformed role_arn', { name: 'x', storage: { provider: 's3', bucket: 'bkt', role_arn: 'admin' } }, /role_arn/],
  ])('%s is 400 naming the field', async (_, body, message) => {
    const res = await api.post('/v1/databases', body);

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
  });

  test.each([['..'], ['.'], ['a/b'], ['with space']])('bucket folder %j is refused with 422', async (bucket) => {
    const res = await api.post('/v1/databases', { name: 'badfolder', storage: { provider: 'local', bucket } });

    expect(res.status).toBe(422);
    expect(res.json.error).toMatch(/storage binding refused: bucket/);
  });

  test.each([['../escape'], ['a/../../b'], ['./x']])('prefix %j is refused with 422', async (prefix) => {
    const res = await local('badprefix', { prefix });

    expect(res.status).toBe(422);
    expect(res.json.error).toMatch(/storage binding refused: prefix/);
  });

  test('the local provider can be switched off', async () => {
    const off = await startStrata({ STRATA_LOCAL_STORAGE: '0' });
    try {
      const res = await (await off.as('acme')).post('/v1/databases', {
        name: 'x',
        storage: { provider: 'local', bucket: 'x' },
      });

      expect(res.status).toBe(422);
      expect(res.json.error).toMatch(/local provider is switched off/);
    } finally {
      await off.close();
    }
  });
});

describe('list', () => {
  test('lists only this account, sorted by name', async () => {
    const own = await strata.as('lister');
    for (const name of ['zeta', 'Beta', 'alpha', 'beta-2']) {
      await own.post('/v1/databases', { name, storage: { provider: 'local', bucket: `l-${name}` } });
    }

    const res = await own.get<{ databases: { name: string; state: string }[] }>('/v1/databases');

    expect(res.status).toBe(200);
    expect(res.json.databases.map((d) => d.name)).toEqual(['Beta', 'alpha', 'beta-2', 'zeta']);
    expect(res.json.databases.every((d) => d.state === 'unverified')).toBe(true);
  });
});

describe('verify', () => {
  test('passes every step on a local folder and the database becomes active', async () => {
    await local('verified', { prefix: 'team/one' });

    const res = await api.post<{ state: string; checks: { step: string; ok: boolean }[] }>(
      '/v1/databases/verified/storage/verify',
    );

    expect(res.status).toBe(200);
    expect(res.json.state).toBe('activating');
    expect(res.json.checks.map((c) => [c.step, c.ok])).toEqual([
      ['credentials', true],
      ['put', true],
      ['get', true],
      ['list', true],
      ['conditional_put', true],
      ['delete', true],
    ]);
    expect(
      await eventually(
        () => stateOf(api, 'verified'),
        (s) => s === 'active',
      ),
    ).toBe('active');
    expect(readdirSync(join(strata.dataDir, 'buckets', 'verified', 'team', 'one', '_strata', 'verify'))).toEqual([]);
  });

  test('an unknown database is 404', async () => {
    const res = await api.post('/v1/databases/nope/storage/verify');

    expect(res.status).toBe(404);
    expect(res.json.error).toBe('database "nope" not found');
    expect(res.json.code).toBe('unknown_database');
  });

  test('an invalid name in the path is 400', async () => {
    const res = await api.post('/v1/databases/_reserved/storage/verify');

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/path parameter name must be 1–128/);
  });

  test('a bucket folder that is a symbolic link fails at credentials and the state is verify_failed', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'strata-outside-'));
    try {
      mkdirSync(join(strata.dataDir, 'buckets'), { recursive: true });
      symlinkSync(outside, join(strata.dataDir, 'buckets', 'linked'));
      await api.post('/v1/databases', { name: 'linked', storage: { provider: 'local', bucket: 'linked' } });

      const res = await api.post('/v1/databases/linked/storage/verify');

      expect(res.status).toBe(422);
      expect(res.json.error).toMatch(/^storage verification failed at credentials: SymbolicLink/);
      expect(res.json.state).toBe('verify_failed');
      expect(await stateOf(api, 'linked')).toBe('verify_failed');
      expect(readdirSync(outside)).toEqual([]);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  test('a prefix component that is a symbolic link is refused too', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'strata-outside-p-'));
    try {
      mkdirSync(join(strata.dataDir, 'buckets', 'deep'), { recursive: true });
      symlinkSync(outside, join(strata.dataDir, 'buckets', 'deep', 'inner'));
      await local('deep', { prefix: 'inner/data' });

      const res = await api.post('/v1/databases/deep/storage/verify');

      expect(res.status).toBe(422);
      expect(res.json.error).toMatch(/at credentials: SymbolicLink/);
      expect(existsSync(join(outside, 'data'))).toBe(false);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  test('a failed verification that later passes recovers to active', async () => {
    const blocker = join(strata.dataDir, 'buckets', 'recovers');
    mkdirSync(join(strata.dataDir, 'buckets'), { recursive: true });
    writeFileSync(blocker, 'a file where the folder should be');
    await local('recovers');

    const failed = await api.post('/v1/databases/recovers/storage/verify');
    expect(failed.status).toBe(422);
    expect(failed.json.step).toBe('credentials');

    rmSync(blocker);
    const passed = await api.post('/v1/databases/recovers/storage/verify');

    expect(passed.status).toBe(200);
    expect(
      await eventually(
        () => stateOf(api, 'recovers'),
        (s) => s === 'active',
      ),
    ).toBe('active');
  });
});

describe('delete', () => {
  test('removes the database; purge=true deletes the datasets it wrote and nothing else', async () => {
    await activeLocalDatabase(api, 'keepme');
    await activeLocalDatabase(api, 'purgeme');
    const tables = (name: string) => join(strata.dataDir, 'buckets', name, 'tables');
    for (const name of ['keepme', 'purgeme']) {
      const created = await api.post(`/v1/create_table/${name}`, {
        table_name: 'own',
        schema: [{ name: 'id', type: 'i64' }],
      });
      expect(created.status).toBe(200);
      // What the database did not write: a dataset folder it never created, and the customer's own file.
      mkdirSync(join(tables(name), 't.lance'), { recursive: true });
      writeFileSync(join(tables(name), 't.lance', 'data.lance'), 'rows');
      writeFileSync(join(strata.dataDir, 'buckets', name, 'customer.txt'), 'theirs');
    }
    expect(readdirSync(tables('purgeme'))).toHaveLength(2);

    const kept = await api.del('/v1/databases/keepme');
    const purged = await api.del('/v1/databases/purgeme?purge=true');

    expect(kept.status).toBe(200);
    expect(kept.json).toEqual({ name: 'keepme', purged: false });
    expect(purged.json).toEqual({ name: 'purgeme', purged: true });
    expect(readdirSync(tables('keepme'))).toHaveLength(2);
    expect(readdirSync(tables('purgeme'))).toEqual(['t.lance']);
    expect(existsSync(join(strata.dataDir, 'buckets', 'purgeme', 'customer.txt'))).toBe(true);
    expect(await stateOf(api, 'keepme')).toBeUndefined();
    expect((await api.del('/v1/databases/keepme')).status).toBe(404);
  });

  test('a bad purge value is 400', async () => {
    await local('purgeflag');
    const res = await api.del('/v1/databases/purgeflag?purge=yes');

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/query parameter purge/);
  });

  test('the name can be registered again after a delete', async () => {
    await local('again');
    await api.del('/v1/databases/again');

    expect((await local('again')).status).toBe(201);
  });
});

describe('tenancy', () => {
  test("another account's database is 404 on every route, and its name stays free", async () => {
    await activeLocalDatabase(api, 'private');
    const other = await strata.as('other');

    const verify = await other.post('/v1/databases/private/storage/verify');
    const del = await other.del('/v1/databases/private');
    const list = await other.get<{ databases: unknown[] }>('/v1/databases');
    const own = await other.post('/v1/databases', {
      name: 'private',
      storage: { provider: 'local', bucket: 'theirs' },
    });

    expect(verify.status).toBe(404);
    expect(verify.json.error).toBe('database "private" not found');
    expect(verify.json.code).toBe('unknown_database');
    expect(del.status).toBe(404);
    expect(list.json.databases).toEqual([]);
    expect(own.status).toBe(201);
    const after = await other.get<{ databases: { state: string }[] }>('/v1/databases');
    expect(after.json.databases).toEqual([
      { name: 'private', created_ms: expect.any(Number), state: 'unverified', external_id: expect.any(String) },
    ]);
    expect(await stateOf(api, 'private')).toBe('active');
  });
});

describe('names at their limits', () => {
  test('names of 101 to 128 characters reach their routes', async () => {
    const name = 'n'.repeat(128);
    expect((await api.post('/v1/databases', { name, storage: { provider: 'local', bucket: name } })).status).toBe(201);

    const verified = await api.post(`/v1/databases/${name}/storage/verify`);
    const tooLong = await api.post(`/v1/databases/${'n'.repeat(300)}/storage/verify`);

    expect(verified.status).toBe(200);
    expect(tooLong.status).toBe(414);
    expect(tooLong.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});
