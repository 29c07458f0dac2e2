import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorReplies } from '../../contract/common.js';
import {
  Appended,
  AppendHeaders,
  AppendQuery,
  ARROW_STREAM,
  PredicateQuery,
  RowCounts,
  RowsBody,
  RowsBytes,
  WriteHeaders,
} from '../../contract/rows.js';
import { DatabasePathParams } from '../../contract/tables.js';
import type { RowsBody as Rows } from '../../engine/writes/rows.js';
import type { RowCounts as Counts, WriteResult } from '../../engine/writes/writes.js';
import { BadRequest } from '../../errors.js';
import { JSON_TYPE, negotiate, PREFERENCE_APPLIED, prefersMinimal, ROW_ENCODINGS, sendRows } from '../encode.js';
import { withWriter } from '../guard.js';
import { idempotently, REPLAYED_HEADER, type StoredAnswer } from '../idempotency.js';

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

/** The counts of a replayed write that recorded none (it matched nothing). */
const NO_COUNTS: Counts = { matched: 0, n_tombstoned: 0, n_not_found: 0 };

const countsOf = (result: Counts): Counts => ({
  matched: result.matched,
  n_tombstoned: result.n_tombstoned,
  n_not_found: result.n_not_found,
});

/** An earlier request's answer, repeated: its version, with the rows made again from the same body. */
async function replayed(
  reply: FastifyReply,
  answer: StoredAnswer,
  asStored: Promise<WriteResult>,
): Promise<WriteResult> {
  void reply.header(REPLAYED_HEADER, 'true');
  return { ...(await asStored), version: answer.version };
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
        summary: 'Append rows atomically; answers the rows as stored, or nothing with Prefer: return=minimal',
        params: DatabasePathParams,
        querystring: AppendQuery,
        headers: AppendHeaders,
        body: RowsBytes,
        response: { 204: Appended, ...errors },
      },
      config: documented,
    },
    async (req, reply) => {
      // Answered without the rows, Accept does not matter: a loader need not take back what it sent.
      const encoding = prefersMinimal(req) ? undefined : negotiate(req, ROW_ENCODINGS);
      const { table } = req.query;
      const body = rowsOf(req);
      const result = await withWriter(ctx, req.accountId, req.params.database, async (worker) => {
        const outcome = await idempotently(ctx, req, worker.ref.id, {
          fingerprint: ['append', table, undefined],
          run: (hooks) => worker.append(table, body, hooks),
          answer: (written) => ({ version: written.version }),
          recover: (intent) => worker.recovered(table, intent, body),
        });
        if (outcome.kind === 'fresh') return outcome.result;
        if (encoding === undefined) {
          void reply.header(REPLAYED_HEADER, 'true');
          return { version: outcome.answer.version };
        }
        return replayed(reply, outcome.answer, worker.asStored(table, body));
      });
      void reply.header('x-strata-table-version', String(result.version));
      if (encoding === undefined || !('rows' in result)) {
        return reply.header(PREFERENCE_APPLIED, 'return=minimal').code(204).send(null);
      }
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
        headers: WriteHeaders,
        body: RowsBytes,
        response: { 200: RowCounts, ...errors },
      },
      config: documented,
    },
    async (req, reply) => {
      const encoding = negotiate(req, [JSON_TYPE, ARROW_STREAM]);
      const { table, predicate } = req.query;
      const body = rowsOf(req);
      const result = await withWriter(ctx, req.accountId, req.params.database, async (worker) => {
        const outcome = await idempotently(ctx, req, worker.ref.id, {
          fingerprint: ['update', table, predicate],
          run: (hooks) => worker.replace(table, predicate, body, hooks),
          answer: (written) => ({ version: written.version, counts: countsOf(written) }),
          recover: (intent) => worker.recovered(table, intent, body),
        });
        if (outcome.kind === 'fresh') return outcome.result;
        const rows = await replayed(reply, outcome.answer, worker.asStored(table, body));
        return { ...rows, ...(outcome.answer.counts ?? NO_COUNTS) };
      });
      const counts = countsOf(result);
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
        headers: WriteHeaders,
        response: { 200: RowCounts, ...errors },
      },
    },
    async (req, reply) => {
      const { table, predicate } = req.query;
      const result = await withWriter(ctx, req.accountId, req.params.database, async (worker) => {
        const outcome = await idempotently(ctx, req, worker.ref.id, {
          fingerprint: ['delete', table, predicate],
          run: (hooks) => worker.remove(table, predicate, hooks),
          answer: (removed) => ({ version: removed.version, counts: countsOf(removed) }),
          recover: (intent) => worker.recovered(table, intent, undefined),
        });
        if (outcome.kind === 'fresh') return outcome.result;
        void reply.header(REPLAYED_HEADER, 'true');
        return {
          version: outcome.answer.version,
          ...(outcome.answer.counts ?? NO_COUNTS),
        };
      });
      void reply.header('x-strata-table-version', String(result.version));
      return countsOf(result);
    },
  );
};
