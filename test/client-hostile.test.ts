import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Strata, type StrataOptions } from '@strata/client';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';

/**
 * `@strata/client` against a service that misbehaves: answers without end, a Content-Length it cannot mean,
 * Retry-After values a timer cannot hold, no answer at all, headers and then silence. Each must end the call
 * soon, with a StrataError that says why, and without the client holding more than its limits.
 */

const MiB = 1024 * 1024;
let handle: (req: IncomingMessage, res: ServerResponse) => void = () => undefined;
let requests = 0;
const server = createServer((req, res) => {
  requests++;
  handle(req, res);
});
let url = '';

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(() => {
  server.closeAllConnections();
  requests = 0;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const clientOf = (options: Partial<StrataOptions> = {}) =>
  new Strata({ url, apiKey: 'k', ...options, retry: { baseDelayMs: 1, maxDelayMs: 5, ...options.retry } });

/** The call's rejection and how long it took to come. */
async function failure(call: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = performance.now();
  const error = await call.then(
    () => undefined,
    (err: unknown) => err,
  );
  return { error, ms: performance.now() - started };
}

/** Answers 503 with `retryAfter` first, then an empty database list. */
function busyOnce(retryAfter: string): void {
  handle = (_req, res) => {
    if (requests === 1) {
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': retryAfter });
      res.end(JSON.stringify({ error: 'busy', code: 'unavailable' }));
    } else {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ databases: [] }));
    }
  };
}

const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;

describe('answers larger than maxResponseBytes', () => {
  test('an endless answer is abandoned as it passes the cap, and the client never holds much more', async () => {
    let sent = 0;
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/vnd.apache.arrow.stream' });
      const chunk = Buffer.alloc(64 * 1024, 7);
      const more = () => {
        while (sent < 512 * MiB && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    };
    const before = process.memoryUsage().arrayBuffers;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().arrayBuffers);
    }, 1);

    const { error } = await failure(
      clientOf({ maxResponseBytes: 4 * MiB })
        .database('d')
        .sql('SELECT 1'),
    );
    clearInterval(sampler);
    peak = Math.max(peak, process.memoryUsage().arrayBuffers);

    expect(error).toMatchObject({ name: 'StrataError', status: 0, code: 'response_too_large' });
    expect((error as Error).message).toMatch(/passed maxResponseBytes \(4194304 bytes\)/);
    expect(requests).toBe(1);
    // The cap, and Node's own buffers of the socket and the stream (about 8 MiB measured), not the 512 MiB offered.
    expect(peak - before).toBeLessThan(4 * MiB + 20 * MiB);
    // The connection was closed soon after the cap, not read to the end.
    await expect.poll(() => sent).toBeGreaterThan(0);
    expect(sent).toBeLessThan(64 * MiB);
  });

  test('a Content-Length above the cap is refused before anything is read', async () => {
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(10 * 1024 * MiB) });
      res.write('{"databases": [');
    };

    const { error, ms } = await failure(clientOf({ maxResponseBytes: MiB, timeoutMs: 20_000 }).databases.list());

    expect(error).toMatchObject({ status: 0, code: 'response_too_large' });
    expect((error as Error).message).toMatch(/declares 10737418240 bytes, more than maxResponseBytes \(1048576\)/);
    expect(ms).toBeLessThan(2000);
  });

  test('an answer within the cap is read whole', async () => {
    const databases = Array.from({ length: 2000 }, (_, i) => ({ name: `db${i}`, state: 'active' }));
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      // In pieces and without a Content-Length, so that the body arrives as several chunks.
      const text = JSON.stringify({ databases });
      for (let at = 0; at < text.length; at += 4096) res.write(text.slice(at, at + 4096));
      res.end();
    };

    expect(await clientOf({ maxResponseBytes: MiB }).databases.list()).toEqual(databases);
  });
});

