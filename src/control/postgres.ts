import pg from 'pg';
import { ConfigError } from '../config.js';
import { PostgresDb } from './dialect/postgres.js';
import { ControlEvents } from './events.js';
import { KeyCache } from './key-cache.js';
import { listenForNotices } from './listener.js';
import { migrate } from './migrations.js';
import { SqlControlStore } from './sql-store.js';
import type { ApiKeyRecord } from './store.js';

/** Waits of the store: connecting, and any one statement. Past them a request answers 503, not a hang. */
const CONNECT_TIMEOUT_MS = 2000;
const STATEMENT_TIMEOUT_MS = 5000;

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
    const store = new PostgresControlStore(pool, hooks);
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

  /** Every commit is durable when PostgreSQL answers it (`synchronous_commit`, on by default). */
  async durable(): Promise<void> {}

  async close(): Promise<void> {
    await this.listener?.close();
    await this.pool.end().catch(() => undefined);
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
