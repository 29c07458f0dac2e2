import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { DestinationStream } from 'pino';
import type { Config } from './config.js';
import { Databases } from './control/databases.js';
import { DatabaseLifecycle } from './control/lifecycle.js';
import type { ControlStore } from './control/store.js';
import { FreshBudget } from './engine/fresh/budget.js';
import { RowTokens, SCORED_TOKENS_BYTES } from './engine/text/row-tokens.js';
import { WorkerPool } from './engine/workers/pool.js';
import { WritePath } from './engine/writes/service.js';
import { buildApp } from './http/app.js';
import { createLogger } from './http/log.js';
import { ServiceMetrics } from './http/metrics.js';
import { SqlMemoryBudget } from './sql/memory-budget.js';
import type { StorageEnv } from './storage/open.js';
import { crashPoints } from './testing/crash-points.js';

/**
 * One Strata node, without its HTTP face: the control store, the worker pool with its upkeep leases and write
 * path, the databases' lifecycle, and the node's metrics. `close` stops it in order (workers, then the store).
 */
export interface StrataNode {
  config: Config;
  store: ControlStore;
  databases: Databases;
  workers: WorkerPool;
  /** This process among the nodes sharing the control store: the holder of its upkeep leases and idempotency keys. */
  nodeId: string;
  metrics: ServiceMetrics;
  sqlBudget: SqlMemoryBudget;
  /** The memory the fresh rows of this node's tables may take. */
  freshBudget: FreshBudget;
  /** The tokens of indexed rows this node's text legs scored (`RowTokens`). */
  scoredTokens: RowTokens;
  log: FastifyBaseLogger;
  close(): Promise<void>;
}

/** Builds a node over an open control store and starts its workers and its following of other nodes' changes. */
export function openNode(config: Config, store: ControlStore, log: FastifyBaseLogger): StrataNode {
  const storage: StorageEnv = {
    dataDir: config.dataDir,
    aws: config.aws,
    policy: {
      localStorage: config.localStorage,
      allowInsecureEndpoints: config.allowInsecureEndpoints,
      allowServerIdentity: config.allowServerIdentity,
    },
  };
  const metrics = new ServiceMetrics();
  const nodeId = `node_${randomUUID()}`;
  const sqlBudget = SqlMemoryBudget.ofMb(config.sqlNodeMemoryMb);
  const freshBudget = new FreshBudget(config.freshTierBytes);
  const scoredTokens = new RowTokens(SCORED_TOKENS_BYTES);
  const workers = new WorkerPool({
    deps: {
      catalog: store,
      storage,
      upkeep: {
        intervalMs: config.upkeepIntervalMs,
        annMinRows: config.annMinRows,
        heldTail: { rows: config.upkeepHeldTailRows, ms: config.upkeepHeldTailMs },
        pause: { paused: config.upkeepPaused },
        retainMs: config.versionRetentionMs,
        othersWrite: store.shared,
      },
      upkeepObserver: metrics.upkeep,
      upkeepLeases: {
        ms: config.upkeepLeaseMs,
        acquire: (tableId) => store.acquireLease(tableId, nodeId, config.upkeepLeaseMs),
        renew: (tableId) => store.renewLease(tableId, nodeId, config.upkeepLeaseMs),
        release: (tableId) => store.releaseLease(tableId, nodeId),
        upkept: (tableId) => store.recordUpkeep(tableId, Date.now()),
      },
      sql: {
        memoryMb: config.sqlMemoryMb,
        threads: config.sqlThreads,
        budget: sqlBudget,
        timeoutMs: config.sqlTimeoutMs,
        maxRows: config.sqlMaxRows,
        maxBytes: config.limits.maxResultBytes,
      },
      log: { warn: (details, message) => log.warn(details, message) },
      maxTables: config.limits.tablesPerDatabase,
      maxResultBytes: config.limits.maxResultBytes,
      maxUnindexedRows: config.maxUnindexedRows,
      freshBudget,
      freshFollow: config.freshFollow,
      scoredTokens,
      writes: new WritePath(
        store,
        { nodeId, holdMs: config.idempotencyHoldMs, ttlMs: config.idempotencyTtlMs },
        crashPoints(process.env),
      ),
    },
    capacity: config.maxActiveDatabases,
    accountSharePercent: config.limits.workerSharePercent,
    idleMs: config.workerIdleMs,
    onPlaced: (ref): Promise<void> => lifecycle.placed(ref.id),
    onError: (err, ref) => log.error({ err, database: ref.id }, 'worker placement failed'),
  });
  const lifecycle: DatabaseLifecycle = new DatabaseLifecycle(store, workers, log);
  const databases = new Databases(store, storage, lifecycle, config.limits.databasesPerAccount);

  workers.start();
  log.info({ node: nodeId }, 'node started: its upkeep leases are held under this id');
  const stopFollowing = lifecycle.follow(store.events);
  return {
    config,
    store,
    databases,
    workers,
    nodeId,
    metrics,
    sqlBudget,
    freshBudget,
    scoredTokens,
    log,
    async close() {
      stopFollowing();
      await workers.stop();
      await store.close();
    },
  };
}

export interface ServiceOptions {
  config: Config;
  store: ControlStore;
  /** Where logs go; stdout when absent. Tests capture it to prove no key is ever logged. */
  logStream?: DestinationStream;
}

/** A node and its HTTP app, ready to listen; closing the app closes the node. */
export async function buildService(options: ServiceOptions): Promise<FastifyInstance> {
  const log = createLogger(options.config, options.logStream);
  const node = openNode(options.config, options.store, log);
  try {
    return await buildApp(node);
  } catch (err) {
    await node.close();
    throw err;
  }
}
