import { describe, expect, test } from 'vitest';
import { serveFile, startStrata } from './support/server.js';

const { strata, api } = serveFile({ STRATA_MAX_BODY_BYTES: '2048' });

describe('authentication', () => {
  test.each([
    ['no header', undefined],
    ['another scheme', 'Basic c2tfYWJj'],
    ['a malformed key', 'Bearer not-a-key'],
    ['an unknown key', `Bearer sk_${'x'.repeat(43)}`],
    ['a bare bearer', 'Bearer '],
  ])('%s is refused with 401 and WWW-Authenticate: Bearer', async (_, authorization) => {
    const res = await strata.withAuth(authorization).get('/v1/databases');

    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer');
    expect(res.json.error).toMatch(/API key/);
  });

  test('a revoked key is refused at once', async () => {
    const key = await strata.as('revoker');
    expect((await key.get('/v1/databases')).status).toBe(200);
    const [listing] = (await strata.app.ctx.store.listKeys()).filter((k) => k.accountName === 'revoker');
    await strata.app.ctx.store.revokeKey(listing?.id ?? '', Date.now());

    const res = await key.get('/v1/databases');

    expect(res.status).toBe(401);
  });

  test('401 comes before validation: a bad body without a key is still 401', async () => {
    const res = await strata.withAuth(undefined).post('/v1/databases', { nonsense: true });

    expect(res.status).toBe(401);
  });

  test('health, readiness, metrics and the OpenAPI document need no key', async () => {
    const anon = strata.withAuth(undefined);
    expect((await anon.get('/healthz')).status).toBe(200);
    expect((await anon.get('/readyz')).status).toBe(200);
    const openapi = await anon.get<{ openapi: string; paths: Record<string, unknown>; components: unknown }>(
      '/v1/openapi.json',
    );
    expect(openapi.status).toBe(200);
    expect(openapi.json.openapi).toBe('3.1.0');
    expect(Object.keys(openapi.json.paths)).toEqual(
      expect.arrayContaining(['/v1/databases', '/v1/databases/{name}/storage/verify', '/v1/databases/{name}']),
    );
    expect(openapi.json.components).toMatchObject({ securitySchemes: { api_key: { type: 'http', scheme: 'bearer' } } });
  });
});

describe('operations', () => {
  test('every response carries X-Request-Id, errors included', async () => {
    const responses = [
      await api.get('/v1/databases'),
      await strata.withAuth(undefined).get('/v1/databases'),
      await api.get('/v1/nothing-here'),
      await strata.withAuth(undefined).get('/healthz'),
    ];
    const ids = responses.map((res) => res.headers.get('x-request-id'));

    for (const id of ids) expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  test('an unknown route is 404 with an error body', async () => {
    const res = await api.get('/v1/nothing-here');

    expect(res.status).toBe(404);
    expect(res.json.error).toMatch(/no route GET \/v1\/nothing-here/);
  });

  test('a body over STRATA_MAX_BODY_BYTES is 413', async () => {
    const res = await api.post('/v1/databases', {
      name: 'big',
      storage: { provider: 'local', bucket: 'x'.repeat(4000) },
    });

    expect(res.status).toBe(413);
    expect(res.json.error).toMatch(/too large/i);
  });

  test('a body of another content type is 415', async () => {
    const res = await api.request('POST', '/v1/databases', 'name=x', { 'content-type': 'text/plain' });

    expect(res.status).toBe(415);
    expect(res.json.error).toMatch(/content-type/i);
  });

  test('malformed JSON is 400', async () => {
    const res = await api.request('POST', '/v1/databases', '{"name": ', { 'content-type': 'application/json' });

    expect(res.status).toBe(400);
    expect(typeof res.json.error).toBe('string');
  });

  test('/docs renders the reference from local assets', async () => {
    const page = await fetch(`${strata.url}/docs/`);
    const html = await page.text();

    expect(page.status).toBe(200);
    expect(html).toMatch(/swagger-ui/i);
    expect(html).not.toMatch(/https?:\/\/(cdn|unpkg|cdnjs)/);
    const script = await fetch(`${strata.url}/docs/static/swagger-ui-bundle.js`);
    expect(script.status).toBe(200);
    // Read it whole: an unread body keeps its connection busy, and the server's close waits for it.
    expect((await script.text()).length).toBeGreaterThan(1000);
  });

  test('/metrics counts requests by route and status', async () => {
    await api.get('/v1/databases');
    const text = await (await fetch(`${strata.url}/metrics`)).text();

    expect(text).toMatch(/strata_http_requests_total\{method="GET",route="\/v1\/databases",status="200"\} \d+/);
    expect(text).toMatch(
      /strata_http_request_duration_seconds_bucket\{le="0.005",method="GET",route="\/v1\/databases",status="200"\}/,
    );
  });
});

describe('rate limit', () => {
  test('a key over its limit gets 429 with Retry-After; other keys are unaffected', async () => {
    const limited = await startStrata({ STRATA_RATE_LIMIT_PER_MINUTE: '3' });
    try {
      const one = await limited.as('one');
      const two = await limited.as('two');
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await one.get('/v1/databases')).status);
      const over = await one.get('/v1/databases');

      expect(statuses).toEqual([200, 200, 200, 429]);
      expect(over.status).toBe(429);
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(over.json.error).toMatch(/rate limit/);
      expect((await two.get('/v1/databases')).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('faults of the service itself', () => {
  test('a broken control store makes /readyz 503 and a call 500 with only "internal error" and the request id', async () => {
    const broken = await startStrata();
    try {
      const key = await broken.as('acme');
      await broken.app.ctx.store.close();

      const ready = await broken.withAuth(undefined).get('/readyz');
      const res = await key.get('/v1/databases');

      expect((await broken.withAuth(undefined).get('/healthz')).status).toBe(200);
      expect(ready.status).toBe(503);
      expect(res.status).toBe(500);
      expect(res.json).toEqual({
        code: 'internal',
        error: `internal error (request id ${res.headers.get('x-request-id')})`,
      });
    } finally {
      await broken.close();
    }
  });
});
