import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { rowsDigest } from '../arrow/digest.js';
import { fingerprintFor, type IdempotencyScope } from '../control/idempotency.js';
import type { WriteHooks, WriteIntent } from '../engine/writes/intent.js';
import type { RowCounts } from '../engine/writes/writes.js';
import { BadRequest, Conflict, Unprocessable } from '../errors.js';
import type { AppContext } from './context.js';

/** The header a client names a write with, so that sending it again never applies it twice (docs/api.md). */
const IDEMPOTENCY_HEADER = 'idempotency-key';
/** On a reply that repeats an earlier request's answer instead of writing. */
export const REPLAYED_HEADER = 'idempotent-replayed';

const KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;

/** What is kept of a write's answer; rows it echoed are made again from the same body when replayed. */
export interface StoredAnswer {
  version: number;
  counts?: RowCounts;
}

/** One idempotent write: how to run it, and how to tell and answer a run that landed but was never answered. */
export interface IdempotentWrite<R> {
  /**
   * The request's parts that must match for a key to be reused: route, table, predicate. The table's instance
   * (its id) and the rows the body holds are added once the write has read them.
   */
  fingerprint: readonly (string | undefined)[];
  /** Runs the write, telling `hooks` when its body is read and what it is about to commit. */
  run(hooks: WriteHooks | undefined): Promise<R>;
  answer(result: R): StoredAnswer;
  /** Whether a run that recorded `intent` landed, and what it would have answered. */
  recover(intent: WriteIntent): Promise<StoredAnswer | undefined>;
}

/** A write's outcome: its own result, or an earlier request's answer to repeat. */
export type IdempotentOutcome<R> = { kind: 'fresh'; result: R } | { kind: 'replayed'; answer: StoredAnswer };

/** Stops a write whose key an earlier request already answered; carries that answer out. */
class AnsweredBefore extends Error {
  constructor(readonly answer: StoredAnswer) {
    super('answered before');
  }
}

/** The idempotency key a request carries, checked; undefined when it carries none. */
function idempotencyKeyOf(req: FastifyRequest): string | undefined {
  const raw = req.headers[IDEMPOTENCY_HEADER];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !KEY_PATTERN.test(raw)) {
    throw new BadRequest('header Idempotency-Key must be 1–255 printable ASCII characters');
  }
  return raw;
}

/**
 * The request's parts as one SHA-256, each part length-prefixed so that no two different requests hash the same
 * stream. A body enters as the digest of the rows it holds (`rowsDigest`): the same rows sent again as other bytes
 * (JSON spaced otherwise, Arrow batched otherwise) are the same request. Keys are per account and database, so a
 * fingerprint only tells one client's own requests apart.
 */
export function fingerprintOf(parts: readonly (string | undefined)[]): string {
  const hash = createHash('sha256');
  for (const part of parts) {
    if (part === undefined) hash.update('none;');
    else hash.update(`text ${Buffer.byteLength(part)}:`).update(part);
  }
  return hash.digest('hex');
}

/** Test builds only: the process kills itself after every Nth committed write, before answering it. */
const CRASH_EVERY = Number(process.env.STRATA_TEST_CRASH_AFTER_COMMIT_EVERY ?? 0);
let committed = 0;
/** Test builds only: the process kills itself once every Nth write's intent is recorded, before it commits. */
const CRASH_BEFORE_EVERY = Number(process.env.STRATA_TEST_CRASH_BEFORE_COMMIT_EVERY ?? 0);
let intents = 0;

/**
 * Claims the key for this request, once its body is read: undefined when the write should run, or an earlier
 * request's answer to repeat. A request whose node died holding the key is found out from its intent: answered
 * if its write landed, run again (under this node's hold) if not.
 */
async function claim<R>(
  ctx: AppContext,
  scope: IdempotencyScope,
  fingerprint: string,
  write: IdempotentWrite<R>,
): Promise<StoredAnswer | undefined> {
  const { store, nodeId, config } = ctx;
  const begun = await store.beginIdempotent(
    scope,
    fingerprint,
    nodeId,
    config.idempotencyHoldMs,
    config.idempotencyTtlMs,
  );
  switch (begun.kind) {
    case 'mismatch':
      throw new Unprocessable(
        'this Idempotency-Key was used for a different request (route, table, predicate or body); use a new key',
        { code: 'idempotency_key_reused' },
      );
    case 'running':
      throw new Conflict('a request with this Idempotency-Key is still running; retry after Retry-After', {
        retryAfterS: 1,
        code: 'idempotency_in_flight',
      });
    case 'done':
      return JSON.parse(begun.response) as StoredAnswer;
    case 'resumed': {
      if (begun.intent === null) return undefined;
      const recovered = await write.recover(JSON.parse(begun.intent) as WriteIntent);
      if (recovered !== undefined) await store.finishIdempotent(scope, nodeId, JSON.stringify(recovered));
      return recovered;
    }
    case 'started':
      return undefined;
  }
}

