import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errorReplies } from '../../contract/common.js';
import { QuerySqlBody } from '../../contract/search.js';
import { DatabasePathParams } from '../../contract/tables.js';
import { negotiate, ROW_ENCODINGS, sendRows } from '../encode.js';
import { withWorker } from '../guard.js';

const errors = errorReplies(404, 406, 408, 409, 503);

export const sqlRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { ctx } = app;

  app.post(
    '/v1/query_sql/:database',
    {
      schema: {
        tags: ['SQL'],
        summary: "One read-only SQL statement over the database's tables",
        params: DatabasePathParams,
        body: QuerySqlBody,
        response: errors,
      },
    },
    async (req, reply) => {
      const encoding = negotiate(req, ROW_ENCODINGS);
      const result = await withWorker(ctx, req.accountId, req.params.database, (w) => w.querySql(req.body.query));
      return sendRows(reply, encoding, result);
    },
  );
};
