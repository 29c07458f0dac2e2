import { randomUUID } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import pino, { type DestinationStream } from 'pino';
import pretty from 'pino-pretty';
import type { Config } from '../config.js';
import { Databases, DRAIN_MS } from '../control/databases.js';
import { type ControlStore, isBeingDeleted } from '../control/store.js';
import { WorkerPool } from '../engine/workers/pool.js';
import { WritePath } from '../engine/writes/service.js';
import { StrataError } from '../errors.js';
import { SqlMemoryBudget } from '../sql/memory-budget.js';
import { crashPoints } from '../testing/crash-points.js';
import { authPlugin } from './auth.js';
import { concurrencyPlugin } from './concurrency.js';
import type { AppContext } from './context.js';
import { docsPlugin } from './docs.js';
import { handleError, handleNotFound } from './errors.js';
import { answerClientError, answerFrameworkError } from './framework-errors.js';
import { metricsPlugin, ServiceMetrics } from './metrics.js';
import { databaseRoutes } from './routes/databases.js';
import { healthRoutes } from './routes/health.js';
import { rowRoutes } from './routes/rows.js';
import { searchRoutes } from './routes/search.js';
import { sqlRoutes } from './routes/sql.js';
import { tableRoutes } from './routes/tables.js';

export interface AppOptions {
  config: Config;
  store: ControlStore;
  /** Where logs go; stdout when absent. Tests capture it to prove no key is ever logged. */
  logStream?: DestinationStream;
}

/** Paths of anything that could carry a secret, blanked before a log line is written. */
const REDACT = ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization', '*.secretAccessKey'];

/**
 * A request as logs show it. The query string is cut down to its parameter names: values may carry a key
 * (`?api_key=`), a predicate over customer data, or anything else a client put there.
 */
function loggedRequest(req: FastifyRequest): Record<string, unknown> {
  const [path, query] = req.url.split('?', 2);
  const names = query === undefined ? [] : [...new URLSearchParams(query).keys()];
  return {
    method: req.method,
    url: names.length === 0 ? path : `${path}?${names.map((name) => `${name}=[redacted]`).join('&')}`,
    remoteAddress: req.ip,
  };
}

/**
 * Where logs go when no stream is given: readable lines on a terminal (pino-pretty, colour, local time), one
 * JSON object per line otherwise, for whatever collects them.
 */
function consoleLog(): DestinationStream | undefined {
  if (!process.stdout.isTTY) return undefined;
  return pretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true });
}

