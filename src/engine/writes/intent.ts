import type { RecordBatch } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { Unprocessable } from '../../errors.js';
import type { History, RowReads, VersionInfo } from '../rows/source.js';
import { ROW_KEY, withinRowKeys } from '../tables/schema.js';
import type { TableHandle } from '../tables/tables.js';
import { rowKeysOf } from './rows.js';

/**
 * What a write is about to commit, recorded (with its idempotency key) before the commit: after a crash between
 * the commit and the reply, a retry reads it to tell whether the write committed, and does not apply it again.
 * Keys are decimal strings (JSON has no 64-bit integers). `fromVersion` is the table's version read before the
 * write read anything: its commit, if any, is a later version. Intents recorded before it existed lack it.
 */
export type WriteIntent =
  | { kind: 'append'; tableId: string; firstKey: string; count: number; fromVersion?: number }
  | { kind: 'update'; tableId: string; keys: string[]; fromVersion?: number }
  /** `keys`: every row's row key in body order; `firstKey`: the first of the `inserted` new ones, when any. */
  | { kind: 'upsert'; tableId: string; keys: string[]; firstKey?: string; inserted: number; fromVersion?: number }
  | { kind: 'delete'; tableId: string; keys: string[]; predicate?: string; fromVersion?: number };

/**
 * Told a write's intent before it commits. What it records in the control store the write makes durable, with its
 * own row keys, before it commits (`CatalogStore.durable`). A write whose intent cannot be recorded does not commit.
 */
export type BeforeCommit = (intent: WriteIntent) => Promise<void>;

/**
 * An intent as the control store keeps it (JSON), read back. Builds before the write command had one name per
 * operation recorded an update's intent as `replace`: a key they left unresolved is still found.
 */
export function intentFromJson(text: string): WriteIntent {
  const intent = JSON.parse(text) as WriteIntent | { kind: 'replace'; tableId: string; keys: string[] };
  return intent.kind === 'replace' ? { ...intent, kind: 'update' } : intent;
}

/** A write found in the table's history: the version it is placed at, and (update, delete) its counts. */
export interface Found {
  version: number;
  counts?: { matched: number; n_tombstoned: number; n_not_found: number };
  upserted?: { inserted: number; updated: number };
}

/** A read-only view of the table, moved from version to version; closed by whoever opened it. */
export type VersionReader = History;

/**
 * One cell as text that tells every value apart: `String()` would make all structs "[object Object]" and a null
 * "null" like the string. Arrow's vectors and struct rows turn into arrays and objects through their `toJSON`.
 */
function cellText(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) => {
    if (typeof v === 'bigint') return `${v}n`;
    if (typeof v === 'number' && !Number.isFinite(v)) return `${v}`;
    if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      return Array.from(v as unknown as ArrayLike<number | bigint>, (x) => (typeof x === 'bigint' ? `${x}n` : x));
    }
    return v;
  });
}

/** The user's columns of each row, as text, by row key. */
function rowsByKey(rows: InstanceType<typeof arrow.Table>, keys: BigInt64Array, columns: readonly string[]) {
  const byKey = new Map<bigint, string>();
  for (let i = 0; i < rows.numRows; i++) {
    byKey.set(keys[i] as bigint, columns.map((c) => cellText(rows.getChild(c)?.get(i))).join('\u0000'));
  }
  return byKey;
}

/**
 * The test a version passes when the write is in it, or when applying it there would change nothing (so the
 * write can be placed right after that version: the retry's answer stays true of the table's history).
 *
 * - append: its first row key is there. Keys are never reused, so only this write's commit ever holds it.
 * - upsert: the first of its new row keys is there, as for an append; one that only replaced rows is tested as an
 *   update whose rows must all be there.
 * - update (a merge on row keys, which keeps them): every row of its keys still there equals the body's row
 *   paired with that key. Its own commit passes; so does a version where the rows already held those values,
 *   where merging them again would change nothing.
 * - delete: none of its keys' rows still matches its predicate. Its own commit passes (a row it left was no
 *   longer matched, or a concurrent rewrite would have failed it as a conflict); so does a version where another
 *   write removed them, where deleting them again would change nothing.
 *
 * Each answers the number of its keys' rows the write affects at that version, or undefined when it fails.
 */
