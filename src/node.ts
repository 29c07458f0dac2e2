import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { DestinationStream } from 'pino';
import type { Config } from './config.js';
import { Databases, DRAIN_MS } from './control/databases.js';
import { type ControlStore, isBeingDeleted } from './control/store.js';
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
  const workers = new WorkerPool({
    deps: {
      catalog: store,
      storage,
      upkeep: {
        intervalMs: config.upkeepIntervalMs,
        annMinRows: config.annMinRows,
        retainMs: config.versionRetentionMs,
        othersWrite: store.shared,
      },
      upkeepObserver: metrics.upkeep,
      upkeepLeases: {
        ms: config.upkeepLeaseMs,
        acquire: (tableId) => store.acquireLease(tableId, nodeId, config.upkeepLeaseMs),
        renew: (tableId) => store.renewLease(tableId, nodeId, config.upkeepLeaseMs),
        release: (tableId) => store.releaseLease(tableId, nodeId),
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
      writes: new WritePath(
        store,
        { nodeId, holdMs: config.idempotencyHoldMs, ttlMs: config.idempotencyTtlMs },
        crashPoints(process.env),
      ),
    },
    capacity: config.maxActiveDatabases,
    accountSharePercent: config.limits.workerSharePercent,
    idleMs: config.workerIdleMs,
    onPlaced: async (ref) => store.markActive(ref.id),
    onError: (err, ref) => log.error({ err, database: ref.id }, 'worker placement failed'),
  });
  const databases = new Databases(store, storage, workers, config.limits.databasesPerAccount);

  workers.start();
  log.info({ node: nodeId }, 'node started: its upkeep leases are held under this id');
  const stopFollowing = followOtherNodes(store, workers, log);
  return {
    config,
    store,
    databases,
    workers,
    nodeId,
    metrics,
    sqlBudget,
    log,
    async close() {
      stopFollowing();
      await workers.stop();
      await store.close();
    },
  };
}

/**
 * Another node deleted a database, or its verification failed there: this node lets its worker go at once. A
 * deletion begun on any node: this node admits no more calls on the database, lets those under way finish (the
 * purge waits for them), then lets its worker go, and never serves it again, whatever the deletion's end. After a
 * lost notice (the listener reconnected), every placed worker is checked against the store.
 */
function followOtherNodes(store: ControlStore, workers: WorkerPool, log: FastifyBaseLogger): () => void {
  const letGo = (id: string) =>
    workers.release(id).catch((err: unknown) => log.error({ err, database: id }, 'letting a worker go failed'));
  const retire = (id: string) =>
    workers.retire(id, DRAIN_MS).then(
      (end) => end(true),
      (err: unknown) => log.error({ err, database: id }, 'retiring a worker failed'),
    );
  return store.events.on((event) => {
    if (event.kind === 'database_gone') void letGo(event.databaseId);
    else if (event.kind === 'database_deleting') void retire(event.databaseId);
    else if (event.kind === 'resync')
      for (const id of workers.placedIds()) {
        // A deletion begun while the notice was lost is retired here as if heard.
        store.databaseState(id).then(
          (state) => (state === undefined ? letGo(id) : isBeingDeleted(state) ? retire(id) : undefined),
          () => undefined,
        );
      }
  });
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
