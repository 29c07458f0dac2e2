import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { errorReplies } from '../../contract/common.js';
import { AppendQuery, ARROW_STREAM, PredicateQuery, RowCounts, RowsBody, RowsBytes } from '../../contract/rows.js';
import { DatabasePathParams } from '../../contract/tables.js';
import type { RowsBody as Rows } from '../../engine/writes/rows.js';
import { BadRequest } from '../../errors.js';
import { JSON_TYPE, negotiate, ROW_ENCODINGS, sendRows } from '../encode.js';
import { withWorker } from '../guard.js';

const errors = errorReplies(404, 406, 409, 413, 415, 503);
const tags = ['Rows'];

/** The body as the content-type parsers tagged it; they already refused any other type (415). */
function rowsOf(req: FastifyRequest): Rows {
  const body = req.body as Rows | undefined;
  if (body === undefined) {
    throw new BadRequest(`send rows as application/json {"data": [...]} or as an ${ARROW_STREAM} body`);
  }
  return body;
}

/** The OpenAPI document shows the rows body the routes take as bytes (`RowsBytes`) as `RowsBody`. */
const documented = {
  swaggerTransform: ({ schema, url }: { schema: object; url: string }) => ({
    schema: { ...schema, body: RowsBody },
    url,
  }),
};

export const rowRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { ctx } = app;

  // JSON rows too arrive as bytes: they are parsed with their conversion, off the event loop (engine/json-rows.ts).
  app.removeContentTypeParser(JSON_TYPE);
  for (const [type, kind] of [
    [ARROW_STREAM, 'arrow'],
    [JSON_TYPE, 'json'],
  ] as const) {
    app.addContentTypeParser(type, { parseAs: 'buffer' }, (_req, bytes, done) => done(null, { kind, bytes }));
  }

  app.post(
    '/v1/append/:database',
    {
      schema: {
        tags,
        summary: 'Append rows atomically; answers the rows as stored',
        params: DatabasePathParams,
        querystring: AppendQuery,
        body: RowsBytes,
        response: errors,
      },
      config: documented,
    },
    async (req, reply) => {
      const encoding = negotiate(req, ROW_ENCODINGS);
      const result = await withWorker(ctx, req.accountId, req.params.database, (worker) =>
        worker.append(req.query.table, rowsOf(req)),
      );
      void reply.header('x-strata-table-version', String(result.version));
      return sendRows(reply, encoding, result, 'written');
    },
  );

  app.post(
    '/v1/update/:database',
    {
      schema: {
        tags,
        summary: 'Replace the rows a predicate matches, in one atomic commit',
        params: DatabasePathParams,
        querystring: PredicateQuery,
        body: RowsBytes,
        response: { 200: RowCounts, ...errors },
      },
      config: documented,
    },
    async (req, reply) => {
      const encoding = negotiate(req, [JSON_TYPE, ARROW_STREAM]);
      const result = await withWorker(ctx, req.accountId, req.params.database, (worker) =>
        worker.replace(req.query.table, req.query.predicate, rowsOf(req)),
      );
      const counts = { matched: result.matched, n_tombstoned: result.n_tombstoned, n_not_found: result.n_not_found };
      void reply.header('x-strata-table-version', String(result.version));
      if (encoding === JSON_TYPE) return counts;
      void reply.headers({
        'x-strata-matched': String(counts.matched),
        'x-strata-tombstoned': String(counts.n_tombstoned),
        'x-strata-not-found': String(counts.n_not_found),
      });
      return sendRows(reply, encoding, result, 'written');
    },
  );

  app.post(
    '/v1/delete/:database',
    {
      schema: {
        tags,
        summary: 'Delete the rows a predicate matches',
        params: DatabasePathParams,
        querystring: PredicateQuery,
        response: { 200: RowCounts, ...errors },
      },
    },
    async (req, reply) => {
      const result = await withWorker(ctx, req.accountId, req.params.database, (worker) =>
        worker.remove(req.query.table, req.query.predicate),
      );
      void reply.header('x-strata-table-version', String(result.version));
      return { matched: result.matched, n_tombstoned: result.n_tombstoned, n_not_found: result.n_not_found };
    },
  );
};
