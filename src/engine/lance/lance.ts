import type { AddResult, Table as LanceTable, Query, QueryExecutionOptions } from '@lancedb/lancedb';
import type { RecordBatch, Table } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { Conflict, Unavailable } from '../../errors.js';
import { CommitRefused, CommitUnanswered } from '../rows/source.js';
import { ROW_KEY } from '../tables/schema.js';

// How the Lance row source's reads run and what Lance's error messages mean. Only engine/lance/ imports LanceDB
// (the linter holds every other module to that); the rest of the service reaches it through rows/source.ts.

export type { Connection, FullTextQuery, IndexConfig, Table as LanceTable, VectorQuery } from '@lancedb/lancedb';
export { BooleanQuery, connect, Index, MatchQuery, Occur, Operator, PhraseQuery } from '@lancedb/lancedb';

/**
 * How the service's Lance reads run (all but a SQL load's: `LOAD_BATCH_ROWS`). Lance scans in batches of up to this
 * many rows, not its default of 1,024: scans that a predicate or filter drives then read and filter far fewer,
 * larger batches. At 1.32M rows (16,384 against 1,024): `id = 777` 7.3 ms against 16.7; a predicate matching 10% 20
 * ms against 159; a search leg with that as its filter 13.3 ms (text) and 21.6 ms (vector) against 26.1 and 39.5;
 * counting 91k full-text hits 36 ms against 52. Search legs without a filter, and their scan of rows no index
 * covers yet, measured the same.
 */
export const READ_OPTIONS: Partial<QueryExecutionOptions> = { maxBatchLength: 16_384 };

/**
 * How long a read that a user's predicate or filter drives may run: as long as a SQL statement may by default. A
 * predicate is bounded in what it can build (predicate/parser.ts); this bounds what it can cost to evaluate.
 */
export const PREDICATE_TIMEOUT_MS = 30_000;

/** The options of a read that a user's predicate or filter drives. */
export const PREDICATE_READ: Partial<QueryExecutionOptions> = { ...READ_OPTIONS, timeoutMs: PREDICATE_TIMEOUT_MS };

/**
 * Rows per batch of a SQL load's scan, which reads vectors wholesale. At Lance's default of 1,024, a load crosses
 * into JS a thousand times per million rows, and each batch costs JS time and garbage. A whole load of 1.01M rows ×
 * 384-d took 5.3–5.5 s at 4,096, against 6.3–7.4 s at 1,024, 5.8–6.1 s at 2,048 and 6.0–6.6 s at 8,192.
 */
export const LOAD_BATCH_ROWS = 4096;

/** A limit that reads every row a query matches: a search query otherwise stops at Lance's default limit. */
export const ALL_ROWS = 1_000_000_000;

/** A query's whole result, read with the service's options. */
export function readAll(
  query: { toArrow(options?: Partial<QueryExecutionOptions>): Promise<Table> },
  options = READ_OPTIONS,
): Promise<Table> {
  return query.toArrow(options);
}

/**
 * A query's batches as they come, at most `maxBatchLength` rows each. This is what `for await` over a query runs,
 * with options; LanceDB documents `execute` as public but types it protected.
 */
export function streamOf(query: Query, maxBatchLength: number): AsyncIterable<RecordBatch> {
  const executable = query as unknown as {
    execute(options: Partial<QueryExecutionOptions>): AsyncGenerator<RecordBatch>;
  };
  return executable.execute({ maxBatchLength });
}

/**
 * Appends batches in one commit. This is what LanceDB's `add()` does with a Table, less a copy of the encoded rows
 * (a `Buffer.from` of its writer's output) and a read of the table's schema, which it needs only for embedding
 * functions (the service declares none); appends are where a load spends the event loop. The native `add` takes
 * the rows as an IPC file; LanceDB types the binding `inner` private.
 */
export function appendBatches(table: LanceTable, batches: RecordBatch[]): Promise<AddResult> {
  const native = (table as unknown as { inner: { add(ipc: Buffer, mode: 'append'): Promise<AddResult> } }).inner;
  const ipc = arrow.tableToIPC(new arrow.Table(batches), 'file');
  return native.add(Buffer.from(ipc.buffer, ipc.byteOffset, ipc.byteLength), 'append');
}

