import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { authenticate } from '../control/keys.js';
import { Unauthorized } from '../errors.js';

/** Paths under /v1 that anyone may read. */
const PUBLIC_PATHS = new Set(['/v1/openapi.json']);

/** Every `/v1` request proves a key before anything else runs (API.md §1). */
export const authPlugin = fp(async (app: FastifyInstance) => {
  app.decorateRequest('accountId', '');
  app.decorateRequest('keyId', '');
  app.addHook('onRequest', async (req, reply) => {
    const path = req.url.split('?')[0] ?? '';
    if (!path.startsWith('/v1/') || PUBLIC_PATHS.has(path)) return;
    const who = await authenticate(app.ctx.store, req.headers.authorization);
    if (who === undefined) {
      void reply.header('www-authenticate', 'Bearer');
      throw new Unauthorized();
    }
    req.accountId = who.accountId;
    req.keyId = who.keyId;
  });
});