/** Builds the whole service; the caller listens and closes. Closing stops workers, then the store. */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const { config, store } = options;
  const logger: FastifyBaseLogger = pino(
    {
      level: config.logLevel,
      redact: { paths: REDACT, censor: '[redacted]' },
      serializers: { req: (req: FastifyRequest) => loggedRequest(req) },
    },
    options.logStream ?? consoleLog(),
  );
  const app = Fastify({
    loggerInstance: logger,
    bodyLimit: config.maxBodyBytes,
    genReqId: () => randomUUID(),
    // Names may be 128 characters (docs/api.md); the router's default refuses path segments over 100.
    routerOptions: { maxParamLength: 256 },
    frameworkErrors: answerFrameworkError,
    clientErrorHandler: answerClientError,
    requestIdHeader: false,
    ajv: {
      customOptions: {
        // Unknown properties are refused, never silently dropped; types are never coerced.
        removeAdditional: false,
        coerceTypes: false,
        useDefaults: false,
        discriminator: true,
      },
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  const storage = {
    dataDir: config.dataDir,
    aws: config.aws,
    policy: {
      localStorage: config.localStorage,
      allowInsecureEndpoints: config.allowInsecureEndpoints,
      allowServerIdentity: config.allowServerIdentity,
    },
  };
  const metrics = new ServiceMetrics();
  // This process among the nodes sharing the control store: whose upkeep leases are whose.
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
      log: { warn: (details, message) => app.log.warn(details, message) },
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
    onError: (err, ref) => app.log.error({ err, database: ref.id }, 'worker placement failed'),
  });
  const databases = new Databases(store, storage, workers, config.limits.databasesPerAccount);
  const ctx: AppContext = { config, store, databases, workers, nodeId };
  app.decorate('ctx', ctx);

  // Bodies are JSON (and, for rows, Arrow streams); anything else is 415, never parsed as text.
  app.removeContentTypeParser('text/plain');
  app.setErrorHandler(handleError);
  app.setNotFoundHandler(handleNotFound);
  app.addHook('onRequest', async (req, reply) => {
    void reply.header('x-request-id', req.id);
    // Until the body is in, a connection silent for this long is closed: a body trickled a byte at a time
    // must not hold a connection (and its parser's memory) for ever. Handlers may then take as long as they need.
    req.raw.socket?.setTimeout(config.bodyIdleMs);
  });
  app.addHook('preHandler', async (req) => {
    req.raw.socket?.setTimeout(0);
  });

  await app.register(docsPlugin);
  metrics.watch(
    'strata_unindexed_rows',
    'Rows of open tables that a search index does not cover yet (searched by brute force), as upkeep last found them',
    () => workers.unindexedRows(),
  );
  metrics.watch(
    'strata_upkeep_leases_held',
    'Tables whose index upkeep lease this node holds (one node looks after each table)',
    () => workers.leasesHeld(),
  );
  metrics.watch('strata_workers_placed', 'Databases with a worker placed on this node', () => workers.size);
  metrics.watch(
    'strata_sql_copies_bytes',
    "Bytes the databases' SQL copies hold on this node, as DuckDB counts them (with loads under way)",
    () => sqlBudget.usedBytes,
  );
  metrics.watch(
    'strata_sql_copies_let_go',
    'Databases whose SQL copies were let go to make room in STRATA_SQL_NODE_MEMORY_MB, since start-up',
    () => sqlBudget.evictions,
  );
  await app.register(metricsPlugin, { metrics });
  await app.register(authPlugin);
  await app.register(concurrencyPlugin);
  await app.register(rateLimit, {
    global: true,
    hook: 'preHandler',
    max: config.rateLimitPerMinute,
    timeWindow: 60_000,
    keyGenerator: (req) => req.keyId || req.ip,
    allowList: (req) => req.keyId === '',
    errorResponseBuilder: (_req, context) =>
      new StrataError(
        'throttled',
        `rate limit of ${context.max} requests per minute exceeded for this key; retry after ${context.after}`,
        { retryAfterS: Math.max(1, Math.ceil(context.ttl / 1000)), code: 'rate_limited' },
      ),
  });
  await app.register(healthRoutes);
  await app.register(databaseRoutes);
  await app.register(tableRoutes);
  await app.register(rowRoutes);
  await app.register(searchRoutes);
  await app.register(sqlRoutes);

  workers.start();
  app.log.info({ node: nodeId }, 'node started: its upkeep leases are held under this id');
  // Another node deleted a database, or its verification failed there: this node lets its worker go at once.
  // After a lost notice (the listener reconnected), every placed worker is checked against the store.
  const letGo = (id: string) =>
    workers.release(id).catch((err: unknown) => app.log.error({ err, database: id }, 'letting a worker go failed'));
  // A deletion begun on any node: this node admits no more calls on the database, lets those under way finish
  // (the purge waits for them), then lets its worker go. It never serves it again, whatever the deletion's end.
  const retire = (id: string) =>
    workers.retire(id, DRAIN_MS).then(
      (end) => end(true),
      (err: unknown) => app.log.error({ err, database: id }, 'retiring a worker failed'),
    );
  const stopFollowing = store.events.on((event) => {
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
  app.addHook('onClose', async () => {
    stopFollowing();
    await workers.stop();
    await store.close();
  });
  return app;
}
