import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { type ErrorCode, errorBody } from '../errors.js';

/**
 * Requests the router refuses before any hook runs: a path that is not valid percent-encoding, or a path
 * segment past the router's length limit. Answered like every other error: a request id and `{error, code}`.
 */
export function answerFrameworkError(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  void reply.header('x-request-id', req.id);
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    void reply.status(414).send(errorBody('a segment of the request path is too long', 'uri_too_long'));
    return;
  }
  void reply.status(400).send(errorBody('the request path is not valid percent-encoded text', 'bad_request'));
}

/**
 * Requests Node's HTTP parser refuses (a header block over its limit, a method or line it cannot parse, a
 * request that took too long to arrive): there is no request object, so the answer is written on the socket.
 */
export function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, error, code]: [number, string, ErrorCode] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'the request did not arrive in time', 'request_timeout']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'the request headers are larger than the server accepts', 'headers_too_large']
        : [400, 'the request is not valid HTTP/1.1', 'bad_request'];
  // An answer to HEAD has no body (RFC 9110 §9.3.2); the parser keeps what it read of the request.
  const raw = (err as { rawPacket?: unknown }).rawPacket;
  const head = Buffer.isBuffer(raw) && raw.subarray(0, 5).toString('latin1') === 'HEAD ';
  const text = JSON.stringify(errorBody(error, code));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nX-Request-Id: ${randomUUID()}\r\nConnection: close\r\n\r\n${head ? '' : text}`,
    );
  }
  socket.destroy();
}
