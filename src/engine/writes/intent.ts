import type { RecordBatch } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { readAll } from '../lance.js';
import { ROW_KEY } from '../tables/schema.js';
import type { TableHandle } from '../tables/tables.js';
import { rowKeysOf } from './rows.js';

/**
 * What a write is about to commit, recorded (with its idempotency key) before the commit: after a crash between
 * the commit and the reply, a retry reads it to tell whether the write landed, and does not apply it again.
 * Keys are decimal strings (JSON has no 64-bit integers).
 */
export type WriteIntent =
  | { kind: 'append'; tableId: string; firstKey: string; count: number }
  | { kind: 'replace'; tableId: string; keys: string[] }
  | { kind: 'delete'; tableId: string; keys: string[] };

/**
 * Told a write's intent before it commits. What it records in the control store the write makes durable, with its
 * own row keys, before it commits (`CatalogStore.durable`). A write whose intent cannot be recorded does not commit.
 */
export type BeforeCommit = (intent: WriteIntent) => Promise<void>;

/** What a caller is told on the way through a write, and may stop it at by throwing. */
export interface WriteHooks {
  /**
   * The body is read and checked, and nothing is written yet: the write goes to the table with this id, with
   * these rows (none for a delete).
   */
  beforeWrite(tableId: string, rows?: readonly RecordBatch[]): Promise<void>;
  beforeCommit: BeforeCommit;
}

const keyList = (keys: readonly bigint[]) => keys.map(String).join(', ');
const compareKeys = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);

/** The rows of `keys` now, in key order, without their keys. */
async function rowsAt(table: TableHandle, keys: readonly bigint[], columns: readonly string[]): Promise<string> {
  if (keys.length === 0) return '';
  const found = await readAll(
    table.lance
      .query()
      .where(`${ROW_KEY} IN (${keyList(keys)})`)
      .select([ROW_KEY, ...columns])
      .limit(keys.length),
  );
  const foundKeys = rowKeysOf(found);
  const order = Array.from(foundKeys.keys()).sort((a, b) =>
    compareKeys(foundKeys[a] as bigint, foundKeys[b] as bigint),
  );
  return JSON.stringify(order.map((i) => columns.map((c) => String(found.getChild(c)?.get(i)))));
}

/**
 * Whether a write with this intent is in the table: all the rows of an append (appends are atomic, so some means
 * all), none of a delete's rows, or a replace's rows exactly as its body says (re-applying a replace that
 * already landed would change nothing but the version).
 */
export async function landed(table: TableHandle, intent: WriteIntent, rows: readonly RecordBatch[]): Promise<boolean> {
  if (intent.kind === 'append') {
    const first = BigInt(intent.firstKey);
    const found = await table.lance.countRows(
      `${ROW_KEY} >= ${first} AND ${ROW_KEY} < ${first + BigInt(intent.count)}`,
    );
    return found > 0;
  }
  const keys = intent.keys.map(BigInt);
  if (intent.kind === 'delete') {
    return keys.length === 0 || (await table.lance.countRows(`${ROW_KEY} IN (${keyList(keys)})`)) === 0;
  }
  const columns = table.schema.fields.map((f) => f.name);
  const sent = new arrow.Table(rows as RecordBatch[]);
  const wanted = JSON.stringify(
    Array.from({ length: sent.numRows }, (_, i) => columns.map((c) => String(sent.getChild(c)?.get(i)))),
  );
  return (await rowsAt(table, [...keys].sort(compareKeys), columns)) === wanted;
}
