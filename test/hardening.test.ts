import { connect as tcp } from 'node:net';
import { beforeAll, describe, expect, test } from 'vitest';
import { AuthFailures } from '../src/http/auth.js';
import { capturedLogs, rememberSecret } from './support/logs.js';
import { activeLocalDatabase, serveFile, startStrata } from './support/server.js';
import { tablesOf } from './support/tables.js';

const { strata, api } = serveFile(
  { STRATA_BODY_IDLE_MS: '300', STRATA_MAX_RESULT_BYTES: '65536' },
  { database: 'hard' },
);

beforeAll(async () => {});

/** Sends `text` on a raw connection and resolves with everything the server wrote before it closed or went quiet. */
function rawRequest(url: string, text: string, quietMs = 500): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tcp({ host: hostname, port: Number(port) });
    let received = '';
    let timer: NodeJS.Timeout | undefined;
    const done = () => {
      socket.destroy();
      resolve(received);
    };
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      clearTimeout(timer);
      timer = setTimeout(done, quietMs);
    });
    socket.on('end', done);
    socket.on('error', reject);
    socket.write(text);
  });
}

const statusOf = (response: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1] ?? 0);

describe('authentication is decided on the route', () => {
  test('an absolute-form request target without a key is 401, on reads and on writes', async () => {
    const read = await rawRequest(
      strata.url,
      'GET http://x/v1/databases HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    const body = '{"name":"sneak","storage":{"provider":"local","bucket":"sneak"}}';
    const write = await rawRequest(
      strata.url,
      `POST http://x/v1/databases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );

    expect(statusOf(read)).toBe(401);
    expect(read).toMatch(/www-authenticate: Bearer/i);
    expect(statusOf(write)).toBe(401);
  });

  test('an absolute-form target with a key is served as its path', async () => {
    const response = await rawRequest(
      strata.url,
      `GET http://x/v1/databases HTTP/1.1\r\nHost: x\r\n${Object.entries(api.auth)
        .map(([k, v]) => `${k}: ${v}`)
        .join('\r\n')}\r\nConnection: close\r\n\r\n`,
    );

    expect(statusOf(response)).toBe(200);
    expect(response).toMatch(/"name":"hard"/);
  });

  test('only the listed public routes answer without a key; an unknown route wants one', async () => {
    const anon = strata.withAuth(undefined);
    const open = await Promise.all(
      ['/healthz', '/readyz', '/metrics', '/v1/openapi.json', '/docs/'].map((p) => anon.raw('GET', p)),
    );
    for (const res of open) await res.arrayBuffer();
    const unknown = await anon.get('/v1/nothing-here');
    const outside = await anon.get('/nothing-here');

    expect(open.map((res) => res.status)).toEqual([200, 200, 200, 200, 200]);
    expect(unknown.status).toBe(401);
    expect(outside.status).toBe(401);
    expect(unknown.json.code).toBe('unauthorized');
  });

  test('failed authentications from one address are limited; a good key from it is still served', async () => {
    const limited = await startStrata({ STRATA_AUTH_FAILURES_PER_MINUTE: '3' });
    try {
      const good = await limited.as('good');
      const bad = limited.withAuth('Bearer sk_0000000000000000000000000000000000000000000');
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await bad.get('/v1/databases')).status);
      const refused = await bad.get('/v1/databases');
      const after = await good.get('/v1/databases');

      expect(statuses).toEqual([401, 401, 401, 429, 429]);
      expect(refused.json.code).toBe('auth_rate_limited');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(after.status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  test('failures are counted per IPv6 /64, per window, in a bounded table', () => {
    const failures = new AuthFailures(2, 60_000, 3);
    failures.record('2001:db8:1:2::1', 0);
    failures.record('2001:db8:1:2:ffff::9', 0);

    expect(failures.blockedFor('2001:0db8:0001:0002::5', 1000)).toBe(59);
    expect(failures.blockedFor('2001:db8:1:3::1', 1000)).toBe(0);
    expect(failures.blockedFor('2001:db8:1:2::1', 60_000)).toBe(0);
    for (const address of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) failures.record(address, 2000);
    // The oldest entry (the /64) went to keep the table at three.
    expect(failures.blockedFor('2001:db8:1:2::1', 2000)).toBe(0);
  });
});

describe('logs', () => {
  test('query strings are logged by parameter name only; a key sent in one never reaches the log', async () => {
    const secret = `sk_${'q'.repeat(40)}`;
    rememberSecret(secret);
    await api.get(`/v1/databases?api_key=${secret}&other=visible-value`);

    const lines = capturedLogs().filter((line) => line.includes('api_key='));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(line).toContain('api_key=[redacted]');
      expect(line).not.toContain('visible-value');
    }
  });
});

describe('request bodies', () => {
  test('a body that stops arriving is cut off after STRATA_BODY_IDLE_MS; the server goes on serving', async () => {
    const started = Date.now();
    const response = await rawRequest(
      strata.url,
      `POST /v1/databases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n${Object.entries(
        api.auth,
      )
        .map(([k, v]) => `${k}: ${v}`)
        .join('\r\n')}\r\n\r\n{`,
      5000,
    );
    const waited = Date.now() - started;

    expect(statusOf(response) === 0 || statusOf(response) === 408).toBe(true);
    expect(waited).toBeLessThan(4000);
    expect((await api.get('/v1/databases')).status).toBe(200);
  });
});

describe('requests refused before they reach a route', () => {
  test('requests the router or the HTTP parser refuse still carry a request id and an error code', async () => {
    const badPath = await api.get('/v1/list_tables/%ZZ');
    const hugeHeader = await rawRequest(
      strata.url,
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    const badMethod = await rawRequest(strata.url, 'FUZZ /v1/databases HTTP/1.1\r\nHost: x\r\n\r\n');

    expect(badPath.status).toBe(400);
    expect(badPath.json).toEqual({ error: expect.stringMatching(/percent-encoded/), code: 'bad_request' });
    expect(badPath.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(statusOf(hugeHeader)).toBe(431);
    expect(hugeHeader).toMatch(/x-request-id: [0-9a-f-]{36}/i);
    expect(hugeHeader).toMatch(/"code":"headers_too_large"/);
    expect(statusOf(badMethod)).toBe(400);
    expect(badMethod).toMatch(/"code":"bad_request"/);
  });
});

describe('replies of any number of rows', () => {
  test('are read a part at a time, in row order, and refused once the parts pass the cap', async () => {
    const server = await startStrata({ STRATA_MAX_RESULT_BYTES: String(4 * 1024 * 1024) });
    try {
      const owner = await server.as('many');
      await activeLocalDatabase(owner, 'many');
      const t = tablesOf(owner, 'many');
      await t.create({
        table_name: 'rows',
        schema: [
          { name: 'id', type: 'i32' },
          { name: 'tag', type: 'utf8' },
          { name: 's', type: 'utf8' },
        ],
      });
      const n = 20_000;
      const filler = 'z'.repeat(250);
      expect(
        (
          await t.append(
            'rows',
            Array.from({ length: n }, (_, id) => ({ id, tag: 'same', s: filler })),
          )
        ).status,
      ).toBe(200);
      const match = (projection: string[]) =>
        owner.request(
          'POST',
          '/v1/exact_match/many',
          { table_name: 'rows', field_name: 'tag', value: 'same', projection },
          { accept: 'application/json' },
        );

      const ids = await match(['id']);
      const wide = await match(['s']);

      expect(ids.status).toBe(200);
      expect((ids.json as { data: { id: number }[] }).data.map((row) => row.id)).toEqual(
        Array.from({ length: n }, (_, i) => i),
      );
      expect(wide.status).toBe(400);
      expect(wide.json.code).toBe('result_too_large');
    } finally {
      await server.close();
    }
  });
});
