import { createHash } from 'node:crypto';
import pg from 'pg';
import { ConfigError } from '../config.js';
import { Unavailable } from '../errors.js';
import { unavailable } from './dialect/db.js';
import { isUnreachable, PostgresDb } from './dialect/postgres.js';
import { ControlEvents } from './events.js';
import { KeyCache } from './key-cache.js';
import { listenForNotices } from './listener.js';
import { migrate } from './migrations.js';
import { SqlControlStore } from './sql-store.js';
import type { ApiKeyRecord } from './store.js';

/** Waits of the store: connecting, and any one statement. Past them a request answers 503, not a hang. */
const CONNECT_TIMEOUT_MS = 2000;
const STATEMENT_TIMEOUT_MS = 5000;

/** The advisory lock class of a table's primary keys ("STKY"); the object id is a hash of the table's id. */
const KEY_LOCK_CLASS = 0x5354_4b59;
/** How long a write waits for another node's write to the same keyed table, and how many may wait at once. */
const KEY_LOCK_WAIT_MS = 10_000;
const KEY_LOCK_CONNECTIONS = 16;

const keysBusy = (): Unavailable =>
  new Unavailable("another node's write to this table held its primary keys for too long; retry", {
    retryAfterS: 1,
    code: 'control_store_unavailable',
  });

/** Ways for a test to hold the store at a point where a race can happen; a served node sets none. */
export interface PostgresTestHooks {
  /** Awaited by a key lookup after PostgreSQL answered it, before the key may be remembered. */
  testHoldKeyLookup?: () => Promise<void>;
}

/** The control store on PostgreSQL, shared by every node of a deployment (docs/deploy.md). */
export class PostgresControlStore extends SqlControlStore {
  readonly events = new ControlEvents();
  readonly shared = true;
  private readonly keys: KeyCache;
  private listener: { close(): Promise<void> } | undefined;

  private constructor(
    private readonly pool: pg.Pool,
    /** Connections that hold a table's primary keys while a write commits (`holdKeys`), apart from the others. */
    private readonly keyLocks: pg.Pool,
    hooks: PostgresTestHooks,
  ) {
    super(new PostgresDb(pool));
    this.keys = new KeyCache(hooks.testHoldKeyLookup);
  }

  /** Connects, brings the schema up to date under the migration lock, and starts listening for other nodes. */
  static async open(url: string, hooks: PostgresTestHooks = {}): Promise<PostgresControlStore> {
    await migrateAt(url);
    const pool = new pg.Pool({
      connectionString: url,
      max: 10,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      query_timeout: STATEMENT_TIMEOUT_MS,
      statement_timeout: STATEMENT_TIMEOUT_MS,
      idleTimeoutMillis: 30_000,
      keepAlive: true,
    });
    // An idle connection that breaks (the server restarted) is dropped by the pool; without a listener the
    // error would end the process.
    pool.on('error', () => undefined);
    // A write waits here for another node's write to the same keyed table; past the timeout it answers 503.
    const keyLocks = new pg.Pool({
      connectionString: url,
      max: KEY_LOCK_CONNECTIONS,
      // A write waits for a connection as long as for the lock itself.
      connectionTimeoutMillis: KEY_LOCK_WAIT_MS,
      statement_timeout: KEY_LOCK_WAIT_MS,
      idleTimeoutMillis: 30_000,
      keepAlive: true,
      // The server probes a quiet session within ~25 s, so that a node whose host vanished (no FIN ever comes)
      // does not hold a table's keys for the system's default of two hours.
      options: '-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3',
    });
    keyLocks.on('error', () => undefined);
    const store = new PostgresControlStore(pool, keyLocks, hooks);
    store.listener = listenForNotices(url, {
      heard: (event) => {
        if (event.kind === 'key_revoked') store.keys.revoked(event.hash);
        store.events.emit(event);
      },
      connected: () => {
        store.keys.connected();
        store.events.emit({ kind: 'resync' });
      },
      disconnected: () => store.keys.disconnected(),
    });
    return store;
  }

  /** Live keys are remembered while this node hears every revocation (`KeyCache`). */
  override findKeyByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    return this.keys.find(hash, () => super.findKeyByHash(hash));
  }

  /**
   * A session advisory lock on the table's keys, on a connection of its own held until the release: a node whose
   * process dies loses its session, and the lock with it; one whose host vanishes loses it once the server's
   * keepalive probes go unanswered.
   */
  override async holdKeys(tableId: string): Promise<() => Promise<void>> {
    const objid = createHash('sha256').update(tableId).digest().readInt32LE(0);
    const held = await this.keyLocks.connect().catch(() => {
      throw unavailable();
    });
    // A checked-out client has no listener of the pool's: a connection that breaks while held must not end the
    // process (an 'error' event nobody hears). The lock went with it; the release then only lets the client go.
    let broken = false;
    const onError = () => {
      broken = true;
    };
    held.on('error', onError);
    try {
      await held.query('SELECT pg_advisory_lock($1, $2)', [KEY_LOCK_CLASS, objid]);
    } catch (err) {
      held.off('error', onError);
      held.release(true);
      throw isUnreachable(err) || /statement timeout|canceling/i.test(String(err)) ? keysBusy() : err;
    }
    return async () => {
      try {
        if (broken) throw new Error('the connection holding the lock broke');
        await held.query('SELECT pg_advisory_unlock($1, $2)', [KEY_LOCK_CLASS, objid]);
        held.off('error', onError);
        held.release();
      } catch {
        // Ending the session lets go of the lock all the same.
        held.off('error', onError);
        held.release(true);
      }
    };
  }

  /** Every commit is durable when PostgreSQL answers it (`synchronous_commit`, on by default). */
  async durable(): Promise<void> {}

  async close(): Promise<void> {
    await this.listener?.close();
    await this.pool.end().catch(() => undefined);
    await this.keyLocks.end().catch(() => undefined);
  }
}

/**
 * Migrates on a connection of its own, without the statement timeout: nodes starting together wait for each
 * other's migration, however long it takes.
 */
async function migrateAt(url: string): Promise<void> {
  const pool = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  pool.on('error', () => undefined);
  try {
    try {
      (await pool.connect()).release();
    } catch (err) {
      throw new ConfigError(`cannot reach the control store at STRATA_CONTROL_URL: ${(err as Error).message}`);
    }
    await migrate(new PostgresDb(pool));
  } finally {
    await pool.end().catch(() => undefined);
  }
}
