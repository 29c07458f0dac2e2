import { createHash } from 'node:crypto';
import type { RecordBatch } from 'apache-arrow';
import { rowsDigest } from '../../arrow/digest.js';
import { Conflict, Unprocessable } from '../../errors.js';
import { CommitRefused } from '../rows/source.js';
import type {
  RowCounts,
  StoredRows,
  Upserted,
  WriteAnswer,
  WriteCommand,
  WriteOptions,
  WriteOutcome,
} from './command.js';
import { type BeforeCommit, intentFromJson, type WriteIntent } from './intent.js';

/** One idempotency key: an account's, for one database (docs/api.md, Idempotent writes). */
export interface IdempotencyScope {
  accountId: string;
  databaseId: string;
  key: string;
}

/** What a request carrying a key should do, decided by the control store atomically across nodes. */
export type IdempotencyBegin =
  /** The first request with the key (or the first since it expired): run the write. */
  | { kind: 'started' }
  /** The key was used for a different request. */
  | { kind: 'mismatch' }
  /** The first request is still running. */
  | { kind: 'running' }
  /** The first request finished: answer what it answered. */
  | { kind: 'done'; response: string }
  /** The first request's node stopped before it finished: find out whether its write landed. */
  | { kind: 'resumed'; intent: string | null };

/** What the write path needs of the control store to keep idempotency keys (the store implements it). */
export interface WriteLedger {
  /**
   * Starts a request carrying an idempotency key, atomically across nodes: a new (or expired) key is taken by
   * `holder` for `runForMs` and kept `keepForMs`; otherwise the key's record decides (`IdempotencyBegin`).
   */
  beginIdempotent(
    scope: IdempotencyScope,
    fingerprint: string,
    holder: string,
    runForMs: number,
    keepForMs: number,
  ): Promise<IdempotencyBegin>;
  /** Extends the running request's hold while its write runs. */
  renewIdempotent(scope: IdempotencyScope, holder: string, runForMs: number): Promise<void>;
  /**
   * Records what the write is about to commit; false when `holder` no longer holds the key. It lasts a power cut
   * once `durable` has resolved, which the write awaits before its commit (`BeforeCommit`).
   */
  recordIntent(scope: IdempotencyScope, holder: string, intent: string): Promise<boolean>;
  /** Records the answer; later requests with the key get it. */
  finishIdempotent(scope: IdempotencyScope, holder: string, response: string): Promise<void>;
  /** Forgets a key whose request failed before writing, so that it may be sent again. */
  dropIdempotent(scope: IdempotencyScope, holder: string): Promise<void>;
  /** Makes every change committed so far last a power cut. */
  durable(): Promise<void>;
}

/** How keys are held: by this node, for `holdMs` unrenewed, and remembered `ttlMs`. */
export interface LedgerSettings {
  nodeId: string;
  holdMs: number;
  ttlMs: number;
}

/** Told where a keyed write stands; tests kill the process at these points to prove recovery. */
export interface WriteObserver {
  intentRecorded?(): void;
  committed?(): void;
}

/** What a write tells the write path on its way, which may stop it (`stop`: an earlier request answered). */
export interface WriteHooks {
  /**
   * The body is read and checked, and nothing is written yet: the write goes to the table with this id, with
   * these rows (none for a delete).
   */
  beforeWrite(tableId: string, rows?: readonly RecordBatch[]): Promise<'go' | 'stop'>;
  beforeCommit: BeforeCommit;
}

/**
 * What a write that ran answers: its version, the rows as stored (append, update, upsert), its counts (update,
 * delete, upsert).
 */
export type Written = { version: number } & Partial<StoredRows & RowCounts & Upserted>;

/** What the write path runs a command with: the worker's side of one write on one table. */
export interface WriteTarget {
  /** Runs the write, telling `hooks` when its body is read and what it is about to commit; undefined if stopped. */
  run(hooks: WriteHooks | undefined): Promise<Written | undefined>;
  /** Whether a run that recorded `intent` committed, and what it would have answered. */
  recover(intent: WriteIntent): Promise<WriteAnswer | undefined>;
  /** The body's rows as stored, for a replayed append or update that answers them. */
  stored(): Promise<StoredRows>;
}

