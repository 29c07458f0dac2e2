import type { DuckDBConnection, DuckDBInstance, DuckDBResult, DuckDBType } from '@duckdb/node-api';
import type { Field, RecordBatch, Schema } from 'apache-arrow';
import { arrow } from '../arrow/arrow.js';
import { BadRequest, RequestTimeout, ResultTooLarge, Unavailable } from '../errors.js';
import { columnsRead } from './columns-read.js';
import { ROW_GROUP_ROWS, RowGroupFeed } from './feed.js';
import { checkKeyword, checkStatement, type InstanceOptions, openLockedInstance, sqlCall } from './lockdown.js';
import { chunkToBatch, narrowHugeints } from './results.js';
import { arrowType, duckdbType, quoteIdent } from './types.js';

const { Type } = arrow;

/** A table of the database as SQL sees it: its name and the user's columns. */
export interface SqlTable {
  id: string;
  name: string;
  schema: Schema;
}

/** How the rows of a table changed between two versions (see engine/changes.ts). */
export type SqlDifference = 'none' | 'append' | 'rewrite';

/** Rows read from a table, without the service's row key, and the largest key among them. */
export interface KeyedBatch {
  batch: RecordBatch;
  maxKey: bigint;
}

/** What SQL needs of the tables' engine: versions, what changed between them, and the rows. */
export interface SqlSource {
  /** The database's finished tables now. */
  tables(): Promise<SqlTable[]>;
  version(table: SqlTable): Promise<number>;
  changed(table: SqlTable, from: number, to: number): Promise<SqlDifference>;
  /** The `columns` of exactly that version of the table (only rows with a row key above `afterKey`). */
  scan(
    table: SqlTable,
    version: number,
    afterKey: bigint | undefined,
    columns: readonly string[],
  ): AsyncIterable<KeyedBatch>;
  /** Lets go of what the source holds open for loading. */
  close(): void;
}

export interface SqlLimits {
  timeoutMs: number;
  maxRows: number;
  /** Bytes the result may hold as Arrow; refused as it passes them, before the rest is read. */
  maxBytes: number;
}

export interface SqlResult {
  schema: Schema;
  rows: RecordBatch[];
}

/** What the DuckDB copy of one table holds. */
interface Loaded {
  table: SqlTable;
  /** The Lance version the copy holds; -1 while it is an empty placeholder. */
  version: number;
  maxKey: bigint | undefined;
  /** Whether the copy holds the table's deferred columns too; once it does, it always will. */
  whole: boolean;
}

