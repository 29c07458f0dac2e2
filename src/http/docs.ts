import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/** The OpenAPI 3.1 document, generated from the route schemas, and its rendering at /docs (assets from npm). */
export const docsPlugin = fp(async (app: FastifyInstance) => {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Strata',
        version: '0.1.0',
        description: 'Search and SQL over data that stays in your own bucket.',
      },
      components: {
        securitySchemes: {
          api_key: { type: 'http', scheme: 'bearer' },
          // The admin routes' token: the node's STRATA_ADMIN_KEY, not an account's API key.
          admin_key: { type: 'http', scheme: 'bearer' },
        },
      },
      security: [{ api_key: [] }],
    },
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    // No request leaves the page: the spec comes from this server and nothing is validated remotely.
    uiConfig: { validatorUrl: null, deepLinking: true },
  });
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
});
