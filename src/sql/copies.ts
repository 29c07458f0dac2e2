import type { DuckDBConnection } from '@duckdb/node-api';
import type { DataType, Field, RecordBatch } from 'apache-arrow';
import { ROW_GROUP_ROWS, RowGroupFeed } from './feed.js';
import type { BudgetAccount } from './memory-budget.js';
import type { KeyedBatch, SqlSource, SqlTable } from './source.js';
import { deferred } from './statement-tables.js';
import { duckdbType, quoteIdent } from './types.js';

/** What the DuckDB copy of one table holds. */
interface Loaded {
  table: SqlTable;
  /** The Lance version the copy holds; -1 while it is an empty placeholder. */
  version: number;
  maxKey: bigint | undefined;
  /** Whether the copy holds the table's deferred columns too; once it does, it always will. */
  whole: boolean;
}

/** DuckDB's accounting of what its tables hold in memory: their columns, and strings longer than a column keeps inline. */
const COPY_MEMORY = `SELECT coalesce(sum(memory_usage_bytes), 0)::DOUBLE FROM duckdb_memory() WHERE tag IN ('IN_MEMORY_TABLE', 'OVERFLOW_STRINGS')`;

/** DuckDB's block: a column starts one per row group, however few rows it holds. */
const BLOCK_BYTES = 256 * 1024;

/** Columns DuckDB stores for a type: one for the values and one for their validity, for each nested child too. */
function storedColumns(type: DataType): number {
  // Arrow JS declares `children` on every type but sets it on nested ones only.
  const children: readonly Field[] | undefined = type.children;
  return 2 + (children ?? []).reduce((n, child) => n + storedColumns(child.type), 0);
}

/**
 * What inserting `batches` will add to DuckDB's memory, erring high; the budget then learns the real figure
 * from DuckDB. Measured here against Arrow's bytes: 1.04× for 384-d vectors, 1.05–1.44× for numbers and
 * strings at 300k rows, 2.5× for 20k rows of three narrow columns, where the blocks each column starts dominate.
 */
export function copyBytesEstimate(batches: readonly RecordBatch[]): number {
  let bytes = 0;
  let rows = 0;
  for (const batch of batches) {
    bytes += batch.data.byteLength;
    rows += batch.numRows;
  }
  const fields = (batches[0]?.schema.fields ?? []) as Field[];
  const columns = fields.reduce((n, field) => n + storedColumns(field.type), 0);
  return Math.ceil(1.5 * bytes) + Math.ceil(rows / ROW_GROUP_ROWS) * columns * BLOCK_BYTES;
}

/** The columns a copy holds: all of them when whole, else all but the deferred ones. */
const copiedFields = (table: SqlTable, whole: boolean): Field[] =>
  (table.schema.fields as Field[]).filter((f) => whole || !deferred(f));

/**
 * The DuckDB copies of one database's tables, kept by the loader connection: every table exists from the
 * start, empty until a statement first names it, so SHOW TABLES and DESCRIBE see them all. A table is brought
 * to its latest Lance version before a statement reads it: an append loads only the new rows, anything else
 * reloads the table into a fresh copy swapped in with one transaction, so queries already running keep the
 * snapshot they started with. Every insert is reserved in the node's budget first, and what DuckDB then holds
 * is measured after it (`BudgetAccount`). Callers run one method at a time.
 */
export class TableCopies {
  private readonly loaded = new Map<string, Loaded>();
  private readonly feed: RowGroupFeed;
  /** Rows read from Lance per insert: whole row groups for every DuckDB thread. */
  private readonly segmentRows: number;
  private stopped = false;
  /** A copy was replaced since the last `remeasure`: what the budget counts may include it still. */
  private replaced = false;

  constructor(
    private readonly loader: DuckDBConnection,
    private readonly source: SqlSource,
    threads: number,
    private readonly account: BudgetAccount,
  ) {
    this.feed = RowGroupFeed.register(loader, threads);
    this.segmentRows = threads * ROW_GROUP_ROWS;
  }