/**
 * Lance's message without its plumbing (wrappers of the Node binding and of Lance itself), and without the
 * service's own column in lists of valid fields: what a client may read of a refusal Lance gave.
 */
export function lanceMessage(err: unknown): string {
  const raw = err instanceof Error ? err.message : String(err);
  return (
    raw
      .replace(/^Failed to execute query stream: /, '')
      .replace(/^GenericFailure, /, '')
      .replace(/^Invalid input, /, '')
      .replace(/^lance error: /i, '')
      .replaceAll(`, \`${ROW_KEY}\``, '')
      .replaceAll(`\`${ROW_KEY}\`, `, '')
      // Lance lists its own columns beside the user's: a user may name only the latter (predicate/parser.ts).
      .replace(/ Valid fields are [^\n]*?\.(?= |$)/, '')
      .split('\n')[0] as string
  );
}

/**
 * Whether Lance refused because the table handle was closed under the call (its table dropped or let go); Lance
 * names the table: "Table t_… is closed".
 */
export const isClosedTable = (err: unknown): boolean => /\bTable (\S+ )?is closed\b/i.test(String(err));

/** Whether Lance refused because the dataset is not there (dropped, or never written). */
export const isMissingDataset = (err: unknown): boolean => /not found|does not exist/i.test(String(err));

/** Whether Lance refused a commit because another landed first; the commit may be tried again. */
export const isCommitConflict = (err: unknown): boolean => /Retryable commit conflict/i.test(String(err));

/** The status a bucket answered a request of Lance's with, when it answered with an error. */
const answeredStatus = (err: unknown): number | undefined => {
  const status = /Server returned non-2xx status code: (\d{3})/.exec(String(err))?.[1];
  return status === undefined ? undefined : Number(status);
};

/**
 * Whether Lance failed reaching the bucket (an error status, no answer, no connection), not the data. A query's own
 * time limit is not one: its message says "timed out" without naming a request to the bucket.
 */
const isStorageFailure = (err: unknown): boolean =>
  /LanceError\(IO\)|Error performing (GET|PUT|POST|DELETE|HEAD)|connection refused|dns error/i.test(String(err));

/**
 * A failure of Lance to reach the bucket, as the API answers it: 503 `storage_unavailable` (a grant revoked or a
 * bucket gone answers with a refusal, an outage with none); undefined for any other error.
 */
export function storageFailure(err: unknown): Unavailable | undefined {
  if (!isStorageFailure(err) || isMissingDataset(err)) return undefined;
  const status = answeredStatus(err);
  const refused = status !== undefined && status >= 400 && status < 500;
  return new Unavailable(
    refused
      ? `the bucket refused to serve the table's files (HTTP ${status}); check the database's grant`
      : 'the bucket could not be reached; retry shortly',
    { retryAfterS: 5, code: 'storage_unavailable' },
  );
}

/**
 * Runs a commit of a user's write. Lance retries what it can rebase itself (appends); a commit it gave up on
 * because another writer (upkeep, or another node) rewrote the same rows first changed nothing, and the client
 * may send it again: 409 with Retry-After, never a 500. A bucket that refused the commit, or did not answer it,
 * is 503 `storage_unavailable`; only a refusal the bucket answered (a 4xx) is certain to have written nothing.
 */
export async function committing<T>(commit: () => Promise<T>): Promise<T> {
  try {
    return await commit();
  } catch (err) {
    if (isCommitConflict(err)) {
      throw new Conflict('another write to the table committed first and this one was not applied; send it again', {
        retryAfterS: 1,
        code: 'write_conflict',
      });
    }
    if (!isStorageFailure(err)) throw err;
    const status = answeredStatus(err);
    if (status !== undefined && status >= 400 && status < 500) {
      throw new CommitRefused(
        `the bucket refused the write's commit (HTTP ${status}); nothing was written. Check the database's grant`,
      );
    }
    throw new CommitUnanswered(
      'the bucket could not be reached to commit the write; it may have landed: send it again with the same Idempotency-Key to find out',
    );
  }
}
