import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import pino, { type DestinationStream } from 'pino';
import pretty from 'pino-pretty';
import type { Config } from '../config.js';

/** Paths of anything that could carry a secret, blanked before a log line is written. */
const REDACT = ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization', '*.secretAccessKey'];

/**
 * A request as logs show it. The query string is cut down to its parameter names: values may carry a key
 * (`?api_key=`), a predicate over customer data, or anything else a client put there.
 */
function loggedRequest(req: FastifyRequest): Record<string, unknown> {
  const [path, query] = req.url.split('?', 2);
  const names = query === undefined ? [] : [...new URLSearchParams(query).keys()];
  return {
    method: req.method,
    url: names.length === 0 ? path : `${path}?${names.map((name) => `${name}=[redacted]`).join('&')}`,
    remoteAddress: req.ip,
  };
}

/**
 * Where logs go when no stream is given: readable lines on a terminal (pino-pretty, colour, local time), one
 * JSON object per line otherwise, for whatever collects them.
 */
function consoleLog(): DestinationStream | undefined {
  if (!process.stdout.isTTY) return undefined;
  return pretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true });
}

/** The node's logger: secrets redacted, requests shown without their query values. */
export function createLogger(config: Pick<Config, 'logLevel'>, stream?: DestinationStream): FastifyBaseLogger {
  return pino(
    {
      level: config.logLevel,
      redact: { paths: REDACT, censor: '[redacted]' },
      serializers: { req: (req: FastifyRequest) => loggedRequest(req) },
    },
    stream ?? consoleLog(),
  );
}
