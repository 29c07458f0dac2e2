import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errorReplies } from '../../contract/common.js';
import { CountBody, CountReply, ExactMatchBody, HybridSearchBody, TokenMatchBody } from '../../contract/search.js';
import { DatabasePathParams } from '../../contract/tables.js';
import { negotiate, ROW_ENCODINGS, sendRows } from '../encode.js';
import { withWorker } from '../guard.js';

const errors = errorReplies(404, 406, 409, 503);
const tags = ['Search'];

export const searchRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { ctx } = app;

  app.post(
    '/v1/hybrid_search/:database',
    {
      schema: {
        tags,
        summary: 'BM25 and vector search fused by reciprocal rank',
        params: DatabasePathParams,
        body: HybridSearchBody,
        response: errors,
      },
    },
    async (req, reply) => {
      const encoding = negotiate(req, ROW_ENCODINGS);
      const { table_name, ...search } = req.body;
      const result = await withWorker(ctx, req.accountId, req.params.database, (w) => w.search(table_name, search));
      return sendRows(reply, encoding, result);
    },
  );

  app.post(
    '/v1/count/:database',
    {
      schema: {
        tags,
        summary: 'Exact number of rows matching a full-text query',
        params: DatabasePathParams,
        body: CountBody,
        response: { 200: CountReply, ...errors },
      },
    },
    async (req) => {
      const { table_name, ...match } = req.body;
      return { count: await withWorker(ctx, req.accountId, req.params.database, (w) => w.count(table_name, match)) };
    },
  );

  app.post(
    '/v1/token_match/:database',
    {
      schema: {
        tags,
        summary: 'The rows count would count, in row order',
        params: DatabasePathParams,
        body: TokenMatchBody,
        response: errors,
      },
    },
    async (req, reply) => {
      const encoding = negotiate(req, ROW_ENCODINGS);
      const { table_name, ...match } = req.body;
      const result = await withWorker(ctx, req.accountId, req.params.database, (w) => w.tokenMatch(table_name, match));
      return sendRows(reply, encoding, result);
    },
  );

  app.post(
    '/v1/exact_match/:database',
    {
      schema: {
        tags,
        summary: 'Rows whose column equals a value, in row order',
        params: DatabasePathParams,
        body: ExactMatchBody,
        response: errors,
      },
    },
    async (req, reply) => {
      const encoding = negotiate(req, ROW_ENCODINGS);
      const { table_name, ...match } = req.body;
      const result = await withWorker(ctx, req.accountId, req.params.database, (w) => w.exactMatch(table_name, match));
      return sendRows(reply, encoding, result);
    },
  );
};
