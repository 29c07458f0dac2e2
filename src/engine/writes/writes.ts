import type { Data, RecordBatch, Schema } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { BadRequest, Conflict } from '../../errors.js';
import { vectorsOf } from '../fresh/batches.js';
import type { ColumnVectors, FreshWrite } from '../fresh/rows.js';
import { checkPredicate, readingPredicate } from '../predicate/predicate.js';
import type { CatalogStore } from '../tables/catalog.js';
import type { ChangeKind } from '../tables/changes.js';
import {
  assertKeysFree,
  type BodyKeys,
  duplicateKey,
  keysNamedBy,
  keysOfBody,
  rowsHoldingKeys,
} from '../tables/primary-key.js';
import { ROW_KEY, storedSchema, withinRowKeys } from '../tables/schema.js';
import { type TableHandle, unknownTable } from '../tables/tables.js';
import { type ColumnTexts, type CommitTexts, textsOf } from '../text/statistics.js';
import type { Upserted } from './command.js';
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
 * What a commit does to the rows: how many it adds, the keys of those it removes and writes, and the full-text
 * columns' texts of those it removes and adds (undefined when BM25's statistics were not kept as the write began:
 * nobody needs them).
 */
interface RowChange {
  kind: ChangeKind;
  added: number;
  keys: { removed: readonly bigint[]; written: readonly bigint[] };
  /** The written rows' texts and vectors, for the fresh rows searched beside the indexes (`FreshRows`). */
  written: FreshWrite;
  texts: CommitTexts;
}

/**
 * Runs one commit of a write through the row source, telling the table's change record what kind of version it
 * made, its count of unindexed rows the rows it added (outside every index until upkeep folds them), and BM25's
 * statistics the texts it removed and added.
 */
async function recording<T extends { version: number }>(
  table: TableHandle,
  change: RowChange,
  commit: () => Promise<T>,
): Promise<T> {
  const done = table.changes.beginWrite(change.kind);
  try {
    let result: T;
    try {
      result = await commit();
    } catch (err) {
      // It may have landed all the same (no answer from the bucket): the fresh rows and BM25's statistics cannot know.
      table.fresh.unsettled();
      table.text.unsettled();
      throw err;
    }
    done({ version: result.version, kind: change.kind });
    table.unindexed.committed(result.version, change.added, change.kind === 'rewrite');
    // What a delete or replace left outside the indexes is read back in the background, for the gauge.
    if (change.kind === 'rewrite') table.unindexed.at(result.version).catch(() => undefined);
    table.text.committed(result.version, change.texts);
    table.fresh.committed(result.version, change.keys.removed, change.keys.written, change.written);
    return result;
  } finally {
    done();
  }
}

/** The full-text columns' texts of batches of rows. */
const textsOfBatches = (table: TableHandle, batches: readonly RecordBatch[]): ColumnTexts =>
  new Map(table.indexes.fts.map((f) => [f.column, batches.flatMap((batch) => textsOf(batch, f.column))] as const));

const NOTHING_FRESH: FreshWrite = { texts: new Map(), vectors: new Map(), rows: [] };

/** The vector columns' vectors of batches of rows, when the fresh rows hold them. */
const vectorsOfBatches = (table: TableHandle, batches: readonly RecordBatch[]): ColumnVectors =>
  table.fresh.tracks('vector')
    ? new Map(
        table.indexes.vector.map((v) => [v.column, batches.flatMap((batch) => vectorsOf(batch, v.column))] as const),
      )
    : new Map();

/**
 * What a commit that removes the rows of `removed` and writes `batches` (as stored: with their row keys, `written`)
 * does to the rows.
 */