/** Table functions that take a table's name as a string, where the name may not appear as a word. */
const INDIRECT = /\bquery(?:_table)?\s*\(/i;

/** Statements that may show tables' columns without reading them, which a copy without some would misstate. */
const INTROSPECTION = /information_schema|pg_catalog|duckdb_|pragma|sqlite_|\b(?:show|describe|summarize)\b/i;
/** The one statement above that shows only tables' names. */
const SHOW_TABLES = /^\s*show\s+tables\s*;?\s*$/i;

/**
 * Columns loaded only for a statement that reads them: vectors and lists. They are nearly all of a table's
 * bytes (a 384-d vector is 1.5 KB a row) and most of a load's time (DuckDB's statistics of their floats alone
 * took ~29% of it), while aggregates and joins rarely read them.
 */
const deferred = (field: Field) => field.type.typeId === Type.FixedSizeList || field.type.typeId === Type.List;

/** The columns a copy holds: all of them when whole, else all but the deferred ones. */
const copiedFields = (table: SqlTable, whole: boolean): Field[] =>
  (table.schema.fields as Field[]).filter((f) => whole || !deferred(f));

/**
 * The SQL engine of one database: a locked-down DuckDB holding a copy of each table under its own name
 * (every table exists from the start, empty until a query first names it, so SHOW TABLES and DESCRIBE see
 * them all). Before a statement runs, the tables it names are brought to their latest Lance version: an
 * append loads only the new rows, anything else reloads the table into a fresh copy swapped in with one
 * transaction, so queries already running keep the snapshot they started with.
 */
export class SqlDatabase {
  private readonly loaded = new Map<string, Loaded>();
  /** Catalog sync and loads, one at a time; queries run beside them and each other. */
  private loading: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** Queries in flight, by connection, so closing can interrupt and await them. */
  private readonly running = new Map<DuckDBConnection, Promise<SqlResult>>();

  private readonly feed: RowGroupFeed;
  /** Rows read from Lance per insert: whole row groups for every DuckDB thread. */
  private readonly segmentRows: number;

  private constructor(
    private readonly instance: DuckDBInstance,
    private readonly loader: DuckDBConnection,
    private readonly source: SqlSource,
    threads: number,
  ) {
    this.feed = RowGroupFeed.register(loader, threads);
    this.segmentRows = threads * ROW_GROUP_ROWS;
  }

  static async open(source: SqlSource, options: InstanceOptions): Promise<SqlDatabase> {
    const { instance, loader } = await openLockedInstance(options);
    return new SqlDatabase(instance, loader, source, options.threads);
  }

  async query(sql: string, limits: SqlLimits): Promise<SqlResult> {
    if (this.closed)
      throw new Unavailable('the SQL engine of this database is closing; retry', 1, 'sql_engine_closing');
    // Most refusals come before any table is loaded for them; the rest after, in `checkStatement`.
    checkKeyword(sql);
    const connection = await this.instance.connect();
    const running = this.run(connection, sql, limits);
    this.running.set(connection, running);
    try {
      return await running;
    } finally {
      this.running.delete(connection);
      connection.closeSync();
    }
  }

  private async run(connection: DuckDBConnection, sql: string, limits: SqlLimits): Promise<SqlResult> {
    const overTime = new RequestTimeout(
      `query ran over the SQL time limit of ${limits.timeoutMs} ms (STRATA_SQL_TIMEOUT_MS)`,
      'sql_timeout',
    );
    let timedOut = false;
    let expire: (err: Error) => void = () => undefined;
    const deadline = new Promise<never>((_, reject) => {
      expire = reject;
    });
    deadline.catch(() => undefined);
    const timer = setTimeout(() => {
      timedOut = true;
      connection.interrupt();
      expire(overTime);
    }, limits.timeoutMs);
    try {
      const tables = await Promise.race([this.exclusively(() => this.syncCatalog()), deadline]);
      const { targets, whole } = await this.plan(connection, sql, tables);
      // A load that outlives the deadline still finishes (the next query gains from it).
      const load = this.exclusively(() => this.refresh(targets, whole));
      load.catch(() => undefined);
      await Promise.race([load, deadline]);
      // Bind and run in one read-only transaction: a plan bound before a concurrent load appended rows
      // would run with statistics that no longer cover the data (measured: wrong BIGINTs from ORDER BY).
      await connection.run('BEGIN TRANSACTION READ ONLY');
      const prepared = await checkStatement(connection, sql);
      try {
        return await this.collect(await sqlCall(() => prepared.stream()), limits);
      } finally {
        prepared.destroySync();
        await connection.run('ROLLBACK').catch(() => undefined);
      }
    } catch (err) {
      if (timedOut) throw overTime;
      if (this.closed)
        throw new Unavailable(
          'the SQL engine of this database closed during the query; retry',
          1,
          'sql_engine_closing',
        );
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Interrupts running queries, lets the current load finish, and frees the instance. */
  async close(): Promise<void> {
    this.closed = true;
    for (const connection of this.running.keys()) connection.interrupt();
    await Promise.allSettled([...this.running.values()]);
    await this.loading.catch(() => undefined);
    this.loader.closeSync();
    this.instance.closeSync();
    this.source.close();
  }

  private exclusively<T>(work: () => Promise<T>): Promise<T> {
    const run = this.loading.then(work, work);
    this.loading = run.catch(() => undefined);
    return run;
  }

  /**
   * The tables to bring up for a statement (those it names; with every copy lacking columns when it may show
   * columns it does not read), and which of them must hold their deferred columns: those whose deferred
   * columns it reads, or may read without naming them (`columnsRead`).
   */
  private async plan(
    connection: DuckDBConnection,
    sql: string,
    tables: readonly SqlTable[],
  ): Promise<{ targets: SqlTable[]; whole: Set<string> }> {
    const named = this.named(sql, tables);
    // String literals cannot name the catalog (a filter on the category 'show' is no SHOW).
    const code = sql.replace(/'(?:[^']|'')*'/g, "''");
    if (INTROSPECTION.test(code) && !SHOW_TABLES.test(code)) {
      const partial = tables.filter((t) => this.loaded.get(t.id)?.whole === false && !named.includes(t));
      const targets = [...named, ...partial];
      return { targets, whole: new Set(targets.map((t) => t.id)) };
    }
    const withDeferred = named.filter((t) => this.loaded.get(t.id)?.whole !== true && t.schema.fields.some(deferred));
    if (withDeferred.length === 0) return { targets: named, whole: new Set() };
    const columns = new Set(tables.flatMap((t) => t.schema.fields.map((f) => f.name.toLowerCase())));
    const read = await columnsRead(connection, sql, columns);
    const reads = (t: SqlTable) =>
      read === 'all' || t.schema.fields.some((f) => deferred(f) && read.has(f.name.toLowerCase()));
    return { targets: named, whole: new Set(withDeferred.filter(reads).map((t) => t.id)) };
  }

  /** The tables a statement names: any table whose name appears as a word, or all when it names them indirectly. */
  private named(sql: string, tables: readonly SqlTable[]): SqlTable[] {
    if (INDIRECT.test(sql)) return [...tables];
    const words = new Set(sql.toLowerCase().match(/[a-z0-9_]+/g) ?? []);
    return tables.filter((t) => words.has(t.name.toLowerCase()));
  }

  /** Makes DuckDB's tables those of the catalog: dropped tables go, new ones appear empty. */
  private async syncCatalog(): Promise<SqlTable[]> {
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
  private async refresh(tables: readonly SqlTable[], whole: ReadonlySet<string>): Promise<void> {
    for (const table of tables) {
      try {
        await this.bringUp(table, whole.has(table.id));
      } catch (err) {
        // Dropped while it loaded: it goes from DuckDB too, and the statement fails as after the drop (400).
        const now = await this.syncCatalog();
        if (now.some((t) => t.id === table.id)) throw err;
      }
    }
  }

  /**
   * Brings one table's copy to the table's latest version, loading only what changed; with its deferred
   * columns when `needWhole` (a copy without them is then loaded again whole).
   */
  private async bringUp(table: SqlTable, needWhole: boolean): Promise<void> {
    const entry = this.loaded.get(table.id);
    if (entry === undefined || this.closed) return;
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
   * when each page a process touches for the first time costs 3–4× (README, Benchmarks).
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
        next = segments.next();
        // Settled by the next turn of the loop, or dropped if this insert fails.
        next.catch(() => undefined);
        await this.feed.insert(into, segment.value);
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

  /** Reads a result into Arrow batches, refusing it once it passes the row or byte cap. */
  private async collect(result: DuckDBResult, { maxRows, maxBytes }: SqlLimits): Promise<SqlResult> {
    const types: DuckDBType[] = result.columnTypes();
    const names = result.deduplicatedColumnNames();
    const schema = new arrow.Schema(
      names.map((name, c) => new arrow.Field(name, arrowType(types[c] as DuckDBType), true)),
    );
    const rows: RecordBatch[] = [];
    let count = 0;
    let bytes = 0;
    for (;;) {
      const chunk = await sqlCall(() => result.fetchChunk());
      if (chunk === null || chunk.rowCount === 0) break;
      count += chunk.rowCount;
      if (count > maxRows) {
        throw new BadRequest(`query returns more than ${maxRows} rows (STRATA_SQL_MAX_ROWS); add a LIMIT or aggregate`);
      }
      const batch = chunkToBatch(chunk, types, schema);
      bytes += batch.data.byteLength;
      if (bytes > maxBytes) throw new ResultTooLarge(maxBytes, 'the query result');
      rows.push(batch);
    }
    return narrowHugeints(schema, types, rows);
  }
}

function columnsDdl(fields: readonly Field[]): string {
  return fields.map((f) => `${quoteIdent(f.name)} ${duckdbType(f.type)}${f.nullable ? '' : ' NOT NULL'}`).join(', ');
}
