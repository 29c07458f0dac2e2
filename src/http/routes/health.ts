import type { FastifyPluginAsync } from 'fastify';
import { errorBody } from '../../errors.js';

export const healthRoutes: FastifyPluginAsync = async (app) => {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (req, reply) => {
    try {
      await app.ctx.store.ping();
      return { status: 'ready' };
    } catch (err) {
      req.log.warn({ err }, 'control store not answering');
      return reply
        .status(503)
        .header('retry-after', '1')
        .send(errorBody('the control store is not answering', 'control_store_unavailable'));
    }
  });
};
