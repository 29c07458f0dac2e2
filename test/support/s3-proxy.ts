import { createServer, type IncomingMessage, request } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the proxy does with one request: pass it on (after `wait`, if given) or answer it with `status`. */
export type Verdict = { pass: true; wait?: Promise<void> } | { pass: false; status: number };

export interface S3Proxy {
  /** The endpoint to bind a database to. */
  endpoint: string;
  /** Decides each request from now on (every request passes by default). */
  judge(verdict: (req: IncomingMessage) => Verdict): void;
  close(): Promise<void>;
}

/** A commit's manifest upload: Lance's commit of a table version, to `_versions/`. */
export const isCommit = (req: IncomingMessage): boolean =>
  req.method === 'PUT' && (req.url ?? '').includes('_versions/');

/** An HTTP proxy on 127.0.0.1 in front of an S3 endpoint, that can hold back or refuse the requests it is told. */
export async function startS3Proxy(target: string): Promise<S3Proxy> {
  const { hostname, port } = new URL(target);
  let verdict: (req: IncomingMessage) => Verdict = () => ({ pass: true });
  const server = createServer((req, res) => {
    const body: Buffer[] = [];
    req.on('data', (chunk: Buffer) => body.push(chunk));
    req.on('end', async () => {
      const decided = verdict(req);
      if (!decided.pass) {
        res.writeHead(decided.status, { 'content-type': 'application/xml' });
        res.end(
          '<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>refused by the test proxy</Message></Error>',
        );
        return;
      }
      await decided.wait;
      const upstream = request({ hostname, port, method: req.method, path: req.url, headers: req.headers }, (reply) => {
        res.writeHead(reply.statusCode ?? 502, reply.headers);
        reply.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      upstream.end(Buffer.concat(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    judge(next) {
      verdict = next;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
