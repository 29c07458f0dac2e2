import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { UpkeepObserver } from '../engine/upkeep/upkeep.js';

/** The service's counters, in one registry per app (several apps in one process, as in tests, must not share). */
export class ServiceMetrics {
  readonly registry = new Registry();
  private readonly upkeepSeconds: Histogram<'work'>;
  private readonly upkeepFailures: Counter;
  private readonly leaseTakeovers: Counter;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    this.upkeepSeconds = new Histogram({
      name: 'strata_upkeep_duration_seconds',
      help: 'Index upkeep steps that finished, by what they did, and how long each took',
      labelNames: ['work'],
      buckets: [0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
      registers: [this.registry],
    });
    this.upkeepFailures = new Counter({
      name: 'strata_upkeep_failures_total',
      help: 'Index upkeep passes over a table that failed (each is tried again on the next pass)',
      registers: [this.registry],
    });
    this.leaseTakeovers = new Counter({
      name: 'strata_upkeep_lease_takeovers_total',
      help: 'Tables whose upkeep this node took over from another node whose lease ran out',
      registers: [this.registry],
    });
  }

  /** What the workers' upkeep reports into. */
  readonly upkeep: UpkeepObserver = {
    done: (work, seconds) => this.upkeepSeconds.observe({ work }, seconds),
    failed: () => this.upkeepFailures.inc(),
    tookOver: () => this.leaseTakeovers.inc(),
  };

  /**
   * A gauge read when scraped. Watched: `strata_workers_placed` (databases with a worker on this node),
   * `strata_upkeep_leases_held` (tables whose upkeep this node looks after) and `strata_unindexed_rows` (rows
   * searches scan by brute force because no index covers them yet; upkeep folds them in within a pass or two,
   * so a figure that stays up means upkeep is failing or cannot keep up with the writes).
   */
  watch(name: string, help: string, read: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }
}

/** Request count and latency by route and status, plus the service's own metrics, at `GET /metrics`. */
export const metricsPlugin = fp(async (app: FastifyInstance, { metrics }: { metrics: ServiceMetrics }) => {
  const registry = metrics.registry;
  const labelNames = ['method', 'route', 'status'] as const;
  const requests = new Counter({
    name: 'strata_http_requests_total',
    help: 'HTTP requests answered',
    labelNames,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'strata_http_request_duration_seconds',
    help: 'HTTP request latency',
    labelNames,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });

  app.addHook('onResponse', async (req, reply) => {
    const labels = { method: req.method, route: req.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) };
    requests.inc(labels);
    latency.observe(labels, reply.elapsedTime / 1000);
  });

  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
    void reply.type(registry.contentType);
    return registry.metrics();
  });
});
