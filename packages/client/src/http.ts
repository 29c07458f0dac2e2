import { clientErrors, StrataError } from './errors.js';

export const ARROW_STREAM = 'application/vnd.apache.arrow.stream';
export const JSON_TYPE = 'application/json';

export interface RetryOptions {
  /** Attempts after the first; 0 turns retries off. */
  retries: number;
  /** The first backoff; each retry doubles it, with full jitter, up to `maxDelayMs`. */
  baseDelayMs: number;
  maxDelayMs: number;
  /**
   * The longest single wait between attempts, `Retry-After` included. A service that asks for a longer wait fails
   * the request at once, with its own refusal, rather than hold the caller for longer than this.
   */
  maxWaitMs: number;
  /**
   * How long a write refused as `index_behind` (its table's indexes are catching up) is sent again, at least a
   * second apart, beside and whatever `retries` says: the service is well and asks writers to slow down, so the
   * writer waits rather than fails. 0: such a refusal is a 429 like any other.
   */
  behindWaitMs: number;
}

export interface HttpOptions {
  url: string;
  apiKey: string;
  retry: RetryOptions;
  /** A `fetch` to use instead of the global one. */
  fetch: typeof fetch;
  /** Each attempt's bound, from sending the request to the last byte of its answer. */
  timeoutMs: number;
  /** The longest answer read; a longer one is abandoned as it passes this, and not retried. */
  maxResponseBytes: number;
}

export interface Request {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: Record<string, string | undefined>;
  json?: unknown;
  arrow?: Uint8Array;
  accept?: string;
  headers?: Record<string, string>;
  /** The caller's own signal: aborting it ends the request, and any wait before a retry, with its reason. */
  signal?: AbortSignal | undefined;
}

export interface Response {
  status: number;
  headers: Headers;
  bytes: Uint8Array;
}

