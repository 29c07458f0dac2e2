import { mkdirSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { ControlEvent } from '../events.js';
import type { Db, RunResult, TransactionOptions, Tx } from './db.js';
import { render, type Sql } from './sql.js';

/** better-sqlite3 binds neither booleans nor undefined. */
const bindable = (value: unknown): unknown =>
  typeof value === 'boolean' ? (value ? 1 : 0) : value === undefined ? null : value;

/** Who holds a file's connections: settles when the transaction (or migration) holding them ends. */
interface Gate {
  held: Promise<void> | undefined;
  connections: number;
}

/**
 * A transaction holds the file's write lock across its awaits, and SQLite waits for a lock by blocking the thread:
 * a second connection to the file in this process (a test's second node) waiting for it would block the very event
 * loop that has to end the transaction. So every connection of the process to one file shares one gate.
 */
const gates = new Map<string, Gate>();

/**
 * One SQLite connection, shared by the store's views of it. better-sqlite3 is synchronous, but statements are
 * written once for both stores as async code: a transaction holds the connection across its awaits, and every
 * other statement waits for it to end rather than land inside it.
 */
export class SqliteConnection {
  readonly handle: Database.Database;
  /** Each statement is prepared once: preparing cost more than running the point lookups every request makes. */
  private readonly statements = new Map<string, Database.Statement>();
  private readonly file: string;
  private readonly gate: Gate;
  /** Why the connection cannot be used (its schema could not be brought up to date). */
  private failure: { error: unknown } | undefined;

  constructor(path: string) {
    mkdirSync(dirname(path), { recursive: true });
    this.handle = new Database(path);
    this.handle.pragma('journal_mode = WAL');
    this.handle.pragma('foreign_keys = ON');
    // The CLI may write while the server does; wait for the lock instead of failing at once. Another process
    // holds it only for a transaction's statements, which await nothing but each other.
    this.handle.pragma('busy_timeout = 5000');
    // SQLite's fsync at each commit, but for relaxed ones. Stated: a database already in WAL mode opens with
    // better-sqlite3's build default, which is without it.
    this.handle.pragma('synchronous = FULL');
    this.file = realpathSync(path);
    const gate = gates.get(this.file) ?? { held: undefined, connections: 0 };
    gate.connections++;
    gates.set(this.file, gate);
    this.gate = gate;
  }

  statement(text: string): Database.Statement {
    let prepared = this.statements.get(text);
    if (prepared === undefined) {
      prepared = this.handle.prepare(text);
      this.statements.set(text, prepared);
    }
    return prepared;
  }

  /** Runs `statement` once no transaction holds the connection, right after the last check (no await between). */
  async whenFree<T>(statement: () => T): Promise<T> {
    while (this.gate.held !== undefined) await this.gate.held;
    if (this.failure !== undefined) throw this.failure.error;
    return statement();
  }

  /** Runs `work` holding the connection: no statement of anyone else's runs until it ends. */
  async exclusive<T>(work: () => Promise<T>): Promise<T> {
    // Checked again after every wait: another waiter may have taken the connection first.
    while (this.gate.held !== undefined) await this.gate.held;
    if (this.failure !== undefined) throw this.failure.error;
    let release = () => {};
    this.gate.held = new Promise<void>((resolve) => {
      release = resolve;
    });
    try {
      return await work();
    } finally {
      this.gate.held = undefined;
      release();
    }
  }

  /** From now on every call fails with `error`. */
  fail(error: unknown): void {
    this.failure = { error };
  }

  close(): void {
    if (!this.handle.open) return;
    this.handle.close();
    if (--this.gate.connections === 0) gates.delete(this.file);
  }
}

/** Runs statements at once on the connection: only while holding it, or from `whenFree`. */
class Statements {
  constructor(protected readonly connection: SqliteConnection) {}

  protected runNow(query: Sql): RunResult {
    const { text, params } = render(query, 'sqlite');
    return { changes: this.connection.statement(text).run(...params.map(bindable)).changes };
  }

  protected allNow<Row>(query: Sql): Row[] {
    const { text, params } = render(query, 'sqlite');
    return this.connection.statement(text).all(...params.map(bindable)) as Row[];
  }

  protected getNow<Row>(query: Sql): Row | undefined {
    const { text, params } = render(query, 'sqlite');
    return this.connection.statement(text).get(...params.map(bindable)) as Row | undefined;
  }
}

class SqliteTx extends Statements implements Tx {
  readonly notices: ControlEvent[] = [];

  async run(query: Sql): Promise<RunResult> {
    return this.runNow(query);
  }

  async all<Row extends object>(query: Sql): Promise<Row[]> {
    return this.allNow<Row>(query);
  }

  async get<Row extends object>(query: Sql): Promise<Row | undefined> {
    return this.getNow<Row>(query);
  }

  async notify(event: ControlEvent): Promise<void> {
    this.notices.push(event);
  }

  async lock(): Promise<void> {}

  async exec(script: string): Promise<void> {
    this.connection.handle.exec(script);
  }
}

export interface SqliteDbOptions {
  /**
   * Commits without the fsync SQLite makes at each commit, which blocks the event loop while the disk works
   * (docs/operations.md, Durability). Such a commit lasts a process crash at once and a power cut once the WAL
   * is fsynced; `committedRelaxed` is told of each, for whoever schedules that fsync.
   */
  relaxed?: { committedRelaxed(): void };
  /** Hears what committed transactions announced (`Tx.notify`): the embedded store tells its own process. */
  publish(event: ControlEvent): void;
}

/** A view of the connection: the statements of either store, run on SQLite. */
export class SqliteDb extends Statements implements Db {
  readonly dialect = 'sqlite' as const;

  constructor(
    connection: SqliteConnection,
    private readonly options: SqliteDbOptions,
  ) {
    super(connection);
  }

  async run(query: Sql): Promise<RunResult> {
    return this.connection.whenFree(() => this.committing(() => this.runNow(query)));
  }

  async all<Row extends object>(query: Sql): Promise<Row[]> {
    return this.connection.whenFree(() => this.committing(() => this.allNow<Row>(query)));
  }

  async get<Row extends object>(query: Sql): Promise<Row | undefined> {
    return this.connection.whenFree(() => this.committing(() => this.getNow<Row>(query)));
  }

  transaction<T>(work: (tx: Tx) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    return this.connection.exclusive(async () => {
      const db = this.connection.handle;
      const tx = new SqliteTx(this.connection);
      const relaxed = this.options.relaxed;
      // Foreign keys can be switched off only outside a transaction; they are checked before the commit instead.
      if (options.schema) this.connection.statement('PRAGMA foreign_keys = OFF').run();
      // Set for the whole transaction: it holds the connection, so no one else's commit is made so meanwhile.
      if (relaxed !== undefined) this.relax(true);
      try {
        // Immediate: the write lock is taken at the start, so another process on the file (the CLI) waits for it,
        // and no check made inside can be invalidated before the commit.
        this.connection.statement('BEGIN IMMEDIATE').run();
        let result: T;
        try {
          result = await work(tx);
          if (options.schema && (db.pragma('foreign_key_check') as unknown[]).length > 0) {
            throw new Error('a migration left rows whose foreign keys point nowhere');
          }
          this.connection.statement('COMMIT').run();
        } catch (err) {
          if (db.inTransaction) this.connection.statement('ROLLBACK').run();
          throw err;
        }
        for (const event of tx.notices) this.options.publish(event);
        return result;
      } finally {
        if (relaxed !== undefined) {
          this.relax(false);
          relaxed.committedRelaxed();
        }
        if (options.schema) this.connection.statement('PRAGMA foreign_keys = ON').run();
      }
    });
  }

  /** Runs a statement's commit relaxed, when this view is; synchronous, so that no one else's statement runs so. */
  private committing<T>(commit: () => T): T {
    const relaxed = this.options.relaxed;
    if (relaxed === undefined) return commit();
    this.relax(true);
    try {
      return commit();
    } finally {
      this.relax(false);
      relaxed.committedRelaxed();
    }
  }

  private relax(on: boolean): void {
    this.connection.statement(on ? 'PRAGMA synchronous = NORMAL' : 'PRAGMA synchronous = FULL').run();
  }
}
