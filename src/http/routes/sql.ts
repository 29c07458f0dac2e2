import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errorReplies } from '../../contract/common.js';
import { QuerySqlBody } from '../../contract/search.js';
import { answerRows, onDatabase } from './reads.js';

const errors = errorReplies(404, 406, 408, 409, 503);

export const sqlRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { ctx } = app;

  app.post(
    '/v1/query_sql/:database',
    onDatabase(['SQL'], "One read-only SQL statement over the database's tables", QuerySqlBody, errors),
    async (req, reply) => answerRows(ctx, req, reply, req.params.database, (w) => w.querySql(req.body.query)),
  );
};
