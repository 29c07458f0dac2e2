import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { authenticate } from '../control/keys.js';
import { ApiError, Unauthorized } from '../errors.js';

/**
 * The routes anyone may call, by their registered pattern (never the raw URL, which a client spells as it
 * likes: `GET http://x/v1/databases` routes like `/v1/databases`). Every other route, and every request that
 * matches no route, needs a key.
 */
const PUBLIC_ROUTES = new Set(['/healthz', '/readyz', '/metrics', '/v1/openapi.json']);
/** The rendered reference registers its own asset routes under this prefix. */
const PUBLIC_PREFIX = '/docs';

export function isPublicRoute(pattern: string | undefined): boolean {
  if (pattern === undefined) return false;
  return PUBLIC_ROUTES.has(pattern) || pattern === PUBLIC_PREFIX || pattern.startsWith(`${PUBLIC_PREFIX}/`);
}

/** Who proved a key; absent on public routes. */
interface Principal {
  accountId: string;
  keyId: string;
}

const PRINCIPAL = Symbol('principal');
type WithPrincipal = FastifyRequest & { [PRINCIPAL]?: Principal };

/**
 * Failed authentications counted per client address in fixed one-minute windows, so that guessing keys costs
 * a minute per `limit` guesses. Windows of addresses that stopped failing are dropped when they end.
 */
export class AuthFailures {
  private readonly windows = new Map<string, { startMs: number; count: number }>();

  constructor(
    private readonly limit: number,
    private readonly windowMs = 60_000,
  ) {}

  /** Seconds until `address` may try again, or 0 when it may try now. */
  blockedFor(address: string, nowMs = Date.now()): number {
    const window = this.windows.get(address);
    if (window === undefined || nowMs - window.startMs >= this.windowMs || window.count < this.limit) return 0;
    return Math.max(1, Math.ceil((window.startMs + this.windowMs - nowMs) / 1000));
  }

  record(address: string, nowMs = Date.now()): void {
    if (this.windows.size > 100_000) this.prune(nowMs);
    const window = this.windows.get(address);
    if (window === undefined || nowMs - window.startMs >= this.windowMs) {
      this.windows.set(address, { startMs: nowMs, count: 1 });
    } else {
      window.count++;
    }
  }

  private prune(nowMs: number): void {
    for (const [address, window] of this.windows) {
      if (nowMs - window.startMs >= this.windowMs) this.windows.delete(address);
    }
  }
}

/**
 * Every route but the public ones proves a key before anything else runs (API.md §1). Handlers read the
 * account through `req.accountId`, which throws when no key was proved: a handler cannot run as nobody.
 */
export const authPlugin = fp(async (app: FastifyInstance) => {
  const failures = new AuthFailures(app.ctx.config.authFailuresPerMinute);
  app.decorateRequest(PRINCIPAL, undefined);
  app.decorateRequest('accountId', {
    getter(this: FastifyRequest): string {
      const principal = (this as WithPrincipal)[PRINCIPAL];
      if (principal === undefined) throw new Unauthorized();
      return principal.accountId;
    },
  });
  app.decorateRequest('keyId', {
    getter(this: FastifyRequest): string {
      return (this as WithPrincipal)[PRINCIPAL]?.keyId ?? '';
    },
  });
  app.addHook('onRequest', async (req, reply) => {
    if (isPublicRoute(req.routeOptions.url)) return;
    const wait = failures.blockedFor(req.ip);
    if (wait > 0) {
      throw new ApiError(429, `too many failed authentications from this address; retry after ${wait} s`, wait, {
        code: 'auth_rate_limited',
      });
    }
    const who = await authenticate(app.ctx.store, req.headers.authorization);
    if (who === undefined) {
      failures.record(req.ip);
      void reply.header('www-authenticate', 'Bearer');
      throw new Unauthorized();
    }
    (req as WithPrincipal)[PRINCIPAL] = who;
  });
});
