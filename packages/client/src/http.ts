import { StrataError } from './errors.js';

export const ARROW_STREAM = 'application/vnd.apache.arrow.stream';
export const JSON_TYPE = 'application/json';

export interface RetryOptions {
  /** Attempts after the first; 0 turns retries off. */
  retries: number;
  /** The first backoff; each retry doubles it, with full jitter, up to `maxDelayMs`. */
  baseDelayMs: number;
  maxDelayMs: number;
}

export interface HttpOptions {
  url: string;
  apiKey: string;
  retry: RetryOptions;
  /** A `fetch` to use instead of the global one. */
  fetch: typeof fetch;
}

export interface Request {
  method: 'GET' | 'POST' | 'DELETE';
  path: string;
  query?: Record<string, string | undefined>;
  json?: unknown;
  arrow?: Uint8Array;
  accept?: string;
  headers?: Record<string, string>;
}

export interface Response {
  status: number;
  headers: Headers;
  bytes: Uint8Array;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Seconds of a Retry-After header, as milliseconds. */
function retryAfterOf(headers: Headers): number | undefined {
  const raw = headers.get('retry-after');
  if (raw === null) return undefined;
  const seconds = Number(raw);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/**
 * Codes of a 409 that ask for the same request again later: its own earlier attempt still holds its idempotency
 * key (say, on a node that died), or another write committed first. Requests carry idempotency keys, so a
 * retry of either never applies a write twice.
 */
const RETRY_CONFLICTS: ReadonlySet<string | undefined> = new Set(['idempotency_in_flight', 'write_conflict']);

/** Whether an answer may be asked again: the service is busy or unavailable, never another refusal. */
const retryable = (status: number, code?: string) =>
  status === 429 || status === 503 || (status === 409 && RETRY_CONFLICTS.has(code));

/**
 * The client's one way to the service: the key on every request, retries with backoff and jitter on network
 * errors, 429 and 503 (waiting at least what Retry-After asks), and a `StrataError` for any other refusal.
 * Writes carry an idempotency key, so that a retry never applies one twice.
 */
export class Http {
  constructor(private readonly options: HttpOptions) {}

  async send(req: Request): Promise<Response> {
    const { retries, baseDelayMs, maxDelayMs } = this.options.retry;
    for (let attempt = 0; ; attempt++) {
      let failure: StrataError;
      try {
        const res = await this.once(req);
        if (res.status < 400) return res;
        failure = errorOf(res);
      } catch (err) {
        failure = new StrataError(
          `cannot reach ${this.options.url}: ${(err as Error).message}`,
          0,
          undefined,
          undefined,
        );
      }
      const again = failure.status === 0 || retryable(failure.status, failure.code);
      if (!again || attempt >= retries) throw failure;
      const backoff = Math.random() * Math.min(maxDelayMs, baseDelayMs * 2 ** attempt);
      await sleep(Math.max(failure.retryAfterMs ?? 0, backoff));
    }
  }

  private async once(req: Request): Promise<Response> {
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
    const res = await this.options.fetch(url, { method: req.method, headers, body });
    return { status: res.status, headers: res.headers, bytes: new Uint8Array(await res.arrayBuffer()) };
  }
}

function errorOf(res: Response): StrataError {
  const text = new TextDecoder().decode(res.bytes);
  let message = text || `HTTP ${res.status}`;
  let code: string | undefined;
  try {
    const body = JSON.parse(text) as { error?: unknown; code?: unknown };
    if (typeof body.error === 'string') message = body.error;
    if (typeof body.code === 'string') code = body.code;
  } catch {
    // Not JSON: the text is the message.
  }
  return new StrataError(message, res.status, code, retryAfterOf(res.headers));
}

/** A reply's JSON. */
export const jsonOf = <T>(res: Response): T => JSON.parse(new TextDecoder().decode(res.bytes)) as T;