async function rowChange(
  table: TableHandle,
  kind: ChangeKind,
  removed: readonly bigint[],
  written: readonly bigint[],
  batches: readonly RecordBatch[],
  primaryKeys?: BodyKeys,
): Promise<RowChange> {
  const texts = await textsOfChange(table, removed, batches);
  const fresh = table.fresh.tracking && written.length > 0;
  return {
    kind,
    added: written.length,
    keys: { removed, written },
    written: fresh
      ? {
          texts: texts?.added ?? textsOfBatches(table, batches),
          vectors: vectorsOfBatches(table, batches),
          rows: batches,
          primaryKeys: primaryKeys?.values.map((v) => v.text),
        }
      : NOTHING_FRESH,
    texts,
  };
}

/**
 * The texts a commit removes (the rows of `keys`, read before it) and adds (`batches`), when the table's BM25
 * statistics are kept (they follow the commit); undefined otherwise, which costs nothing.
 */
async function textsOfChange(
  table: TableHandle,
  keys: readonly bigint[],
  batches: readonly RecordBatch[],
): Promise<CommitTexts> {
  if (table.indexes.fts.length === 0 || !table.text.kept) return undefined;
  const columns = [ROW_KEY, ...table.indexes.fts.map((f) => f.column)];
  // Another node may change these rows before the commit: the statistics then read what changed instead.
  const readAt = keys.length === 0 ? undefined : await table.rows.version();
  const read = keys.length === 0 ? [] : await table.rows.rowsByKey(keys, columns);
  return {
    removed: textsOfBatches(
      table,
      read.flatMap((t) => t.batches),
    ),
    added: textsOfBatches(table, batches),
    readAt,
  };
}

/**
 * Runs a write in the table's queue and answers once what it wrote is durable (docs/api.md: a 200 means durable
 * in the bucket). The next write commits while this one's files are synced: two appends in flight then share
 * the disk rather than wait for each other's fsync.
 */
async function durably<T>(table: TableHandle, write: () => Promise<T>): Promise<T> {
  const result = await table.writes.run(() => {
    // Dropped while this write waited its turn: answered as the drop is by those who ask after it.
    if (table.closed) throw unknownTable(table.record.name);
    return write();
  });
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
  const primaryKeys = bodyKeys(table, rows, duplicateKey);
  return durably(table, () =>
    holdingKeys(catalog, table, async () => {
      if (n === 0) return { rows, stream, schema: table.schema, version: await table.rows.version() };
      if (primaryKeys !== undefined) assertKeysFree(primaryKeys, await rowsHoldingKeys(table, primaryKeys));
      const first = await catalog.reserveRowKeys(table.record.tableId, n);
      const fromVersion = await versionBefore(table, beforeCommit);
      const firstKey = String(first);
      await beforeCommit?.({ kind: 'append', tableId: table.record.tableId, firstKey, count: n, fromVersion });
      // Keys reused after a power cut would name two rows: the reservation (and the intent) is durable before the
      // rows are.
      await catalog.durable();
      const keys = BigInt64Array.from({ length: n }, (_, i) => first + BigInt(i));
      const stored = withRowKeys(table, rows, keys);
      const change = await rowChange(table, 'append', [], Array.from(keys), stored, primaryKeys);
      const result = await recording(table, change, () => table.rows.append(stored));
      return { rows, stream, schema: table.schema, version: result.version };
    }),
  );
}

/** The primary key values of a write's rows (two rows with one value refused by `duplicate`); none without a key. */
function bodyKeys(
  table: TableHandle,
  rows: readonly RecordBatch[],
  duplicate: (message: string) => Error,
): BodyKeys | undefined {
  return table.primaryKey === undefined ? undefined : keysOfBody(table.primaryKey, rows, duplicate);
}

/**
 * Runs a write of a table with a primary key holding its keys on every node (`CatalogStore.holdKeys`): its lookup
 * of keys and its commit see no other write of the table in between. Writes to other tables go on.
 */
async function holdingKeys<T>(catalog: CatalogStore, table: TableHandle, write: () => Promise<T>): Promise<T> {
  if (table.primaryKey === undefined) return write();
  const release = await catalog.holdKeys(table.record.tableId);
  try {
    return await write();
  } finally {
    await release();
  }
}

