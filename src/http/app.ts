import { randomUUID } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyInstance } from 'fastify';
import { StrataError } from '../errors.js';
import type { StrataNode } from '../node.js';
import { authPlugin } from './auth.js';
import { concurrencyPlugin } from './concurrency.js';
import { consolePlugin } from './console.js';
import type { AppContext } from './context.js';
import { docsPlugin } from './docs.js';
import { handleError, handleNotFound } from './errors.js';
import { answerClientError, answerFrameworkError } from './framework-errors.js';
import { metricsPlugin } from './metrics.js';
import { adminRoutes } from './routes/admin.js';
import { databaseRoutes } from './routes/databases.js';
import { healthRoutes } from './routes/health.js';
import { rowRoutes } from './routes/rows.js';
import { searchRoutes } from './routes/search.js';
import { sqlRoutes } from './routes/sql.js';
import { tableRoutes } from './routes/tables.js';

/** Builds the HTTP app of a node; the caller listens and closes. Closing the app closes the node. */
export async function buildApp(node: StrataNode): Promise<FastifyInstance> {
  const { config, store, databases, workers, metrics, sqlBudget, freshBudget, scoredTokens, nodeId } = node;
  const app = Fastify({
    loggerInstance: node.log,
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
  await app.register(consolePlugin);
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
  metrics.watch(
    'strata_fresh_rows',
    'Rows this node wrote that its indexes do not cover yet, held in memory and searched beside them (the fresh tier)',
    () => freshBudget.rows,
  );
  metrics.watch(
    'strata_fresh_bytes',
    "Bytes the fresh tier's rows take on this node, as estimated when written (STRATA_FRESH_TIER_MB bounds them)",
    () => freshBudget.bytes,
  );
  metrics.watch(
    'strata_fresh_overflows',
    'Tables whose fresh rows were let go of to stay within STRATA_FRESH_TIER_MB, since start-up',
    () => freshBudget.overflows,
  );
  metrics.watch(
    'strata_scored_tokens_bytes',
    'Bytes of the tokens this node keeps of indexed rows a text leg scored over the live rows (64 MB at most)',
    () => scoredTokens.bytes,
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
  await app.register(adminRoutes);

  app.addHook('onClose', () => node.close());
  return app;
}
