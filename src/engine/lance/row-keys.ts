import type { Table } from 'apache-arrow';
import { ROW_KEY } from '../tables/schema.js';
import { rowKeysOf } from '../writes/rows.js';
import { type LanceTable, readAll } from './lance.js';

/** Row ids share their upper 32 bits per fragment (Lance's row addresses); a bucket is one such range. */
const BUCKET_BITS = 32n;
const OFFSET_MASK = (1n << BUCKET_BITS) - 1n;
const NO_ROW = -1n;
/** Slots a small table's cache may hold beyond twice its rows before `trim` looks at it. */
const TRIM_SLACK = 65_536;

/** The Lance row ids of a result read `withRowId()`, in result order. */
export function rowIdsOf(result: Table): bigint[] {
  const out: bigint[] = [];
  for (const chunk of result.getChild('_rowid')?.data ?? []) {
    const ids = chunk.values as BigUint64Array;
    for (let i = 0; i < chunk.length; i++) out.push(ids[i] as bigint);
  }
  return out;
}

/**
 * The rows of `keys` that exist, with `columns` (which must include the row key), in no particular order.
 * Keys with a row id a search saw are taken by id first: Lance reads those directly (10 rows at 1.2M: 1.4 ms,
 * against 1.85 ms through the key's index). An id names the same row or none: a deleted row is left out, and
 * one that compaction has moved since is then read by key, as are keys without an id.
 */
export async function readByKeys(
  lance: LanceTable,
  keys: readonly bigint[],
  columns: readonly string[],
  rowIds: ReadonlyMap<bigint, bigint> = new Map(),
): Promise<Table[]> {
  const out: Table[] = [];
  const byId = keys.flatMap((key) => rowIds.get(key) ?? []);
  if (byId.length > 0) out.push(await readAll(lance.takeRowIds(byId).select([...columns])));
  const taken = new Set(out.flatMap((t) => Array.from(rowKeysOf(t))));
  const rest = keys.filter((key) => !taken.has(key));
  if (rest.length > 0) {
    out.push(
      await readAll(
        lance
          .query()
          .where(`${ROW_KEY} IN (${rest.join(', ')})`)
          .select([...columns])
          .limit(rest.length),
      ),
    );
  }
  return out;
}

/**
 * The row key of each Lance row id, kept in memory per bucket of ids. A search leg that reads only row ids
 * and scores skips Lance's take of the key and projected columns for every candidate, which cost more than
 * the search itself (1.1M rows, 132 text candidates: 1.6 ms with row ids, 4.3 ms with key and one column);
 * the few winners' columns are then read by key. A row id always names the same row, so an entry never goes
 * stale: compaction gives moved rows new ids (their buckets load on first use), and `trim` lets go of
 * buckets no search has asked for since its last call (upkeep calls it after each compaction).
 */
export class RowKeys {
  private readonly buckets = new Map<bigint, BigInt64Array>();
  private used = new Set<bigint>();
  private readonly loading = new Map<bigint, Promise<void>>();

  constructor(private readonly lance: LanceTable) {}

  /**
   * The row key of each id, in order; undefined for a row deleted since the search that found it read the
   * table. Ids the map does not hold are read from Lance by id (233 ids: ~2.7 ms at 1.2M rows) while their
   * buckets load in the background for later searches: waiting for a bucket would hold a search up for a
   * whole fragment's keys (1M rows: 46–62 ms in process, more beside the index warm-up of a table just opened).
   */
  async of(rowIds: readonly bigint[]): Promise<(bigint | undefined)[]> {
    // Taken now: another call may let go of a bucket while this one waits for Lance.
    const known = rowIds.map((id) => this.lookup(id));
    const unknown = [...new Set(rowIds.filter((_, i) => known[i] === NO_ROW))];
    const lacking = new Map<bigint, BigInt64Array>();
    for (const id of unknown) {
      const slots = this.buckets.get(id >> BUCKET_BITS);
      if (slots !== undefined) lacking.set(id >> BUCKET_BITS, slots);
    }
    const direct = unknown.length === 0 ? new Map<bigint, bigint>() : await this.readIds(unknown);
    // A bucket held without a row Lance has: loaded before it grew (stable row ids), so it loads again. Only the
    // bucket this call found lacking: one another call loaded meanwhile is whole.
    for (const id of direct.keys()) {
      const bucket = id >> BUCKET_BITS;
      if (lacking.has(bucket) && this.buckets.get(bucket) === lacking.get(bucket)) this.buckets.delete(bucket);
    }
    const absent = new Set(unknown.map((id) => id >> BUCKET_BITS).filter((bucket) => !this.buckets.has(bucket)));
    if (absent.size > 0) this.load([...absent]);
    return rowIds.map((id, i) => {
      this.used.add(id >> BUCKET_BITS);
      const key = known[i] as bigint;
      return key === NO_ROW ? direct.get(id) : key;
    });
  }

  /** Settles once the buckets loading in the background have loaded (or failed). */
  async loaded(): Promise<void> {
    await Promise.all([...this.loading.values()]);
  }