const NO_COUNTS: RowCounts = { matched: 0, n_tombstoned: 0, n_not_found: 0 };

/** The part of an answer a key keeps: rows an answer echoes are made again from the same body. */
const kept = (answer: WriteAnswer): WriteAnswer => ({
  version: answer.version,
  counts: answer.counts,
  upserted: answer.upserted,
});

/**
 * The request's parts as one SHA-256, each part length-prefixed so that no two different requests hash the same
 * stream. A body enters as the digest of the rows it holds (`rowsDigest`): the same rows sent again as other bytes
 * (JSON spaced otherwise, Arrow batched otherwise) are the same request. The table's id leads, so the same request
 * to a table dropped and made again is a new write. Keys are per account and database, so a fingerprint only
 * tells one client's own requests apart.
 */
export function fingerprintOf(
  request: { kind: WriteCommand['kind']; table: string; predicate?: string },
  tableId: string,
  rows: readonly RecordBatch[] | undefined,
): string {
  const { kind, table, predicate } = request;
  const hash = createHash('sha256');
  for (const part of [kind, table, predicate, rows === undefined ? undefined : rowsDigest(rows)]) {
    if (part === undefined) hash.update('none;');
    else hash.update(`text ${Buffer.byteLength(part)}:`).update(part);
  }
  return `${tableId}/${hash.digest('hex')}`;
}

const upsertedOf = (written: Partial<Upserted>): Upserted | undefined =>
  written.inserted === undefined ? undefined : { inserted: written.inserted, updated: written.updated ?? 0 };

const countsOf = (written: Partial<RowCounts>): RowCounts | undefined =>
  written.matched === undefined
    ? undefined
    : { matched: written.matched, n_tombstoned: written.n_tombstoned ?? 0, n_not_found: written.n_not_found ?? 0 };

/**
 * The one way a write runs (docs/api.md, Idempotent writes): without a key, once; with one, the key is claimed in
 * the control store once the body is read, the write's intent recorded there (durably) before it commits, and its
 * answer after. A repeat gets the first answer without writing; a repeat after the first's node died finds out
 * from the intent whether that write committed, and applies it only if it did not.
 */
export class WritePath {
  constructor(
    private readonly ledger: WriteLedger,
    private readonly settings: LedgerSettings,
    private readonly observer: WriteObserver = {},
  ) {}

  async write(
    databaseId: string,
    command: WriteCommand,
    options: WriteOptions,
    target: WriteTarget,
  ): Promise<WriteOutcome> {
    if (options.key === undefined) return this.fresh((await target.run(undefined)) as Written);
    const { ledger } = this;
    const { nodeId, holdMs } = this.settings;
    const scope: IdempotencyScope = { ...options.key, databaseId };
    let stage = 'unclaimed' as 'unclaimed' | 'claimed' | 'intended';
    let intended: WriteIntent | undefined;
    let earlier: WriteAnswer | undefined;
    let renew: NodeJS.Timeout | undefined;
    const hooks: WriteHooks = {
      beforeWrite: async (tableId, rows) => {
        earlier = await this.claim(scope, fingerprintOf(command, tableId, rows), target);
        if (earlier !== undefined) return 'stop';
        stage = 'claimed';
        renew = setInterval(
          () => void ledger.renewIdempotent(scope, nodeId, holdMs).catch(() => undefined),
          holdMs / 3,
        );
        renew.unref();
        return 'go';
      },
      beforeCommit: async (intent) => {
        if (!(await ledger.recordIntent(scope, nodeId, JSON.stringify(intent)))) {
          throw new Conflict(
            'this Idempotency-Key was taken over by a retry while the request ran; nothing was written',
            {
              retryAfterS: 1,
              code: 'idempotency_in_flight',
            },
          );
        }
        stage = 'intended';
        intended = intent;
        this.observer.intentRecorded?.();
      },
    };
    try {
      const written = await target.run(hooks);
      if (written === undefined) return this.replayed(command, earlier as WriteAnswer, options, target);
      this.observer.committed?.();
      const answer = this.fresh(written);
      await ledger.finishIdempotent(scope, nodeId, JSON.stringify(kept(answer)));
      // A write that committed nothing recorded no intent for a retry to look for: its answer must last instead.
      if (stage !== 'intended') await ledger.durable();
      return answer;
    } catch (err) {
      if (stage === 'claimed') await ledger.dropIdempotent(scope, nodeId).catch(() => undefined);
      if (stage === 'intended') await this.settleFailed(scope, target, intended as WriteIntent, err);
      throw err;
    } finally {
      clearInterval(renew);
    }
  }