  /** Whether a table's copy holds its deferred columns; undefined when it has no copy. */
  holdsWhole(id: string): boolean | undefined {
    return this.loaded.get(id)?.whole;
  }

  /** Makes DuckDB's tables those of the catalog: dropped tables go, new ones appear empty. */
  async syncCatalog(): Promise<SqlTable[]> {
    const tables = await this.source.tables();
    const ids = new Set(tables.map((t) => t.id));
    for (const [id, entry] of this.loaded) {
      if (ids.has(id)) continue;
      await this.loader.run(`DROP TABLE IF EXISTS ${quoteIdent(entry.table.name)}`);
      this.loaded.delete(id);
    }
    for (const table of tables) {
      if (this.loaded.has(table.id)) continue;
      await this.loader.run(`CREATE TABLE ${quoteIdent(table.name)} (${columnsDdl(table.schema.fields)})`);
      this.loaded.set(table.id, { table, version: -1, maxKey: undefined, whole: false });
    }
    return tables;
  }

  /** Brings each table to its latest version, those in `whole` with their deferred columns. */
  async refresh(tables: readonly SqlTable[], whole: ReadonlySet<string>): Promise<void> {
    for (const table of tables) {
      try {
        await this.bringUp(table, whole.has(table.id));
      } catch (err) {
        // What a failed load had inserted went with its rollback; the budget counts what is left.
        this.account.settle(await this.measure().catch(() => this.account.held));
        // Dropped while it loaded: it goes from DuckDB too, and the statement fails as after the drop (400).
        const now = await this.syncCatalog();
        if (now.some((t) => t.id === table.id)) throw err;
      }
    }
  }

  /**
   * Drops every copy, leaving each table an empty placeholder loaded again by the next statement that reads it;
   * answers what DuckDB holds for copies afterwards.
   */
  async letGo(): Promise<number> {
    if (this.stopped) return 0;
    for (const entry of this.loaded.values()) {
      if (entry.version < 0) continue;
      await this.loader.run(
        `CREATE OR REPLACE TABLE ${quoteIdent(entry.table.name)} (${columnsDdl(entry.table.schema.fields)})`,
      );
      Object.assign(entry, { version: -1, maxKey: undefined, whole: false });
    }
    return this.measure();
  }

  /** Whether a copy was replaced while statements may have been reading it. */
  get replacedSinceMeasure(): boolean {
    return this.replaced;
  }

  /** Tells the budget what DuckDB holds now, once no statement reads a replaced copy any more. */
  async remeasure(): Promise<void> {
    this.replaced = false;
    if (!this.stopped) this.account.settle(await this.measure());
  }

  /** Bytes DuckDB holds for the copies now. */
  async measure(): Promise<number> {
    const reader = await this.loader.runAndReadAll(COPY_MEMORY);
    return Number(reader.getRows()[0]?.[0] ?? 0);
  }

  /** Starts no more loads; a load under way finishes. */
  stop(): void {
    this.stopped = true;
  }

  /** Lets go of the loader connection and of what the source holds open; after the last load finished. */
  close(): void {
    this.loader.closeSync();
    this.source.close();
  }

  /**
   * Brings one table's copy to the table's latest version, loading only what changed; with its deferred
   * columns when `needWhole` (a copy without them is then loaded again whole).
   */
  private async bringUp(table: SqlTable, needWhole: boolean): Promise<void> {
    const entry = this.loaded.get(table.id);
    if (entry === undefined || this.stopped) return;
    const whole = entry.whole || needWhole;
    // The copy is of exactly this version: appends between versions load by row key, the rest reload.
    const version = await this.source.version(table);
    if (version === entry.version && whole === entry.whole) return;
    const difference =
      entry.version < 0 || whole !== entry.whole ? 'rewrite' : await this.source.changed(table, entry.version, version);
    const fields = copiedFields(table, whole);
    if (difference === 'append') {
      await this.loader.run('BEGIN TRANSACTION');
      try {
        entry.maxKey = await this.copyRows(table, version, table.name, entry.maxKey, fields);
        await this.loader.run('COMMIT');
      } catch (err) {
        await this.loader.run('ROLLBACK').catch(() => undefined);
        throw err;
      }
    } else if (difference === 'rewrite') {
      entry.maxKey = await this.reload(table, version, fields);
      this.account.settle(await this.measure());
      // Measured: DuckDB frees the copy it replaced only when the last statement reading it ends.
      this.replaced = true;
    }
    entry.version = version;
    entry.whole = whole;
  }