  /**
   * Once the cache holds twice the table's rows (compaction moved rows to new ids; the old ids' buckets are
   * never asked for again), drops the buckets no search asked for since the previous trim.
   */
  trim(liveRows: number): void {
    let slots = 0;
    for (const bucket of this.buckets.values()) slots += bucket.length;
    if (slots > 2 * liveRows + TRIM_SLACK) {
      for (const bucket of this.buckets.keys()) if (!this.used.has(bucket)) this.buckets.delete(bucket);
    }
    this.used = new Set();
  }

  /**
   * Loads the buckets above every bucket held, in one read, when searches use the map: Lance numbers new
   * fragments (appended, or written by a compaction) above all others, so these are the ones the next search
   * would otherwise load on its way (upkeep calls this after each compaction).
   */
  async warm(): Promise<void> {
    if (this.buckets.size === 0) return;
    let top = 0n;
    for (const bucket of this.buckets.keys()) if (bucket > top) top = bucket;
    await this.fill(`_rowid >= ${(top + 1n) << BUCKET_BITS}`);
  }

  /** Buckets held (for tests). */
  get bucketCount(): number {
    return this.buckets.size;
  }

  private lookup(id: bigint): bigint {
    const bucket = this.buckets.get(id >> BUCKET_BITS);
    return bucket?.[Number(id & OFFSET_MASK)] ?? NO_ROW;
  }

  /**
   * Loads buckets in the background, each once at a time. A failed load is dropped: the next search that
   * misses the bucket reads its ids directly and loads it again.
   */
  private load(buckets: readonly bigint[]): void {
    const pending = buckets.filter((b) => !this.loading.has(b));
    if (pending.length === 0) return;
    const ranges = pending.map((b) => `(_rowid >= ${b << BUCKET_BITS} AND _rowid < ${(b + 1n) << BUCKET_BITS})`);
    const done = () => {
      for (const bucket of pending) this.loading.delete(bucket);
    };
    // Both ways: `finally` would hand on a failed read as a second, unhandled rejection.
    const read = this.fill(ranges.join(' OR ')).then(done, done);
    for (const bucket of pending) this.loading.set(bucket, read);
  }

  /**
   * The row key of each of these ids that Lance still has, taken by id as `readByKeys` takes rows (233 ids at
   * 1.2M rows: 2.6–2.8 ms, against 3.1–3.3 ms through a `_rowid IN` filter).
   */
  private async readIds(ids: readonly bigint[]): Promise<Map<bigint, bigint>> {
    const rows = await readAll(this.lance.takeRowIds(ids).select([ROW_KEY]).withRowId());
    const keys = rowKeysOf(rows);
    return new Map(rowIdsOf(rows).map((id, i) => [id, keys[i] as bigint]));
  }

  /**
   * Loads whole buckets: those of the rows `filter` (over `_rowid`) selects. Ids and keys are read as 32-bit halves
   * (a row id's high half is its fragment, its low half the row's place in it, little-endian), so a load makes no
   * value per row: a BigInt for each of a million rows took seconds of the event loop, most of it collecting them.
   */
  private async fill(filter: string): Promise<void> {
    const rows = await readAll(this.lance.query().select([ROW_KEY]).withRowId().where(filter));
    const ids = halvesOf(rows, '_rowid');
    const keys = halvesOf(rows, ROW_KEY);
    // Rows come fragment by fragment: the map is asked again only where the fragment changes.
    const sizes = new Map<number, number>();
    for (let i = 0; i < ids.length; ) {
      const bucket = ids[i + 1] as number;
      let size = sizes.get(bucket) ?? 0;
      for (; i < ids.length && ids[i + 1] === bucket; i += 2) size = Math.max(size, (ids[i] as number) + 1);
      sizes.set(bucket, size);
    }
    const filled = new Map([...sizes].map(([bucket, size]) => [bucket, new BigInt64Array(size).fill(NO_ROW)]));
    for (let i = 0; i < ids.length; ) {
      const bucket = ids[i + 1] as number;
      const slots = new Uint32Array((filled.get(bucket) as BigInt64Array).buffer);
      for (; i < ids.length && ids[i + 1] === bucket; i += 2) {
        const at = (ids[i] as number) * 2;
        slots[at] = keys[i] as number;
        slots[at + 1] = keys[i + 1] as number;
      }
    }
    for (const [bucket, slots] of filled) this.buckets.set(BigInt(bucket), slots);
  }
}

/** A 64-bit column of a read as 32-bit halves, two per row, low half first (the machine's order: little-endian). */
function halvesOf(result: Table, column: string): Uint32Array {
  const out = new Uint32Array(result.numRows * 2);
  let at = 0;
  for (const chunk of result.getChild(column)?.data ?? []) {
    const values = chunk.values as BigInt64Array | BigUint64Array;
    out.set(new Uint32Array(values.buffer, values.byteOffset, chunk.length * 2), at);
    at += chunk.length * 2;
  }
  return out;
}
