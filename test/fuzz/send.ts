import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import type { FuzzCase, HttpCase, RawCase } from './cases.js';

/** What came back: every final status read on the connection (one for HTTP cases), the first response's parts. */
export interface Outcome {
  statuses: number[];
  headers: Record<string, string | string[] | undefined>;
  /** The first response's body, at most `KEEP_BYTES` of it. */
  body: Buffer;
  ms: number;
  /** Why no response came (timeout, reset), when none did. */
  error?: string;
  /** The client library refused the case before sending it: nothing was tested. */
  unsent?: string;
  /** The server closed the connection without answering (raw cases; a clean refusal). */
  closed?: boolean;
}

export const KEEP_BYTES = 64 * 1024;

/** The keys' secrets, which cases name by placeholder. */
export interface Secrets {
  A: string;
  B: string;
}

export function fillSecrets(text: string, secrets: Secrets): string {
  return text
    .replaceAll('{{SECRET_A_CUT}}', secrets.A.slice(0, -1))
    .replaceAll('{{SECRET_A_BASIC}}', Buffer.from(`${secrets.A}:`).toString('base64'))
    .replaceAll('{{SECRET_A}}', secrets.A)
    .replaceAll('{{SECRET_B}}', secrets.B);
}

const guarded = new WeakSet<object>();

export interface Target {
  host: string;
  port: number;
  agent: Agent;
}

export function targetOf(url: string, concurrency: number): Target {
  const { hostname, port } = new URL(url);
  return { host: hostname, port: Number(port), agent: new Agent({ keepAlive: true, maxSockets: concurrency + 2 }) };
}

function headersOf(c: HttpCase, secrets: Secrets): Record<string, string> {
  const headers: Record<string, string> = { ...c.headers };
  if (c.auth.kind === 'key') headers.authorization = `Bearer ${secrets[c.auth.account]}`;
  if (c.auth.kind === 'header') headers.authorization = fillSecrets(c.auth.value, secrets);
  if (c.body !== undefined) headers['content-length'] = String(c.body.length);
  return headers;
}

