import type { TSchema } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DatabasePathParams } from '../../contract/tables.js';
import type { Receipt } from '../../engine/search/request.js';
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

/**
 * Answers a read with rows, as Arrow or JSON as the request's Accept header asks, read by the database's worker; a
 * search's receipt goes with them.
 */
export async function answerRows(
  ctx: AppContext,
  req: FastifyRequest,
  reply: FastifyReply,
  database: string,
  read: (worker: DatabaseWorker) => Promise<RowsReply & { receipt?: Receipt }>,
): Promise<FastifyReply> {
  const encoding = negotiate(req, ROW_ENCODINGS);
  const result = await withWorker(ctx, req.accountId, database, read);
  if (result.receipt !== undefined) withReceipt(reply, result.receipt);
  return sendRows(reply, encoding, result);
}

/**
 * A search's freshness receipt (docs/api.md): the table version it started from, and the most rows a leg read
 * outside its index.
 */
export function withReceipt(reply: FastifyReply, receipt: Receipt): FastifyReply {
  return reply
    .header('x-strata-table-version', String(receipt.version))
    .header('x-strata-fresh-rows', String(receipt.freshRows));
}
