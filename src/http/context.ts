import type { Config } from '../config.js';
import type { Databases } from '../control/databases.js';
import type { ControlStore } from '../control/store.js';
import type { WorkerPool } from '../engine/workers/pool.js';

/** Everything a route may call, built once per app and hung on the Fastify instance. */
export interface AppContext {
  config: Config;
  store: ControlStore;
  databases: Databases;
  workers: WorkerPool;
  /** This node's id (its upkeep leases are held under it). */
  nodeId: string;
}

declare module 'fastify' {
  interface FastifyInstance {
    ctx: AppContext;
  }
  interface FastifyRequest {
    /** Set by the auth hook on every authenticated `/v1` request. */
    accountId: string;
    /** The id of the key that proved it, for per-key rate limits. */
    keyId: string;
  }
}
