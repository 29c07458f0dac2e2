import type { Data, RecordBatch, Schema } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { Conflict } from '../../errors.js';
import { checkPredicate, readingPredicate } from '../predicate/predicate.js';
import type { CatalogStore } from '../tables/catalog.js';
import type { ChangeKind } from '../tables/changes.js';
import { ROW_KEY, storedSchema } from '../tables/schema.js';
import type { TableHandle } from '../tables/tables.js';
import type { BeforeCommit } from './intent.js';
import { batchOf, type ParsedRows, rowKeysOf } from './rows.js';

export interface WriteResult {
  /** The rows as stored (the user's columns), and their schema. */
  rows: RecordBatch[];
  schema: Schema;
  /** The same rows already as an IPC stream, when the body was exactly that. */
  stream?: Uint8Array;
  version: number;
}

export interface RowCounts {
  matched: number;
  n_tombstoned: number;
  n_not_found: number;
}

/** The user's batches with the row key column appended, keys taken in order from `keys`. */
function withRowKeys(table: TableHandle, batches: readonly RecordBatch[], keys: BigInt64Array): RecordBatch[] {
  const stored = storedSchema(table.schema);
  let at = 0;
  return batches.map((batch) => {
    const slice = keys.subarray(at, at + batch.numRows);
    at += batch.numRows;
    const keyData = arrow.makeData({ type: new arrow.Int64(), length: batch.numRows, nullCount: 0, data: slice });
    return batchOf(stored, batch.numRows, [...(batch.data.children as Data[]), keyData]);
  });
}

const rowCount = (batches: readonly RecordBatch[]) => batches.reduce((n, b) => n + b.numRows, 0);

/**
 * Runs one commit of a write through the row source, telling the table's change record what kind of version it
 * made, and its count of unindexed rows the `added` rows it wrote (outside every index until upkeep folds them).
 */
async function recording<T extends { version: number }>(
  table: TableHandle,
  kind: ChangeKind,
  added: number,
  commit: () => Promise<T>,
): Promise<T> {
  const done = table.changes.beginWrite();
  try {
    const result = await commit();
    done({ version: result.version, kind });
    table.unindexed.committed(result.version, added);
    return result;
  } finally {
    done();
  }
}

/**
 * Runs a write in the table's queue and answers once what it wrote is durable (docs/api.md: a 200 means durable
 * in the bucket). The next write commits while this one's files are synced: two appends in flight then share
 * the disk rather than wait for each other's fsync.
 */
async function durably<T>(table: TableHandle, write: () => Promise<T>): Promise<T> {
  const result = await table.writes.run(write);
  await table.rows.sync();
  return result;
}

/** Appends all rows in one commit, or none (docs/api.md). */
export async function append(
  catalog: CatalogStore,
  table: TableHandle,
  parsed: ParsedRows,
  beforeCommit?: BeforeCommit,
): Promise<WriteResult> {
  const { batches: rows, stream } = parsed;
  const n = rowCount(rows);
  return durably(table, async () => {
    if (n === 0) return { rows, stream, schema: table.schema, version: await table.rows.version() };
    const first = await catalog.reserveRowKeys(table.record.tableId, n);
    const fromVersion = await versionBefore(table, beforeCommit);
    const firstKey = String(first);
    await beforeCommit?.({ kind: 'append', tableId: table.record.tableId, firstKey, count: n, fromVersion });
    // Keys reused after a power cut would name two rows: the reservation (and the intent) is durable before the
    // rows are.
    await catalog.durable();
    const keys = BigInt64Array.from({ length: n }, (_, i) => first + BigInt(i));
    const result = await recording(table, 'append', n, () => table.rows.append(withRowKeys(table, rows, keys)));
    return { rows, stream, schema: table.schema, version: result.version };
  });
}

/**
 * The table's version before a keyed write reads anything: its commit, if any, is a later one, which is where a
 * retry after a crash looks for it (intent.ts `findCommit`). Unkeyed writes skip the read.
 */
async function versionBefore(table: TableHandle, beforeCommit: BeforeCommit | undefined): Promise<number | undefined> {
  return beforeCommit === undefined ? undefined : table.rows.version();
}

/** The row keys `predicate` matches, in row order. */
async function matchedKeys(table: TableHandle, predicate: string): Promise<BigInt64Array> {
  return rowKeysOf(await table.rows.rowsWhere(predicate, [ROW_KEY], { userDriven: true })).sort();
}

/**
 * the API's atomic replace: the rows P matches (in row order) are paired with the body's rows, which take over
 * their row keys, and one merge-insert commit swaps them: no reader ever sees neither. Keys a concurrent
 * delete removed first update nothing and are counted as not found.
 */
export async function replace(
  catalog: CatalogStore,
  table: TableHandle,
  predicate: string | undefined,
  parsed: ParsedRows,
  beforeCommit?: BeforeCommit,
): Promise<WriteResult & RowCounts> {
  const { batches: rows, stream } = parsed;
  const sent = rowCount(rows);
  const checked = checkPredicate(predicate, table.schema);
  return durably(table, async () => {
    const fromVersion = await versionBefore(table, beforeCommit);
    const keys = await readingPredicate(() => matchedKeys(table, checked));
    if (keys.length !== sent) {
      throw new Conflict(
        `predicate matched ${keys.length} row${keys.length === 1 ? '' : 's'}; ${sent} replacement row${sent === 1 ? ' was' : 's were'} sent`,
        { code: 'row_count_mismatch' },
      );
    }
    if (sent === 0) {
      return {
        rows,
        stream,
        schema: table.schema,
        version: await table.rows.version(),
        matched: 0,
        n_tombstoned: 0,
        n_not_found: 0,
      };
    }
    if (beforeCommit !== undefined) {
      await beforeCommit({
        kind: 'update',
        tableId: table.record.tableId,
        keys: Array.from(keys, String),
        fromVersion,
      });
      await catalog.durable();
    }
    const merged = await recording(table, 'rewrite', sent, () =>
      table.rows.replaceByKey(withRowKeys(table, rows, keys)),
    );
    const tombstoned = merged.replaced;
    return {
      rows,
      stream,
      schema: table.schema,
      version: merged.version,
      matched: sent,
      n_tombstoned: tombstoned,
      n_not_found: sent - tombstoned,
    };
  });
}

/** Deletes the rows P matches; the counts say how many went and how many a concurrent write took first. */
export async function remove(
  catalog: CatalogStore,
  table: TableHandle,
  predicate: string | undefined,
  beforeCommit?: BeforeCommit,
): Promise<RowCounts & { version: number }> {
  const checked = checkPredicate(predicate, table.schema);
  return durably(table, async () => {
    // The rows' keys are read, not only counted: a retry checks them, and a read can be given a time limit.
    const fromVersion = await versionBefore(table, beforeCommit);
    const keys = await readingPredicate(() => matchedKeys(table, checked));
    const matched = keys.length;
    if (matched > 0 && beforeCommit !== undefined) {
      const tableId = table.record.tableId;
      await beforeCommit({ kind: 'delete', tableId, keys: Array.from(keys, String), predicate: checked, fromVersion });
      await catalog.durable();
    }
    if (matched === 0) return { matched, n_tombstoned: 0, n_not_found: 0, version: await table.rows.version() };
    const deleted = await recording(table, 'rewrite', 0, () => table.rows.delete(checked));
    const tombstoned = Math.min(matched, deleted.deleted);
    return { matched, n_tombstoned: tombstoned, n_not_found: matched - tombstoned, version: deleted.version };
  });
}