/**
 * The table's version before a keyed write reads anything: its commit, if any, is a later one, which is where a
 * retry after a crash looks for it (intent.ts `findCommit`). Unkeyed writes skip the read.
 */
async function versionBefore(table: TableHandle, beforeCommit: BeforeCommit | undefined): Promise<number | undefined> {
  return beforeCommit === undefined ? undefined : table.rows.version();
}

/** The keys of the rows a write's predicate matches, in row order, and who holds the body's primary keys. */
interface Matched {
  keys: BigInt64Array;
  /** The stored rows holding the body's key values, when the same lookup found them (`rowsHoldingKeys`). */
  holders?: ReadonlyMap<string, bigint>;
}

/**
 * The row keys `predicate` matches, in row order. On a keyed table a predicate that names key values (`id = 7`,
 * `id IN (…)`) is answered by one lookup of those values and of the body's keys (`body`) together, as keyed writes
 * find their keys; any other predicate is a read of every row.
 */
async function matchedKeys(table: TableHandle, predicate: string, body?: BodyKeys): Promise<Matched> {
  const named = table.primaryKey === undefined ? undefined : keysNamedBy(predicate, table.primaryKey);
  if (named === undefined) {
    const read = await table.rows.rowsWhere(predicate, [ROW_KEY], { userDriven: true });
    return { keys: rowKeysOf(read).sort() };
  }
  const values = new Map([...(body?.values ?? []), ...named.values].map((v) => [v.text, v] as const));
  const holders = await rowsHoldingKeys(table, { field: named.field, values: [...values.values()] });
  const keys = named.values.flatMap((v) => {
    const key = holders.get(v.text);
    return key === undefined ? [] : [key];
  });
  return { keys: BigInt64Array.from(keys).sort(), holders: body === undefined ? undefined : holders };
}

/**
 * The API's atomic replace: the rows P matches (in row order) are paired with the body's rows, which take over
 * their row keys, and one merge-insert commit swaps them: no reader ever sees neither. Keys a concurrent
 * delete removed first update nothing and are counted as not found. On a keyed table the new rows may hold the
 * primary keys of the rows they replace and of no other row (409 `duplicate_key`).
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
  const primaryKeys = bodyKeys(table, rows, duplicateKey);
  return durably(table, () =>
    holdingKeys(catalog, table, async () => {
      const fromVersion = await versionBefore(table, beforeCommit);
      const { keys, holders } = await readingPredicate(() => matchedKeys(table, checked, primaryKeys));
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
      // The new rows may take the values of the rows they replace, and of no other.
      if (primaryKeys !== undefined) {
        assertKeysFree(primaryKeys, holders ?? (await rowsHoldingKeys(table, primaryKeys)), new Set(keys));
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
      const stored = withRowKeys(table, rows, keys);
      const change = await rowChange(table, 'rewrite', Array.from(keys), Array.from(keys), stored, primaryKeys);
      const merged = await recording(table, change, () => table.rows.replaceByKey(stored));
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
    }),
  );
}

/**
 * Writes rows by primary key (docs/api.md, Upsert): a row whose key the table holds replaces that row (taking
 * over its row key), the others are inserted with new row keys, all in one commit. Without a row to replace it is
 * an append, which commits faster than a merge.
 */