/** Timers hold a 32-bit signed delay: a longer one fires at once (Node) or never (some browsers). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The options checked once, so that no wait or limit can be negative, fractional where it matters, or overflow. */
function checked(options: HttpOptions): HttpOptions {
  const { retry, timeoutMs, maxResponseBytes } = options;
  const bounded = (name: string, value: number, min: number, max: number) => {
    if (!Number.isInteger(value) || value < min || value > max)
      throw new RangeError(`${name} must be a whole number from ${min} to ${max}, got ${value}`);
  };
  bounded('retry.retries', retry.retries, 0, 1000);
  bounded('retry.baseDelayMs', retry.baseDelayMs, 0, MAX_TIMER_MS);
  bounded('retry.maxDelayMs', retry.maxDelayMs, 0, MAX_TIMER_MS);
  bounded('retry.maxWaitMs', retry.maxWaitMs, 0, MAX_TIMER_MS);
  bounded('retry.behindWaitMs', retry.behindWaitMs, 0, Number.MAX_SAFE_INTEGER);
  bounded('timeoutMs', timeoutMs, 1, MAX_TIMER_MS);
  bounded('maxResponseBytes', maxResponseBytes, 1, Number.MAX_SAFE_INTEGER);
  return options;
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A Retry-After header as milliseconds from now: delay-seconds or an HTTP-date (RFC 9110). Anything else, or a
 * negative or non-finite value, says nothing, and the client's own backoff applies.
 */
function retryAfterOf(headers: Headers): number | undefined {
  const raw = headers.get('retry-after')?.trim();
  if (raw === undefined || raw === '') return undefined;
  const seconds = Number(raw);
  if (!Number.isNaN(seconds)) return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
  const at = Date.parse(raw);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

/**
 * Codes of a 409 that ask for the same request again later: its own earlier attempt still holds its idempotency
 * key (say, on a node that died), or another write committed first. Requests carry idempotency keys, so a
 * retry of either never applies a write twice.
 */
const RETRY_CONFLICTS: ReadonlySet<string | undefined> = new Set(['idempotency_in_flight', 'write_conflict']);

/**
 * Whether a failure may be asked again: the service is busy or unavailable, or could not be reached. Never a
 * timeout (the same request would most likely take as long again) nor an answer over the size limit.
 */
const retryable = ({ status, code }: StrataError) =>
  (status === 0 && code === 'unreachable') ||
  status === 429 ||
  status === 503 ||
  (status === 409 && RETRY_CONFLICTS.has(code));

/** The least wait before a write refused as `index_behind` is sent again, whatever Retry-After says (or lacks). */
const MIN_BEHIND_WAIT_MS = 1000;

/** A refusal whose Retry-After asks for more than `maxWaitMs`: given up at once, in the service's own words. */
const waitRefused = (failure: StrataError, maxWaitMs: number) =>
  new StrataError(
    `${failure.message} (the service asks to wait ${(failure.retryAfterMs ?? 0) / 1000} s before another attempt, more than retry.maxWaitMs: ${maxWaitMs} ms)`,
    failure.status,
    failure.code,
    failure.retryAfterMs,
    { cause: failure },
    failure.details,
  );

/**
 * The answer's bytes, read no further than `max`: a hostile or broken service cannot make the client hold more
 * than that, however long its answer (a Content-Length above it is refused before anything is read).
 */
async function bodyOf(res: globalThis.Response, max: number, url: string): Promise<Uint8Array> {
  const declared = Number(res.headers.get('content-length') ?? Number.NaN);
  if (declared > max) {
    void res.body?.cancel().catch(() => undefined);
    throw clientErrors.responseTooLarge(url, max, declared);
  }
  if (res.body === null) return new Uint8Array(0);
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    length += value.byteLength;
    if (length > max) {
      // Not awaited: cancelling closes the connection, and a stalled peer must not hold the error back.
      void reader.cancel().catch(() => undefined);
      throw clientErrors.responseTooLarge(url, max);
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const bytes = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}

/**
 * The client's one way to the service: the key on every request, retries with backoff and jitter on network
 * errors, 429 and 503 (waiting at least what Retry-After asks, never longer than `retry.maxWaitMs`), each attempt
 * bounded in time and in the size of its answer, and a `StrataError` for any other refusal. Writes carry an
 * idempotency key, so that a retry never applies one twice.
 */
export class Http {
  private readonly options: HttpOptions;

  constructor(options: HttpOptions) {
    this.options = checked(options);
  }

  async send(req: Request): Promise<Response> {
    const { retries, baseDelayMs, maxDelayMs, maxWaitMs, behindWaitMs } = this.options.retry;
    const behindUntil = Date.now() + behindWaitMs;
    for (let attempt = 0; ; ) {
      let failure: StrataError;
      try {
        const res = await this.once(req);
        if (res.status < 400) return res;
        failure = errorOf(res);
      } catch (err) {
        // Anything but a StrataError is the caller's abort, ended with the reason it gave.
        if (!(err instanceof StrataError)) throw err;
        failure = err;
      }
      const asked = failure.retryAfterMs ?? 0;
      // Waits for a table's indexes to catch up are not failed attempts, and their own budget is time.
      const left = behindUntil - Date.now();
      if (failure.status === 429 && failure.code === 'index_behind' && left > 0) {
        if (asked > maxWaitMs) throw waitRefused(failure, maxWaitMs);
        await sleep(Math.min(left, maxWaitMs, Math.max(asked, MIN_BEHIND_WAIT_MS)), req.signal);
        continue;
      }
      if (!retryable(failure) || attempt >= retries) throw failure;
      if (asked > maxWaitMs) throw waitRefused(failure, maxWaitMs);
      const backoff = Math.random() * Math.min(maxDelayMs, baseDelayMs * 2 ** attempt);
      await sleep(Math.min(maxWaitMs, Math.max(asked, backoff)), req.signal);
      attempt++;
    }
  }

  private async once(req: Request): Promise<Response> {
    req.signal?.throwIfAborted();
    const url = new URL(req.path, this.options.url);
    for (const [name, value] of Object.entries(req.query ?? {}))
      if (value !== undefined) url.searchParams.set(name, value);
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.apiKey}`, ...req.headers };
    if (req.accept !== undefined) headers.accept = req.accept;
    let body: BodyInit | undefined;
    if (req.arrow !== undefined) {
      headers['content-type'] = ARROW_STREAM;
      // TypeScript 5.9 types bodies as Uint8Array<ArrayBuffer> only; any Uint8Array is a valid body.
      body = req.arrow as unknown as BodyInit;
    } else if (req.json !== undefined) {
      headers['content-type'] = JSON_TYPE;
      body = JSON.stringify(req.json);
    }
    const { timeoutMs, maxResponseBytes } = this.options;
    const where = `${req.method} ${url.pathname}`;
    // One signal ends the attempt, body included, on the timeout or on the caller's abort (fetch errors the body
    // stream when its signal aborts after the headers came).
    const attempt = new AbortController();
    const timer = setTimeout(() => attempt.abort(), timeoutMs);
    const forward = () => attempt.abort(req.signal?.reason);
    req.signal?.addEventListener('abort', forward, { once: true });
    try {
      const res = await this.options.fetch(url, { method: req.method, headers, body, signal: attempt.signal });
      return { status: res.status, headers: res.headers, bytes: await bodyOf(res, maxResponseBytes, where) };
    } catch (err) {
      if (req.signal?.aborted) throw req.signal.reason;
      if (err instanceof StrataError) throw err;
      if (attempt.signal.aborted) throw clientErrors.timeout(where, timeoutMs);
      throw clientErrors.unreachable(this.options.url, err);
    } finally {
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', forward);
    }
  }
}

function errorOf(res: Response): StrataError {
  const text = new TextDecoder().decode(res.bytes);
  let message = text || `HTTP ${res.status}`;
  let code: string | undefined;
  let details: Record<string, unknown> = {};
  try {
    const body = JSON.parse(text) as { error?: unknown; code?: unknown };
    if (typeof body.error === 'string') message = body.error;
    if (typeof body.code === 'string') code = body.code;
    if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
      const { error: _, code: __, ...rest } = body as Record<string, unknown>;
      details = rest;
    }
  } catch {
    // Not JSON: the text is the message.
  }
  return new StrataError(message, res.status, code, retryAfterOf(res.headers), undefined, details);
}

/** A reply's JSON. */
export const jsonOf = <T>(res: Response): T => JSON.parse(new TextDecoder().decode(res.bytes)) as T;
