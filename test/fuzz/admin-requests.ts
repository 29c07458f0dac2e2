/** Requests about databases (register, list, verify, delete), the public routes, and paths no route matches. */
import fc from 'fast-check';
import type { Auth, FuzzCase } from './cases.js';
import {
  assemble,
  auths,
  brokenSegments,
  envelopes,
  jsonBytes,
  keylessAuths,
  type Mutated,
  mutate,
  percent,
  textDamages,
} from './envelope.js';
import { anyString, hostileNames, hostileValue, jsonText, weighted } from './hostile.js';
import type { World } from './world.js';

const s3Storage = fc.record(
  {
    provider: fc.constant('s3'),
    bucket: fc.constantFrom('my-bucket', 'ab', 'x'.repeat(64), 'Bad_Bucket', '..'),
    region: fc.constantFrom('us-east-1', 'eu-west-1', 'US', ''),
    endpoint: fc.constantFrom(
      'https://127.0.0.1',
      'https://localhost:1',
      'http://127.0.0.1:9',
      'https://169.254.169.254',
      'https://[::1]',
      'https://[::ffff:127.0.0.1]',
      'https://10.0.0.1',
      'https://0x7f000001',
      'https://2130706433',
      'https://127.1',
      'https://0.0.0.0',
      'https://user:pass@127.0.0.1',
      'file:///etc/passwd',
      'ftp://127.0.0.1',
      'not a url',
      '',
    ),
    prefix: fc.constantFrom('', 'p', '../..', '/abs'),
    role_arn: fc.constantFrom('arn:aws:iam::123456789012:role/fuzz', 'arn:aws:iam::1:role/x', 'nope'),
    requester_pays: fc.boolean(),
  },
  { requiredKeys: ['provider', 'bucket'] },
);

function registerBodies(world: World): fc.Arbitrary<Mutated> {
  const local = fc.record(
    {
      provider: fc.constant('local'),
      bucket: weighted(
        [6, fc.constantFrom(...world.scratchBuckets)],
        [1, fc.constantFrom('.', '..', '../x', 'a/b', '', ' ', '.hidden', 'a\\b', 'con', 'x'.repeat(300), '%2e%2e')],
      ),
      prefix: fc.constantFrom('', 'p', 'a/b', '../..', '/abs', 'a//b', 'x'.repeat(1025), '%2e%2e', '\u0000'),
    },
    { requiredKeys: ['provider', 'bucket'] },
  );
  const localDb = fc.record({
    name: weighted([6, fc.constantFrom(...world.scratchDatabases)], [1, hostileNames]),
    storage: local as fc.Arbitrary<unknown>,
  });
  const s3Db = fc.record({ name: fc.constantFrom(...world.s3Databases), storage: s3Storage as fc.Arbitrary<unknown> });
  return weighted<Mutated>(
    [
      4,
      mutate(localDb, {
        name: hostileNames,
        storage: fc.record({
          provider: fc.constantFrom('local', 's3', 'gcs', 'LOCAL', ''),
          bucket: fc.constantFrom('fzb0', '', '..'),
        }),
      }),
    ],
    [1, s3Db.map((value) => ({ value, note: 's3' }))],
  );
}

interface AdminTarget {
  name: string;
  auth: Auth;
  segment?: string;
}

