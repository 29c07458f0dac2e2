import { Unavailable } from '../../errors.js';
import type { ControlEvent } from '../events.js';
import type { Dialect, Sql } from './sql.js';

/** What running a statement that returns no rows tells. */
export interface RunResult {
  /** Rows the statement inserted, updated or deleted. */
  changes: number;
}

/** Runs statements; both transports answer alike (but PostgreSQL answers BIGINT and counts as strings). */
export interface Queryable {
  run(query: Sql): Promise<RunResult>;
  all<Row extends object>(query: Sql): Promise<Row[]>;
  get<Row extends object>(query: Sql): Promise<Row | undefined>;
}

/** A transaction under way. */
export interface Tx extends Queryable {
  /**
   * Tells every node `event` when (and only if) the transaction commits: PostgreSQL's NOTIFY, sent by the
   * transaction itself so that no commit goes unannounced; the embedded store's own listeners, after the commit.
   */
  notify(event: ControlEvent): Promise<void>;
  /**
   * Takes a lock named by `key` until the transaction ends, so that transactions taking it run one at a time on
   * every node (a PostgreSQL advisory lock). Nothing to do on SQLite: its transactions hold the file from the start.
   */
  lock(key: number): Promise<void>;
  /** Runs a script of statements without parameters (a migration). */
  exec(script: string): Promise<void>;
}

export interface TransactionOptions {
  /**
   * A transaction that changes the schema: SQLite checks foreign keys at its end rather than at each statement, so
   * that a table can be rebuilt under the references to it (SQLite cannot alter a column in place).
   */
  schema?: boolean;
}

/** One control store's database, over a thin transport (better-sqlite3 or `pg`). */
export interface Db extends Queryable {
  readonly dialect: Dialect;
  transaction<T>(work: (tx: Tx) => Promise<T>, options?: TransactionOptions): Promise<T>;
}

/** Whether an error is a primary key or unique constraint refusing a row, in either dialect. */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/** What a call gets when the store cannot answer it now. */
export const unavailable = (): Unavailable =>
  new Unavailable('the control store is not answering; retry', { retryAfterS: 1, code: 'control_store_unavailable' });
