import type { TSchema } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DatabasePathParams } from '../../contract/tables.js';
import type { DatabaseWorker } from '../../engine/workers/worker.js';
import type { AppContext } from '../context.js';
import { negotiate, ROW_ENCODINGS, type RowsReply, sendRows } from '../encode.js';
import { withWorker } from '../guard.js';

/** The schema of a POST on one database (`/v1/…/:database`) with a JSON body. */
export function onDatabase<Body extends TSchema, Response extends object>(
  tags: string[],
  summary: string,
  body: Body,
  response: Response,
) {
  return { schema: { tags, summary, params: DatabasePathParams, body, response } };
}

/** Answers a read with rows, as Arrow or JSON as the request's Accept header asks, read by the database's worker. */
export async function answerRows(
  ctx: AppContext,
  req: FastifyRequest,
  reply: FastifyReply,
  database: string,
  read: (worker: DatabaseWorker) => Promise<RowsReply>,
): Promise<FastifyReply> {
  const encoding = negotiate(req, ROW_ENCODINGS);
  return sendRows(reply, encoding, await withWorker(ctx, req.accountId, database, read));
}