export async function upsert(
  catalog: CatalogStore,
  table: TableHandle,
  parsed: ParsedRows,
  beforeCommit?: BeforeCommit,
): Promise<WriteResult & Upserted> {
  const { batches: rows, stream } = parsed;
  const n = rowCount(rows);
  const keys = bodyKeys(table, rows, (message) => new BadRequest(`${message}; nothing was written`));
  if (keys === undefined) {
    throw new BadRequest(
      `table "${table.record.name}" has no primary key; upsert finds rows by it (create_table's primary_key)`,
    );
  }
  return durably(table, () =>
    holdingKeys(catalog, table, async () => {
      const version = await versionBefore(table, beforeCommit);
      if (n === 0)
        return { rows, stream, schema: table.schema, version: await table.rows.version(), inserted: 0, updated: 0 };
      const found = await rowsHoldingKeys(table, keys);
      const inserted = n - found.size;
      const first = inserted > 0 ? await catalog.reserveRowKeys(table.record.tableId, inserted) : undefined;
      let next = first ?? 0n;
      const rowKeys = BigInt64Array.from(keys.values, (v) => found.get(v.text) ?? next++);
      await beforeCommit?.({
        kind: 'upsert',
        tableId: table.record.tableId,
        keys: Array.from(rowKeys, String),
        firstKey: first === undefined ? undefined : String(first),
        inserted,
        fromVersion: version,
      });
      // Reserved keys, like an append's, and the intent last a power cut before the rows are written.
      await catalog.durable();
      const stored = withRowKeys(table, rows, rowKeys);
      const replaced = [...found.values()];
      if (replaced.length === 0) {
        const change = await rowChange(table, 'append', [], Array.from(rowKeys), stored, keys);
        const appended = await recording(table, change, () => table.rows.append(stored));
        return { rows, stream, schema: table.schema, version: appended.version, inserted: n, updated: 0 };
      }
      const change = await rowChange(table, 'rewrite', replaced, Array.from(rowKeys), stored, keys);
      // Every write that could remove a found row holds the keys as this one does: the rows found are there. A merge
      // that only updates commits faster (4.4 ms against 9.0 for one row at 1M, in process).
      const merged = await recording(table, change, () => table.rows.replaceByKey(stored, inserted > 0));
      return {
        rows,
        stream,
        schema: table.schema,
        version: merged.version,
        inserted: merged.inserted,
        updated: merged.replaced,
      };
    }),
  );
}

/** Deletes of at most this many rows are bounded by the row keys read (an IN list of ~200 KB). */
const DELETE_BY_KEYS = 10_000;

/**
 * Deletes the rows P matches; the counts say how many went and how many were gone or no longer matched when the
 * delete committed.
 */
export async function remove(
  catalog: CatalogStore,
  table: TableHandle,
  predicate: string | undefined,
  beforeCommit?: BeforeCommit,
): Promise<RowCounts & { version: number }> {
  const checked = checkPredicate(predicate, table.schema);
  // On a keyed table a delete holds the keys too: an upsert that found a key's row then replaces it in place,
  // which a delete on another node in between would leave undone.
  return durably(table, () =>
    holdingKeys(catalog, table, async () => {
      // The rows' keys are read, not only counted: a retry checks them, and a read can be given a time limit.
      const fromVersion = await versionBefore(table, beforeCommit);
      const { keys } = await readingPredicate(() => matchedKeys(table, checked));
      const matched = keys.length;
      if (matched > 0 && beforeCommit !== undefined) {
        const tableId = table.record.tableId;
        await beforeCommit({
          kind: 'delete',
          tableId,
          keys: Array.from(keys, String),
          predicate: checked,
          fromVersion,
        });
        await catalog.durable();
      }
      if (matched === 0) return { matched, n_tombstoned: 0, n_not_found: 0, version: await table.rows.version() };
      const change = await rowChange(table, 'rewrite', Array.from(keys), [], []);
      // Lance evaluates the predicate again as it deletes. Bounded by the keys read, no row the read did not count
      // goes; one that no longer matches (a predicate on now(), a concurrent write) stays.
      const bounded = matched <= DELETE_BY_KEYS ? withinRowKeys(keys, checked) : checked;
      const deleted = await recording(table, change, () => table.rows.delete(bounded));
      if (deleted.deleted !== matched) {
        // Not the rows the fresh rows and BM25's statistics were told of.
        table.fresh.unsettled();
        table.text.unsettled();
      }
      const tombstoned = Math.min(matched, deleted.deleted);
      return { matched, n_tombstoned: tombstoned, n_not_found: matched - tombstoned, version: deleted.version };
    }),
  );
}
