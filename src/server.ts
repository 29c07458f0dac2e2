import type { FastifyInstance } from 'fastify';
import type { Config } from './config.js';
import { bootstrapKey } from './control/bootstrap.js';
import { openControlStore } from './control/open.js';
import { buildService } from './node.js';

/** How long shutdown waits for in-flight responses before it cuts their connections. */
const DRAIN_MS = 10_000;

/**
 * `strata serve`: opens the control store, makes sure a key exists, listens, and shuts down in order on
 * SIGTERM/SIGINT (stop accepting, drain in-flight requests, stop workers, close the store).
 */
export async function serve(config: Config): Promise<FastifyInstance> {
  const store = await openControlStore(config);
  const printed = await bootstrapKey(store, config.bootstrapKey);
  const app = await buildService({ config, store });
  if (printed !== undefined) {
    // Printed straight to the terminal, never through the logger: this is the only time it is shown.
    process.stdout.write(
      `\nNo API key existed, so one was created for account "default". It is shown once:\n\n${printed}\n\n`,
    );
  }
  await app.listen({ host: config.host, port: config.port });
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    // In-flight requests get a grace period; a client that stops reading must not hold the process forever.
    setTimeout(() => app.server.closeAllConnections(), DRAIN_MS).unref();
    app.close().then(
      () => process.exit(0),
      (err: unknown) => {
        app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  return app;
}