function sendHttpOnce(
  target: Target,
  c: HttpCase,
  secrets: Secrets,
  timeoutMs: number,
  fresh: boolean,
): Promise<Outcome & { reused?: boolean }> {
  const started = performance.now();
  return new Promise((resolve) => {
    let done = false;
    let reused = false;
    const finish = (outcome: Omit<Outcome, 'ms'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ ...outcome, ms: performance.now() - started, reused });
    };
    let req: ReturnType<typeof request>;
    try {
      req = request({
        host: target.host,
        port: target.port,
        method: c.method,
        path: c.path,
        headers: headersOf(c, secrets),
        agent: fresh ? false : target.agent,
      });
    } catch (err) {
      finish({ statuses: [], headers: {}, body: Buffer.alloc(0), unsent: (err as Error).message });
      return;
    }
    const timer = setTimeout(() => {
      req.destroy(new Error(`no response within ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('socket', (socket) => {
      reused = req.reusedSocket;
      // The server may answer (431, 413) and close while a large body is still being written; the write's
      // ECONNRESET then lands on the socket after the request let go of it. The answer is what is judged.
      if (!guarded.has(socket)) {
        guarded.add(socket);
        socket.on('error', () => {});
      }
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let kept = 0;
      res.on('data', (chunk: Buffer) => {
        if (kept < KEEP_BYTES) {
          chunks.push(chunk);
          kept += chunk.length;
        }
      });
      const complete = () =>
        finish({
          statuses: [res.statusCode ?? 0],
          headers: res.headers,
          body: Buffer.concat(chunks).subarray(0, KEEP_BYTES),
        });
      res.on('end', complete);
      // A body cut short after the status arrived still counts as answered; the status is what is judged.
      res.on('error', complete);
      res.on('aborted', complete);
    });
    req.on('error', (err) => finish({ statuses: [], headers: {}, body: Buffer.alloc(0), error: err.message }));
    if (c.body !== undefined) req.end(c.body);
    else req.end();
  });
}

export async function sendHttp(target: Target, c: HttpCase, secrets: Secrets, timeoutMs: number): Promise<Outcome> {
  const first = await sendHttpOnce(target, c, secrets, timeoutMs, false);
  // A kept-alive socket the server closed as we reused it is the client's race, not the server's fault.
  if (first.error !== undefined && first.reused === true && !first.error.startsWith('no response')) {
    return sendHttpOnce(target, c, secrets, timeoutMs, true);
  }
  return first;
}

/** Final responses found in raw bytes (1xx skipped), and where the first one's parts lie. */
function parseResponses(
  bytes: Buffer,
  head: boolean,
): { statuses: number[]; complete: boolean; firstHeaders: Record<string, string>; firstBody: Buffer } {
  const statuses: number[] = [];
  let pos = 0;
  let complete = false;
  let firstHeaders: Record<string, string> = {};
  let firstBody: Buffer = Buffer.alloc(0);
  while (pos < bytes.length) {
    const end = bytes.indexOf('\r\n\r\n', pos);
    if (end < 0 || !bytes.subarray(pos, pos + 5).equals(Buffer.from('HTTP/'))) break;
    const lines = bytes.subarray(pos, end).toString('latin1').split('\r\n');
    const status = Number((lines[0] ?? '').split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    let bodyEnd = end + 4;
    if (status >= 200 && !head && status !== 204 && status !== 304) {
      if (headers['content-length'] !== undefined) {
        bodyEnd += Number(headers['content-length']);
        if (bodyEnd > bytes.length) break;
      } else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
        const last = bytes.indexOf('\r\n0\r\n\r\n', end + 4 - 2);
        if (last < 0) break;
        bodyEnd = last + 7;
      }
    }
    if (status >= 200) {
      if (statuses.length === 0) {
        firstHeaders = headers;
        firstBody = bytes.subarray(end + 4, Math.min(bodyEnd, end + 4 + KEEP_BYTES));
      }
      statuses.push(status);
      complete = true;
    }
    pos = bodyEnd;
  }
  return { statuses, complete, firstHeaders, firstBody };
}

/** Writes a raw case to a fresh connection and reads until the server closes, goes quiet after answering, or time is up. */
export function sendRaw(target: Target, c: RawCase, secrets: Secrets, timeoutMs: number): Promise<Outcome> {
  const started = performance.now();
  const head = c.chunks[0]?.startsWith('HEAD ') ?? false;
  return new Promise((resolve) => {
    const received: Buffer[] = [];
    let quiet: NodeJS.Timeout | undefined;
    let done = false;
    const socket = connect({ host: target.host, port: target.port });
    const finish = (how: { closed?: boolean; error?: string }) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(quiet);
      socket.destroy();
      const parsed = parseResponses(Buffer.concat(received), head);
      const outcome: Outcome = {
        statuses: parsed.statuses,
        headers: parsed.firstHeaders,
        body: parsed.firstBody,
        ms: performance.now() - started,
      };
      if (parsed.statuses.length === 0) {
        if (how.error !== undefined) outcome.error = how.error;
        if (how.closed === true) outcome.closed = true;
      }
      resolve(outcome);
    };
    const timer = setTimeout(() => finish({ error: `no response within ${timeoutMs} ms` }), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      received.push(chunk);
      clearTimeout(quiet);
      if (parseResponses(Buffer.concat(received), head).complete) quiet = setTimeout(() => finish({}), 300);
    });
    socket.on('close', () => finish({ closed: true }));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // A reset after the request is how a server refuses a connection it will not parse further.
      if (err.code === 'ECONNRESET' || err.code === 'EPIPE') finish({ closed: true });
      else finish({ error: err.message });
    });
    socket.on('connect', async () => {
      for (const chunk of c.chunks) {
        if (done) return;
        socket.write(Buffer.from(fillSecrets(chunk, secrets), 'latin1'));
        if (c.chunks.length > 1) await new Promise((r) => setTimeout(r, 20));
      }
      if (c.halfClose && !done) socket.end();
    });
  });
}

export function send(target: Target, c: FuzzCase, secrets: Secrets, timeoutMs: number): Promise<Outcome> {
  return c.kind === 'http'
    ? sendHttp(target, c, secrets, timeoutMs)
    : sendRaw(target, c, secrets, Math.min(timeoutMs, 10_000));
}