/** Routes about databases: register, list, verify, delete; verify and delete keep to the fuzzer's databases. */
export function databaseRoutes(world: World): fc.Arbitrary<FuzzCase> {
  const env = envelopes(world, 'application/json');
  const list = fc
    .record({ env, query: fc.constantFrom('', '?a=1', '?__proto__[x]=1', `?${'a'.repeat(8000)}`, '?%ZZ') })
    .map(({ env: e, query }) =>
      assemble(world, 'GET /v1/databases', 'GET', `/v1/databases${query}`, e, undefined, undefined),
    );
  const register = fc
    .record({ env, body: registerBodies(world), damage: textDamages, at: fc.nat() })
    .map(({ env: e, body, damage, at }) => {
      const bytes = jsonBytes(body.value, damage, at);
      return assemble(
        world,
        'POST /v1/databases',
        'POST',
        '/v1/databases',
        e,
        {
          bytes: bytes.bytes,
          note: `${body.note}${bytes.note}`,
        },
        undefined,
      );
    });
  // Which database an administrative call names, with the key it is sent with.
  const adminTarget = weighted<AdminTarget>(
    [6, fc.constantFrom(...world.scratchDatabases).map((name) => ({ name, auth: { kind: 'key', account: 'A' } }))],
    [1, fc.constantFrom(...world.s3Databases).map((name) => ({ name, auth: { kind: 'key', account: 'A' } }))],
    [2, fc.constant({ name: world.foreignDatabase, auth: { kind: 'key', account: 'A' } })],
    [
      2,
      fc
        .constantFrom(world.database, world.unverifiedDatabase)
        .map((name) => ({ name, auth: { kind: 'key', account: 'B' } })),
    ],
    [1, fc.tuple(hostileNames, auths).map(([name, auth]) => ({ name, auth }))],
    [1, fc.tuple(brokenSegments, auths).map(([segment, auth]) => ({ name: segment, segment, auth }))],
    [1, keylessAuths.map((auth) => ({ name: world.database, auth }))],
  );
  const verify = fc
    .record({
      env,
      target: weighted<AdminTarget>(
        [12, adminTarget],
        [1, fc.constant({ name: world.database, auth: { kind: 'key', account: 'A' } as Auth })],
      ),
      body: fc.option(hostileValue, { freq: 4 }),
    })
    .map(({ env: e, target, body }) =>
      assemble(
        world,
        'POST /v1/databases/{name}/storage/verify',
        'POST',
        `/v1/databases/${target.segment ?? percent(target.name)}/storage/verify`,
        { ...e, auth: target.auth },
        body === null ? undefined : { bytes: Buffer.from(jsonText(body)), note: 'body' },
        target.name,
      ),
    );
  const remove = fc
    .record({
      env,
      target: adminTarget,
      purge: fc.constantFrom('', '?purge=true', '?purge=false', '?purge=1', '?purge=true&purge=false', '?nope=1'),
    })
    .map(({ env: e, target, purge }) =>
      assemble(
        world,
        'DELETE /v1/databases/{name}',
        'DELETE',
        `/v1/databases/${target.segment ?? percent(target.name)}${purge}`,
        { ...e, auth: target.auth },
        undefined,
        target.name,
      ),
    );
  return weighted([2, list], [3, register], [2, verify], [2, remove]);
}

export function publicRoutes(world: World): fc.Arbitrary<FuzzCase> {
  return fc
    .record({
      env: envelopes(world, undefined),
      path: fc.constantFrom(
        '/healthz',
        '/readyz',
        '/metrics',
        '/v1/openapi.json',
        '/docs',
        '/docs/',
        '/docs/json',
        '/docs/static/index.html',
      ),
      method: fc.constantFrom('GET', 'GET', 'HEAD', 'POST'),
      query: fc.constantFrom('', '?x=1', '?%ZZ', `?${'q'.repeat(5000)}`),
    })
    .map(({ env, path, method, query }) =>
      assemble(
        world,
        `${method === 'HEAD' ? 'GET' : method} ${path.startsWith('/docs') ? '/docs' : path}`,
        method,
        `${path}${query}`,
        env,
        undefined,
        undefined,
      ),
    );
}

/** Paths no route matches, and routes called with a method they do not take. */
export function strayRoutes(world: World): fc.Arbitrary<FuzzCase> {
  return fc
    .record({
      env: envelopes(world, 'application/json'),
      method: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD', 'PROPFIND', 'FUZZ'),
      path: fc.oneof(
        fc.constantFrom(
          '/',
          '/v1',
          '/v1/',
          '/v1/append',
          '/v1/append/',
          '/v1//append/alpha',
          '/V1/databases',
          '/v1/databases/nope',
          '/v1/databases/alpha/storage',
          '/v1/databases/alpha/storage/verify/x',
          '/v1/append/alpha/extra',
          '/v1/query_sql/alpha/',
          '/v2/databases',
          '/v1/databases?',
          '/v1/databases#frag',
          '/%00',
          '/v1/%2e%2e/v1/databases',
          '/v1/list_tables/..%2fbeta',
          '/v1/list_tables/%2e%2e',
          '/healthz/',
          '/metrics/../v1/databases',
          `/${'a'.repeat(10_000)}`,
        ),
        fc.array(anyString.map(percent), { minLength: 1, maxLength: 4 }).map((parts) => `/v1/${parts.join('/')}`),
      ),
      body: fc.option(hostileValue, { freq: 3 }),
    })
    .map(({ env, method, path, body }) =>
      assemble(
        world,
        'other',
        method,
        path,
        env,
        body === null || method === 'GET' || method === 'HEAD'
          ? undefined
          : { bytes: Buffer.from(jsonText(body)), note: 'body' },
        undefined,
      ),
    );
}