  private fresh(written: Written): WriteOutcome {
    const { version, rows, schema, stream } = written;
    const stored = rows !== undefined && schema !== undefined ? { rows, schema, stream } : undefined;
    return { replayed: false, version, counts: countsOf(written), upserted: upsertedOf(written), stored };
  }

  /** An earlier request's answer, repeated: its version and counts, with the rows made again from the same body. */
  private async replayed(
    command: WriteCommand,
    earlier: WriteAnswer,
    options: WriteOptions,
    target: WriteTarget,
  ): Promise<WriteOutcome> {
    const stored = options.echo && command.kind !== 'delete' ? await target.stored() : undefined;
    // An update or delete that matched nothing recorded no counts.
    const counts = command.kind === 'update' || command.kind === 'delete' ? (earlier.counts ?? NO_COUNTS) : undefined;
    const upserted = command.kind === 'upsert' ? (earlier.upserted ?? { inserted: 0, updated: 0 }) : undefined;
    return { replayed: true, version: earlier.version, counts, upserted, stored };
  }

  /**
   * Claims the key for this request, once its body is read: undefined when the write should run, or an earlier
   * request's answer to repeat. A request whose node died holding the key is found out from its intent: answered
   * if its write committed, run again (under this node's hold) if not.
   */
  private async claim(
    scope: IdempotencyScope,
    fingerprint: string,
    target: WriteTarget,
  ): Promise<WriteAnswer | undefined> {
    const { nodeId, holdMs, ttlMs } = this.settings;
    const begun = await this.ledger.beginIdempotent(scope, fingerprint, nodeId, holdMs, ttlMs);
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
        return JSON.parse(begun.response) as WriteAnswer;
      case 'resumed': {
        if (begun.intent === null) return undefined;
        const recovered = await target.recover(intentFromJson(begun.intent));
        if (recovered !== undefined) await this.ledger.finishIdempotent(scope, nodeId, JSON.stringify(kept(recovered)));
        return recovered;
      }
      case 'started':
        return undefined;
    }
  }

  /**
   * Settles the key of a write that failed after recording its intent: it may still have committed (the error
   * came after), so its history is read now. Found, the key keeps its answer for a retry to repeat. Not found, and
   * certain never to land (the bucket refused the commit, or another commit won the race), the key is let go like
   * one that failed earlier, rather than kept unresolved until a retry that may never come. Otherwise (a commit the
   * bucket did not answer may still land) the key's hold lapses at once and a retry looks for the write itself.
   */
  private async settleFailed(
    scope: IdempotencyScope,
    target: WriteTarget,
    intent: WriteIntent,
    failure: unknown,
  ): Promise<void> {
    const { ledger } = this;
    const { nodeId } = this.settings;
    const neverLands =
      failure instanceof CommitRefused || (failure instanceof Conflict && failure.code === 'write_conflict');
    try {
      const found = await target.recover(intent);
      if (found !== undefined) await ledger.finishIdempotent(scope, nodeId, JSON.stringify(kept(found)));
      else if (neverLands) await ledger.dropIdempotent(scope, nodeId);
      else await ledger.renewIdempotent(scope, nodeId, -1);
    } catch {
      await ledger.renewIdempotent(scope, nodeId, -1).catch(() => undefined);
    }
  }
}
