import type { IdempotencyBegin } from '../engine/writes/service.js';

export type { IdempotencyBegin, IdempotencyScope } from '../engine/writes/service.js';

/** A key's record as the store keeps it. */
export interface IdempotencyRecord {
  fingerprint: string;
  state: 'running' | 'done';
  runningUntilMs: number;
  expiresMs: number;
  /** What the write was about to commit (JSON), once it got that far. */
  intent: string | null;
  /** The answer, once the write finished (JSON). */
  response: string | null;
}

/**
 * Whether two fingerprints are the same request to two instances of a table (dropped and made again between). A
 * fingerprint is `<table id>/<request hash>` (`fingerprintOf` in engine/writes/service.ts): a table made again
 * under its name has a new id, so the same request to it is a new write.
 */
function sameRequestOtherTable(recorded: string, fingerprint: string): boolean {
  const at = recorded.indexOf('/');
  const other = fingerprint.indexOf('/');
  return at >= 0 && other >= 0 && recorded.slice(at) === fingerprint.slice(other) && recorded !== fingerprint;
}

/** The decision for a request with `fingerprint` given the key's live record (both stores share it). */
export function decide(
  record: IdempotencyRecord,
  fingerprint: string,
  nowMs: number,
): 'restart' | 'resume' | Exclude<IdempotencyBegin, { kind: 'resumed' | 'started' }> {
  // A key outlives its expiry while its write is unresolved: still held by a live request, or recorded as about to
  // commit by a node that died before answering. Started afresh, it would apply a write that may have landed.
  const unresolved = record.state === 'running' && (record.runningUntilMs >= nowMs || record.intent !== null);
  if (record.expiresMs < nowMs && !unresolved) return 'restart';
  // The key's write went to a table that is gone: nothing it wrote is in this one, so this request is new.
  if (sameRequestOtherTable(record.fingerprint, fingerprint)) return 'restart';
  if (record.fingerprint !== fingerprint) return { kind: 'mismatch' };
  if (record.state === 'done') return { kind: 'done', response: record.response ?? '{}' };
  return record.runningUntilMs < nowMs ? 'resume' : { kind: 'running' };
}