/**
 * Settles the key of a write that failed after recording its intent: it may still have committed (the error
 * came after), so its history is read now. Found, the key keeps its answer for a retry to repeat; not found, it
 * is let go like one that failed earlier, rather than kept unresolved until a retry that may never come. If the
 * history cannot be read, the key's hold lapses at once and a retry looks for the write itself.
 */
async function settleFailed<R>(
  ctx: AppContext,
  scope: IdempotencyScope,
  write: IdempotentWrite<R>,
  intent: WriteIntent,
): Promise<void> {
  const { store, nodeId } = ctx;
  try {
    const found = await write.recover(intent);
    if (found === undefined) await store.dropIdempotent(scope, nodeId);
    else await store.finishIdempotent(scope, nodeId, JSON.stringify(found));
  } catch {
    await store.renewIdempotent(scope, nodeId, -1).catch(() => undefined);
  }
}

/**
 * Runs a write under the request's idempotency key, if it has one (docs/api.md, Idempotent writes). The key is
 * claimed in the control store once the body is read; the write's intent is recorded there (durably) before it
 * commits, and its answer after. A repeat gets the first answer without writing; a repeat after the first's
 * node died finds out from the intent whether that write landed, and applies it only if it did not.
 */
export async function idempotently<R>(
  ctx: AppContext,
  req: FastifyRequest,
  databaseId: string,
  write: IdempotentWrite<R>,
): Promise<IdempotentOutcome<R>> {
  const key = idempotencyKeyOf(req);
  if (key === undefined) return { kind: 'fresh', result: await write.run(undefined) };
  const { store, nodeId, config } = ctx;
  // Held this long unrenewed: a node that died holding the key blocks a retry no longer than this.
  const holdMs = config.idempotencyHoldMs;
  const scope: IdempotencyScope = { accountId: req.accountId, databaseId, key };
  let stage = 'unclaimed' as 'unclaimed' | 'claimed' | 'intended';
  let intended: WriteIntent | undefined;
  let renew: NodeJS.Timeout | undefined;
  const hooks: WriteHooks = {
    async beforeWrite(tableId, rows) {
      const fingerprint = fingerprintOf([...write.fingerprint, rows === undefined ? undefined : rowsDigest(rows)]);
      const earlier = await claim(ctx, scope, fingerprintFor(tableId, fingerprint), write);
      if (earlier !== undefined) throw new AnsweredBefore(earlier);
      stage = 'claimed';
      renew = setInterval(() => void store.renewIdempotent(scope, nodeId, holdMs).catch(() => undefined), holdMs / 3);
      renew.unref();
    },
    async beforeCommit(intent) {
      if (!(await store.recordIntent(scope, nodeId, JSON.stringify(intent)))) {
        throw new Conflict(
          'this Idempotency-Key was taken over by a retry while the request ran; nothing was written',
          { retryAfterS: 1, code: 'idempotency_in_flight' },
        );
      }
      stage = 'intended';
      intended = intent;
      if (CRASH_BEFORE_EVERY > 0 && ++intents % CRASH_BEFORE_EVERY === 0) process.kill(process.pid, 'SIGKILL');
    },
  };
  try {
    const result = await write.run(hooks);
    if (CRASH_EVERY > 0 && ++committed % CRASH_EVERY === 0) process.kill(process.pid, 'SIGKILL');
    await store.finishIdempotent(scope, nodeId, JSON.stringify(write.answer(result)));
    // A write that committed nothing recorded no intent for a retry to look for: its answer must last instead.
    if (stage !== 'intended') await store.durable();
    return { kind: 'fresh', result };
  } catch (err) {
    if (err instanceof AnsweredBefore) return { kind: 'replayed', answer: err.answer };
    if (stage === 'claimed') await store.dropIdempotent(scope, nodeId).catch(() => undefined);
    if (stage === 'intended') await settleFailed(ctx, scope, write, intended as WriteIntent);
    throw err;
  } finally {
    clearInterval(renew);
  }
}
