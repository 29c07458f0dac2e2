import { realpathSync } from 'node:fs';
import { SqliteConnection, SqliteDb } from './dialect/sqlite.js';
import { ControlEvents } from './events.js';
import { migrate } from './migrations.js';
import { RelaxedCommits } from './relaxed-commits.js';
import { SqlControlStore } from './sql-store.js';

/**
 * The embedded control store: one SQLite file in WAL mode, shared safely with the CLI's processes. Writes on every
 * request's path commit relaxed (docs/operations.md, Durability); the rest keep SQLite's own fsync.
 */
export class SqliteControlStore extends SqlControlStore {
  readonly events: ControlEvents;
  readonly shared = false;
  /** Settles once the schema is up to date; calls made before wait for it, and fail as it did. */
  readonly ready: Promise<void>;
  private readonly connection: SqliteConnection;
  private readonly commits: RelaxedCommits;

  constructor(path: string) {
    const connection = new SqliteConnection(path);
    const events = new ControlEvents();
    const publish = (event: Parameters<ControlEvents['emit']>[0]) => events.emit(event);
    // SQLite keeps the log beside the file a symbolic link names, not beside the link.
    const commits = new RelaxedCommits(`${realpathSync(path)}-wal`);
    const db = new SqliteDb(connection, { publish });
    super(db, new SqliteDb(connection, { publish, relaxed: commits }));
    this.events = events;
    this.connection = connection;
    this.commits = commits;
    // Holds the connection from here: every other call waits for the migration.
    this.ready = migrate(db).catch((err: unknown) => {
      connection.fail(err);
      connection.close();
      throw err;
    });
    this.ready.catch(() => undefined);
  }

  /** The store at `path`, its schema brought up to date. */
  static async open(path: string): Promise<SqliteControlStore> {
    const store = new SqliteControlStore(path);
    await store.ready;
    return store;
  }

  durable(): Promise<void> {
    return this.commits.durable();
  }

  async close(): Promise<void> {
    // A store whose migration failed closed its connection then.
    if (
      !(await this.ready.then(
        () => true,
        () => false,
      ))
    )
      return;
    // Not under a transaction under way: it would find its connection gone between two statements.
    await this.connection.exclusive(async () => this.connection.close());
  }
}
