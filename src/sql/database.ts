import type { DuckDBConnection, DuckDBInstance, DuckDBResult, DuckDBType } from '@duckdb/node-api';
import type { RecordBatch, Schema } from 'apache-arrow';
import { arrow } from '../arrow/arrow.js';
import { BadRequest, RequestTimeout, ResultTooLarge, Unavailable } from '../errors.js';
import { TableCopies } from './copies.js';
import { checkKeyword, checkStatement, type InstanceOptions, openLockedInstance, sqlCall } from './lockdown.js';
import type { BudgetAccount } from './memory-budget.js';
import { chunkToBatch, narrowHugeints } from './results.js';
import type { SqlSource } from './source.js';
import { statementTables } from './statement-tables.js';
import { arrowType } from './types.js';

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

/**
 * The SQL engine of one database: a locked-down DuckDB holding a copy of each table under its own name
 * (`TableCopies`). A statement is checked, the tables it reads are brought up to date, and it runs in a
 * read-only transaction under the time, row and byte limits. Its copies count in the node's budget for SQL
 * memory, which may let them go while the database is idle.
 */
export class SqlDatabase {
  /** Catalog sync, loads and letting go of copies, one at a time; queries run beside them and each other. */
  private loading: Promise<unknown> = Promise.resolve();
  /** Work queued or running in `loading`. */
  private exclusiveWork = 0;
  private closed = false;
  /** Queries in flight, by connection, so closing can interrupt and await them. */
  private readonly running = new Map<DuckDBConnection, Promise<SqlResult>>();
  private readonly account: BudgetAccount;
  private readonly copies: TableCopies;

  private constructor(
    private readonly instance: DuckDBInstance,
    loader: DuckDBConnection,
    source: SqlSource,
    options: InstanceOptions,
  ) {
    this.account = options.budget.open(
      { idle: () => this.running.size === 0 && this.exclusiveWork === 0, letGo: () => this.letGo() },
      options.memoryMb,
    );
    this.copies = new TableCopies(loader, source, options.threads, this.account);
  }

  static async open(source: SqlSource, options: InstanceOptions): Promise<SqlDatabase> {
    const { instance, loader } = await openLockedInstance(options);
    return new SqlDatabase(instance, loader, source, options);
  }

  async query(sql: string, limits: SqlLimits): Promise<SqlResult> {
    if (this.closed)
      throw new Unavailable('the SQL engine of this database is closing; retry', {
        retryAfterS: 1,
        code: 'sql_engine_closing',
      });
    // Most refusals come before any table is loaded for them; the rest after, in `checkStatement`.
    checkKeyword(sql);
    const connection = await this.instance.connect();
    const running = this.run(connection, sql, limits);
    this.running.set(connection, running);
    this.account.touch();
    try {
      return await running;
    } finally {
      this.running.delete(connection);
      this.account.touch();
      connection.closeSync();
      if (this.running.size === 0 && this.copies.replacedSinceMeasure && !this.closed)
        this.exclusively(() => this.copies.remeasure()).catch(() => undefined);
    }
  }

  private async run(connection: DuckDBConnection, sql: string, limits: SqlLimits): Promise<SqlResult> {
    const overTime = new RequestTimeout(
      `query ran over the SQL time limit of ${limits.timeoutMs} ms (STRATA_SQL_TIMEOUT_MS)`,
      { code: 'sql_timeout' },
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
      const tables = await Promise.race([this.exclusively(() => this.copies.syncCatalog()), deadline]);
      const { targets, whole } = await statementTables(connection, sql, tables, (id) => this.copies.holdsWhole(id));
      // A load that outlives the deadline still finishes (the next query gains from it).
      const load = this.exclusively(() => this.copies.refresh(targets, whole));
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
        throw new Unavailable('the SQL engine of this database closed during the query; retry', {
          retryAfterS: 1,
          code: 'sql_engine_closing',
        });
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Interrupts running queries, lets the current load finish, and frees the instance. */
  async close(): Promise<void> {
    this.closed = true;
    this.copies.stop();
    for (const connection of this.running.keys()) connection.interrupt();
    await Promise.allSettled([...this.running.values()]);
    await this.loading.catch(() => undefined);
    this.copies.close();
    this.instance.closeSync();
    this.account.close();
  }

  /** Drops the copies for the budget; answers what DuckDB holds for copies afterwards. */
  private letGo(): Promise<number> {
    return this.exclusively(() => this.copies.letGo());
  }

  private exclusively<T>(work: () => Promise<T>): Promise<T> {
    this.exclusiveWork++;
    const run = this.loading.then(work, work).finally(() => this.exclusiveWork--);
    this.loading = run.catch(() => undefined);
    return run;
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