function testOf(
  handle: TableHandle,
  intent: WriteIntent,
  rows: readonly RecordBatch[],
): (table: RowReads) => Promise<number | undefined> {
  if (intent.kind === 'append' || (intent.kind === 'upsert' && intent.firstKey !== undefined)) {
    const probe = `${ROW_KEY} = ${BigInt(intent.firstKey as string)}`;
    const affected = intent.kind === 'append' ? intent.count : intent.keys.length;
    return async (table) => ((await table.count(probe)) > 0 ? affected : undefined);
  }
  const keys = intent.keys.map(BigInt);
  if (intent.kind === 'delete') {
    const probe = withinRowKeys(keys, intent.predicate);
    return async (table) => ((await table.count(probe)) === 0 ? 0 : undefined);
  }
  const columns = handle.schema.fields.map((f) => f.name);
  const sent = new arrow.Table(rows as RecordBatch[]);
  // The body's rows were paired with the matched keys in order (writes.ts `replace`, `upsert`).
  const wanted = rowsByKey(sent, BigInt64Array.from(keys), columns);
  return async (table) => {
    const found = await table.rowsWhere(withinRowKeys(keys), [ROW_KEY, ...columns], { limit: keys.length });
    const now = rowsByKey(found, rowKeysOf(found), columns);
    for (const [key, row] of now) if (wanted.get(key) !== row) return undefined;
    // An upsert leaves every one of its keys' rows there (no delete runs between its lookup and commit): a version
    // missing one is not its commit, nor one where applying it would change nothing.
    if (intent.kind === 'upsert' && now.size < keys.length) return undefined;
    return now.size;
  };
}

/** Where an append or upsert is found: its version, and an upsert's counts as it meant them. */
function placed(intent: Extract<WriteIntent, { kind: 'append' | 'upsert' }>, version: number): Found {
  if (intent.kind === 'append') return { version };
  return { version, upserted: { inserted: intent.inserted, updated: intent.keys.length - intent.inserted } };
}

/** How many of a delete's rows matched its predicate at a version: what it tombstoned if it committed next. */
async function stillMatched(
  table: RowReads | undefined,
  version: number,
  intent: Extract<WriteIntent, { kind: 'delete' }>,
): Promise<number> {
  if (table === undefined) throw new Error(`version ${version} of the table was pruned while it was read`);
  return table.count(withinRowKeys(intent.keys.map(BigInt), intent.predicate));
}

/**
 * How many rows each version only appended (0: it did something else), from its summary beside the one before
 * (the row source lists the row counts each version left). An append's commit is such a version: it adds
 * fragments and changes no other row, so the rows stored and the rows live grow alike and no deletion is
 * recorded. A version whose summary, or whose predecessor's, is missing is left out: it is always read.
 */
function appendedRows(listing: readonly VersionInfo[]): Map<number, number> {
  const summaries = new Map(
    listing.map((v) => [v.version, { rows: v.rows, stored: v.storedRows, deleted: v.deletedRows }]),
  );
  const whole = (n: number) => Number.isSafeInteger(n) && n >= 0;
  const appended = new Map<number, number>();
  for (const [version, now] of summaries) {
    const before = summaries.get(version - 1);
    if (before === undefined || ![now, before].every((s) => whole(s.rows) && whole(s.stored) && whole(s.deleted))) {
      continue;
    }
    const grown = now.rows - before.rows;
    const onlyAppended = grown > 0 && now.stored - before.stored === grown && now.deleted === before.deleted;
    appended.set(version, onlyAppended ? grown : 0);
  }
  return appended;
}