describe('Retry-After', () => {
  test.each(['2000000', '1e9'])(
    'Retry-After: %s fails at once, in the service’s words, with what it asked',
    async (value) => {
      busyOnce(value);

      const { error, ms } = await failure(clientOf().databases.list());

      expect(error).toMatchObject({ status: 503, code: 'unavailable', retryAfterMs: Number(value) * 1000 });
      expect((error as Error).message).toMatch(
        new RegExp(`^busy \\(the service asks to wait ${Number(value)} s .* retry.maxWaitMs: 60000 ms\\)$`),
      );
      expect(requests).toBe(1);
      expect(ms).toBeLessThan(1000);
    },
  );

  test.each(['soon', '-5', 'Infinity', 'NaN', '', '1e400'])(
    'Retry-After: "%s" says nothing; the client backs off by itself',
    async (value) => {
      busyOnce(value);
      const started = performance.now();

      expect(await clientOf().databases.list()).toEqual([]);

      expect(requests).toBe(2);
      expect(performance.now() - started).toBeLessThan(1000);
    },
  );

  test('retry.maxWaitMs sets the longest wait: a Retry-After under it is waited, one over it is not', async () => {
    busyOnce('0.3');
    const started = performance.now();
    expect(await clientOf({ retry: { maxWaitMs: 500 } }).databases.list()).toEqual([]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(requests).toBe(2);

    requests = 0;
    busyOnce('1');
    const { error, ms } = await failure(clientOf({ retry: { maxWaitMs: 500 } }).databases.list());
    expect(error).toMatchObject({ status: 503, retryAfterMs: 1000 });
    expect((error as Error).message).toMatch(/asks to wait 1 s .* retry.maxWaitMs: 500 ms/);
    // Refused, not waited for 500 ms and asked again.
    expect(requests).toBe(1);
    expect(ms).toBeLessThan(1000);
  });

  test('an HTTP-date counts from now: one past is no wait, one next year is refused', async () => {
    busyOnce(new Date(Date.now() - 60_000).toUTCString());
    expect(await clientOf().databases.list()).toEqual([]);
    expect(requests).toBe(2);

    requests = 0;
    busyOnce(new Date(Date.now() + 365 * 86_400_000).toUTCString());
    const { error, ms } = await failure(clientOf().databases.list());
    expect(error).toMatchObject({ status: 503, code: 'unavailable' });
    expect(ms).toBeLessThan(1000);
  });
});

describe('timeoutMs', () => {
  test('a service that takes the connection and never answers: a timeout, not retried', async () => {
    handle = () => undefined;
    const before = timers();

    const { error, ms } = await failure(clientOf({ timeoutMs: 300 }).databases.list());

    expect(error).toMatchObject({ name: 'StrataError', status: 0, code: 'timeout' });
    expect((error as Error).message).toBe(
      'GET /v1/databases gave no whole answer within 300 ms (timeoutMs); the request was abandoned',
    );
    expect(ms).toBeGreaterThanOrEqual(290);
    expect(ms).toBeLessThan(1500);
    expect(requests).toBe(1);
    expect(timers()).toBeLessThanOrEqual(before);
  });

  test('headers and then a body that stalls: the timeout covers the body too', async () => {
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/vnd.apache.arrow.stream' });
      res.write(Buffer.alloc(1000));
    };

    const { error, ms } = await failure(clientOf({ timeoutMs: 300 }).database('d').sql('SELECT 1'));

    expect(error).toMatchObject({ status: 0, code: 'timeout' });
    expect(ms).toBeLessThan(1500);
  });

  test('a request answered in time leaves no timer behind', async () => {
    busyOnce('0');
    const before = timers();
    expect(await clientOf({ timeoutMs: 60_000 }).databases.list()).toEqual([]);
    expect(timers()).toBeLessThanOrEqual(before);
  });
});

describe("the caller's AbortSignal", () => {
  test('ends a read whose body stalls, with its own reason', async () => {
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"data": [');
    };
    const reason = new Error('the user went away');

    const { error, ms } = await failure(
      clientOf()
        .database('d')
        .sql('SELECT 1', { rows: true, signal: timeoutSignal(100, reason) }),
    );

    expect(error).toBe(reason);
    expect(ms).toBeLessThan(1000);
  });

  test('ends the wait before a retry', async () => {
    busyOnce('30');

    const { error, ms } = await failure(
      clientOf()
        .database('d')
        .sql('SELECT 1', { signal: timeoutSignal(100, new Error('stop')) }),
    );

    expect(error).toMatchObject({ message: 'stop' });
    expect(ms).toBeLessThan(1000);
    expect(requests).toBe(1);
  });

  test('ends an append: no request starts after it', async () => {
    handle = () => undefined;
    const rows = Array.from({ length: 10 }, (_, id) => ({ id }));

    const { error, ms } = await failure(
      clientOf()
        .database('d')
        .table('t')
        .append(rows, { maxRows: 1, concurrency: 2, signal: timeoutSignal(100, new Error('enough')) }),
    );

    expect(error).toMatchObject({ message: 'enough' });
    expect(ms).toBeLessThan(1000);
    expect(requests).toBe(2);
  });
});

test('limits that a timer cannot hold, or that mean nothing, are refused when the client is made', () => {
  expect(() => clientOf({ timeoutMs: 2 ** 31 })).toThrow(/timeoutMs must be a whole number from 1 to 2147483647/);
  expect(() => clientOf({ retry: { maxWaitMs: -1 } })).toThrow(RangeError);
  expect(() => clientOf({ retry: { maxDelayMs: Number.POSITIVE_INFINITY } })).toThrow(RangeError);
  expect(() => clientOf({ maxResponseBytes: 0 })).toThrow(/maxResponseBytes/);
});

/** A signal that aborts with `reason` after `ms`. */
function timeoutSignal(ms: number, reason: Error): AbortSignal {
  const controller = new AbortController();
  setTimeout(() => controller.abort(reason), ms);
  return controller.signal;
}
