import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errorReplies } from '../../contract/common.js';
import {
  CountBody,
  CountReplyWithReceipt,
  ExactMatchBody,
  HybridSearchBody,
  SearchRowsReply,
  TokenMatchBody,
} from '../../contract/search.js';
import { withWorker } from '../guard.js';
import { answerRows, onDatabase, withReceipt } from './reads.js';

const errors = errorReplies(404, 406, 409, 503);
const tags = ['Search'];

export const searchRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { ctx } = app;

  app.post(
    '/v1/hybrid_search/:database',
    onDatabase(tags, 'BM25 and vector search fused by reciprocal rank', HybridSearchBody, {
      200: SearchRowsReply,
      ...errors,
    }),
    async (req, reply) => {
      const { table_name, ...search } = req.body;
      return answerRows(ctx, req, reply, req.params.database, (w) => w.search(table_name, search));
    },
  );

  app.post(
    '/v1/count/:database',
    onDatabase(tags, 'Exact number of rows matching a full-text query', CountBody, {
      200: CountReplyWithReceipt,
      ...errors,
    }),
    async (req, reply) => {
      const { table_name, ...match } = req.body;
      const { count, receipt } = await withWorker(ctx, req.accountId, req.params.database, (w) =>
        w.count(table_name, match),
      );
      withReceipt(reply, receipt);
      return { count };
    },
  );

  app.post(
    '/v1/token_match/:database',
    onDatabase(tags, 'The rows count would count, in row order', TokenMatchBody, { 200: SearchRowsReply, ...errors }),
    async (req, reply) => {
      const { table_name, ...match } = req.body;
      return answerRows(ctx, req, reply, req.params.database, (w) => w.tokenMatch(table_name, match));
    },
  );

  app.post(
    '/v1/exact_match/:database',
    onDatabase(tags, 'Rows whose column equals a value, in row order', ExactMatchBody, errors),
    async (req, reply) => {
      const { table_name, ...match } = req.body;
      return answerRows(ctx, req, reply, req.params.database, (w) => w.exactMatch(table_name, match));
    },
  );
};