/**
 * Whether a write with this intent committed, decided from the table's history rather than its rows now (another
 * client may have changed those since): the versions after `fromVersion` are read one by one, oldest first, and
 * the first that passes the write's test (`testOf`) is where the write is placed. When none does and every one of
 * those versions is still kept, the write never committed: undefined, and the caller applies it. When upkeep
 * pruned some of them (`STRATA_VERSION_RETENTION_MS`), its fate cannot be known: 422 rather than a guess.
 *
 * A write that committed is usually found at once (its commit is among the first versions after `fromVersion`);
 * one that did not reads every version since, less those its summary rules out (`appendedRows`). Measured at
 * 100k rows, the versions being one-row appends by others with a compaction every 10: 130 versions took 96 ms
 * for an append that never committed, 66 for an update and 43 for a delete (117, 240 and 187 reading every one);
 * 650 versions 447, 295 and 208 ms. Without compaction 500 versions of ever more fragments took 5.0 s for the
 * append (each read 10 ms) and 0.3 s for the others (36 and 28 s reading every one).
 */
export async function findCommit(
  handle: TableHandle,
  intent: WriteIntent,
  rows: readonly RecordBatch[],
  reader: VersionReader,
): Promise<Found | undefined> {
  const test = testOf(handle, intent, rows);
  const listing = await handle.rows.versions();
  const kept = listing.map((v) => v.version);
  const appended = appendedRows(listing);
  const latest = kept.at(-1) ?? 0;
  const from = intent.fromVersion;
  const adds = intent.kind === 'append' || (intent.kind === 'upsert' && intent.firstKey !== undefined);
  // An append that is there now committed, whatever its history: one read, and no history needed.
  if (adds && (await test(handle.rows)) !== undefined) return placed(intent, latest);
  const after = kept.filter((v) => from === undefined || v > from);
  let pruned = false;
  // The last version read that failed the test: a pure append after it leaves the rows at the write's keys as they
  // were (its rows have new keys), so it fails the test too, unread.
  let failed: number | undefined;
  for (const version of after) {
    const rowsAppended = appended.get(version);
    // An append's own commit appended exactly its rows.
    if (intent.kind === 'append' && rowsAppended !== undefined && rowsAppended !== intent.count) continue;
    if (!adds && rowsAppended !== undefined && rowsAppended > 0 && failed === version - 1) {
      failed = version;
      continue;
    }
    // Upkeep may prune a version between the listing and its reading: it then tells nothing, like one pruned before.
    const table = await reader.at(version);
    if (table === undefined) {
      pruned = true;
      continue;
    }
    const affected = await test(table);
    if (affected === undefined) {
      failed = version;
      continue;
    }
    if (intent.kind === 'append' || intent.kind === 'upsert') return placed(intent, version);
    const matched = intent.keys.length;
    let tombstoned = affected;
    if (intent.kind === 'delete') {
      // Taken as this write's own commit: it tombstoned what still matched just before. (Another client's
      // delete of exactly these rows in the same window looks the same; the rows end the same either way.)
      tombstoned = kept.includes(version - 1)
        ? await stillMatched(await reader.at(version - 1), version - 1, intent)
        : matched;
    }
    return { version, counts: { matched, n_tombstoned: tombstoned, n_not_found: matched - tombstoned } };
  }
  // Pruning keeps a run of the newest versions: all of them since `from` are kept when they number that many.
  if (!pruned && from !== undefined && after.length === latest - from) return undefined;
  throw new Unprocessable(
    `whether the write first sent with this Idempotency-Key committed can no longer be told: the table's versions ` +
      `since it started were pruned (STRATA_VERSION_RETENTION_MS); nothing was written. Check the table's rows, ` +
      `then send the write again with a new key if it is missing`,
    { code: 'idempotency_unresolvable' },
  );
}
