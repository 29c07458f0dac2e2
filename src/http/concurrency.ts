import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Throttled } from '../errors.js';

/**
 * At most `STRATA_MAX_CONCURRENT_REQUESTS_PER_ACCOUNT` requests of one account run at once on a node; the
 * next is refused at once (429 + Retry-After), so one tenant's burst cannot take every slot of the event loop,
 * the workers and the SQL engines from the others. A request counts until its response ends or its connection
 * closes, however that comes (sent, failed, or the client gone).
 */
export const concurrencyPlugin = fp(async (app: FastifyInstance) => {
  const limit = app.ctx.config.limits.concurrentRequestsPerAccount;
  const running = new Map<string, number>();
  app.addHook('onRequest', async (req, reply) => {
    if (req.keyId === '') return; // a public route: no account to count against
    const account = req.accountId;
    const now = running.get(account) ?? 0;
    if (now >= limit) {
      throw new Throttled(
        `this account already runs ${limit} requests at once on this node (STRATA_MAX_CONCURRENT_REQUESTS_PER_ACCOUNT); retry when one has finished`,
        { retryAfterS: 1 },
      );
    }
    running.set(account, now + 1);
    // The response's close, or the socket's: a pipelined request queued behind another never gets a response
    // object closed when its client goes away, but its socket closes.
    const socket = req.raw.socket;
    let counted = true;
    const done = () => {
      if (!counted) return;
      counted = false;
      reply.raw.off('close', done);
      socket?.off('close', done);
      const left = (running.get(account) ?? 1) - 1;
      if (left <= 0) running.delete(account);
      else running.set(account, left);
    };
    reply.raw.once('close', done);
    socket?.once('close', done);
    if (reply.raw.closed || socket?.destroyed === true) done();
  });
});
