import type { FastifyRequest } from 'fastify';
import type { WriteOptions } from '../engine/writes/command.js';
import { BadRequest } from '../errors.js';

/** The header a client names a write with, so that sending it again never applies it twice (docs/api.md). */
const IDEMPOTENCY_HEADER = 'idempotency-key';
/** On a reply that repeats an earlier request's answer instead of writing. */
export const REPLAYED_HEADER = 'idempotent-replayed';

const KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;

/** The idempotency key a request carries, checked, with its account; undefined when it carries none. */
export function idempotencyKeyOf(req: FastifyRequest): WriteOptions['key'] {
  const raw = req.headers[IDEMPOTENCY_HEADER];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !KEY_PATTERN.test(raw)) {
    throw new BadRequest('header Idempotency-Key must be 1–255 printable ASCII characters');
  }
  return { accountId: req.accountId, key: raw };
}
