import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';

/**
 * The console's build (`npm run build:console`), beside the server's own: `dist/console/` seen from `src/http/`
 * (tests, which run the sources) and from `dist/http/` (the built server) alike.
 */
const BUILT = fileURLToPath(new URL('../../dist/console/', import.meta.url));

/**
 * The pages hold the API key in memory, so nothing but this origin may run in them, frame them or hear from them.
 * The build has no inline script or style (docs/console.md, Security), which is what lets this be this strict.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The web console (docs/console.md) at `/console/`: static files only, no key needed to fetch them (auth.ts); the
 * pages call the public API with the key the user pastes, as a bearer header. Not wrapped in fastify-plugin, so
 * that its headers hook covers its own routes alone.
 */
export async function consolePlugin(app: FastifyInstance): Promise<void> {
  app.addHook('onSend', async (_req, reply, payload) => {
    void reply.header('content-security-policy', CONSOLE_CSP);
    void reply.header('x-content-type-options', 'nosniff');
    void reply.header('referrer-policy', 'no-referrer');
    void reply.header('x-frame-options', 'DENY');
    return payload;
  });
  app.get('/console', { schema: { hide: true } }, async (_req, reply) => reply.redirect('/console/', 301));
  if (!existsSync(BUILT)) {
    // A server started from sources that were never built: say how to get the console rather than a bare 404.
    app.get('/console/*', { schema: { hide: true } }, async (_req, reply) =>
      reply
        .status(404)
        .type('text/plain; charset=utf-8')
        .send('The console is not built on this node: run `npm run build` (or `npm run build:console`).\n'),
    );
    return;
  }
  await app.register(fastifyStatic, {
    root: BUILT,
    prefix: '/console/',
    decorateReply: false,
    index: 'index.html',
    wildcard: true,
    // Asset names carry a hash of their content; the page itself must be asked for again to find new ones.
    setHeaders: (reply, path) => {
      void reply.header('cache-control', path.endsWith('.html') ? 'no-cache' : 'public, max-age=31536000, immutable');
    },
  });
}
