import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import ipaddr from 'ipaddr.js';
import { authenticate } from '../control/keys.js';
import { StrataError, Unauthorized } from '../errors.js';

/**
 * The routes anyone may call, by their registered pattern (never the raw URL, which a client spells as it
 * likes: `GET http://x/v1/databases` routes like `/v1/databases`). Every other route, and every request that
 * matches no route, needs a key.
 */
const PUBLIC_ROUTES = new Set(['/healthz', '/readyz', '/metrics', '/v1/openapi.json']);
/**
 * The rendered reference and the web console register their own asset routes under these prefixes: static files,
 * which hold no account's data (the console's pages send the key themselves, on each API call).
 */
const PUBLIC_PREFIXES = ['/docs', '/console'];

function isPublicRoute(pattern: string | undefined): boolean {
  if (pattern === undefined) return false;
  return (
    PUBLIC_ROUTES.has(pattern) ||
    PUBLIC_PREFIXES.some((prefix) => pattern === prefix || pattern.startsWith(`${prefix}/`))
  );
}

/** The node's admin routes (docs/api.md, Admin): their bearer token is the node's admin key, not an API key. */
const ADMIN_PREFIX = '/v1/admin/';

/** Whether `authorization` carries the admin key whose SHA-256 is `hash`; compared in constant time. */
function provesAdmin(authorization: string | undefined, hash: string): boolean {
  const match = /^Bearer (\S+)$/i.exec(authorization ?? '');
  if (match === null) return false;
  const presented = createHash('sha256')
    .update(match[1] as string)
    .digest();
  return timingSafeEqual(presented, Buffer.from(hash, 'hex'));
}

/** Who proved a key; absent on public routes. */
interface Principal {
  accountId: string;
  keyId: string;
}

const PRINCIPAL = Symbol('principal');
type WithPrincipal = FastifyRequest & { [PRINCIPAL]?: Principal };

/**
 * Failed authentications counted per client address in fixed one-minute windows. An IPv6 client is counted by
 * its /64, which one host usually holds whole. The table is bounded: windows that ended are dropped once per
 * window, and past `maxAddresses` the oldest entries go first.
 */
export class AuthFailures {
  private readonly windows = new Map<string, { startMs: number; count: number }>();
  private prunedMs = 0;

  constructor(
    private readonly limit: number,
    private readonly windowMs = 60_000,
    private readonly maxAddresses = 100_000,
  ) {}

  /** Seconds until `address` may fail again without a 429, or 0 when it may now. */
  blockedFor(address: string, nowMs = Date.now()): number {
    const window = this.windows.get(clientOf(address));
    if (window === undefined || nowMs - window.startMs >= this.windowMs || window.count < this.limit) return 0;
    return Math.max(1, Math.ceil((window.startMs + this.windowMs - nowMs) / 1000));
  }

  record(address: string, nowMs = Date.now()): void {
    this.prune(nowMs);
    const client = clientOf(address);
    const window = this.windows.get(client);
    if (window !== undefined && nowMs - window.startMs < this.windowMs) {
      window.count++;
      return;
    }
    // Re-inserted, so that the map's order stays oldest window first.
    this.windows.delete(client);
    this.windows.set(client, { startMs: nowMs, count: 1 });
    for (const oldest of this.windows.keys()) {
      if (this.windows.size <= this.maxAddresses) break;
      this.windows.delete(oldest);
    }
  }

  private prune(nowMs: number): void {
    if (nowMs - this.prunedMs < this.windowMs) return;
    this.prunedMs = nowMs;
    for (const [client, window] of this.windows) {
      if (nowMs - window.startMs < this.windowMs) break; // oldest first: the rest are younger
      this.windows.delete(client);
    }
  }
}

/** The client an address counts as: itself for IPv4, its /64 for IPv6. */
function clientOf(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  // process() turns an IPv4-mapped IPv6 address into the IPv4 address it carries.
  const ip = ipaddr.process(address);
  if (ip.kind() === 'ipv4') return ip.toString();
  return `${ip.toNormalizedString().split(':').slice(0, 4).join(':')}::/64`;
}

/**
 * Every route but the public ones proves a key before anything else runs (docs/api.md). Handlers read the
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
  /** A failed authentication, counted against the address; throttled past the limit. */
  const refused = (req: FastifyRequest, reply: FastifyReply, message?: string) => {
    // A good key always passes: a client behind the same proxy or NAT as a guesser is never locked out.
    const wait = failures.blockedFor(req.ip);
    if (wait > 0) {
      throw new StrataError('throttled', `too many failed authentications from this address; retry after ${wait} s`, {
        retryAfterS: wait,
        code: 'auth_rate_limited',
      });
    }
    failures.record(req.ip);
    void reply.header('www-authenticate', 'Bearer');
    return new Unauthorized(message);
  };
  app.addHook('onRequest', async (req, reply) => {
    const route = req.routeOptions.url;
    if (isPublicRoute(route)) return;
    if (route?.startsWith(ADMIN_PREFIX) === true) {
      const hash = app.ctx.config.adminKeyHash;
      if (hash === undefined) {
        throw new Unauthorized('admin routes are off on this node: start it with STRATA_ADMIN_KEY to use them', {
          code: 'admin_disabled',
        });
      }
      if (!provesAdmin(req.headers.authorization, hash)) throw refused(req, reply, 'missing or invalid admin key');
      return;
    }
    const who = await authenticate(app.ctx.store, req.headers.authorization);
    if (who === undefined) throw refused(req, reply);
    (req as WithPrincipal)[PRINCIPAL] = who;
  });
});