  /** Loads `fields` of a table into a fresh copy and swaps it in under the table's name in one transaction. */
  private async reload(table: SqlTable, version: number, fields: readonly Field[]): Promise<bigint | undefined> {
    const stagingName = `__strata_loading_${table.id}`;
    const staging = quoteIdent(stagingName);
    await this.loader.run(`DROP TABLE IF EXISTS ${staging}`);
    await this.loader.run(`CREATE TABLE ${staging} (${columnsDdl(fields)})`);
    try {
      const maxKey = await this.copyRows(table, version, stagingName, undefined, fields);
      await this.loader.run('BEGIN TRANSACTION');
      await this.loader.run(`DROP TABLE ${quoteIdent(table.name)}`);
      await this.loader.run(`ALTER TABLE ${staging} RENAME TO ${quoteIdent(table.name)}`);
      await this.loader.run('COMMIT');
      return maxKey;
    } catch (err) {
      await this.loader.run('ROLLBACK').catch(() => undefined);
      await this.loader.run(`DROP TABLE IF EXISTS ${staging}`).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Appends the table's rows after `afterKey` to a DuckDB table; returns the largest key seen. Rows go in a
   * segment at a time, and the next segment is read from Lance while one is inserted: 160k rows/s against
   * 150k one after the other (1M rows × 384-d, four runs each). An earlier measurement that found reading
   * ahead slower was most likely taken while GBs of the benchmark's writes were still dirty in the page cache,
   * when each page a process touches for the first time costs 3–4× (docs/performance.md).
   */
  private async copyRows(
    table: SqlTable,
    version: number,
    into: string,
    afterKey: bigint | undefined,
    fields: readonly Field[],
  ): Promise<bigint | undefined> {
    let maxKey = afterKey;
    const columns = fields.map((f) => f.name);
    const segments = this.segments(this.source.scan(table, version, afterKey, columns), (key) => {
      if (maxKey === undefined || key > maxKey) maxKey = key;
    });
    let next = segments.next();
    try {
      for (;;) {
        const segment = await next;
        if (segment.done === true) return maxKey;
        // Reserved before the next segment is read: a load the budget refuses reads nothing more.
        await this.account.reserve(copyBytesEstimate(segment.value), `table "${table.name}"`);
        next = segments.next();
        // Settled by the next turn of the loop, or dropped if this insert fails.
        next.catch(() => undefined);
        await this.feed.insert(into, segment.value);
        this.account.settle(await this.measure());
      }
    } finally {
      await segments.return(undefined).catch(() => undefined);
    }
  }

  /** Batches regrouped into segments of whole row groups for every DuckDB thread (the last one shorter). */
  private async *segments(
    batches: AsyncIterable<KeyedBatch>,
    sawKey: (key: bigint) => void,
  ): AsyncGenerator<RecordBatch[]> {
    let segment: RecordBatch[] = [];
    let rows = 0;
    for await (const { batch, maxKey } of batches) {
      sawKey(maxKey);
      let rest = batch;
      while (rows + rest.numRows >= this.segmentRows) {
        const take = this.segmentRows - rows;
        segment.push(rest.slice(0, take));
        yield segment;
        rest = rest.slice(take);
        segment = [];
        rows = 0;
      }
      if (rest.numRows > 0) segment.push(rest);
      rows += rest.numRows;
    }
    if (segment.length > 0) yield segment;
  }
}

function columnsDdl(fields: readonly Field[]): string {
  return fields.map((f) => `${quoteIdent(f.name)} ${duckdbType(f.type)}${f.nullable ? '' : ' NOT NULL'}`).join(', ');
}
