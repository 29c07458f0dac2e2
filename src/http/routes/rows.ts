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
  Upserted,
  WriteHeaders,
} from '../../contract/rows.js';
import { DatabasePathParams } from '../../contract/tables.js';
import type { RowCounts as Counts, WriteOutcome } from '../../engine/writes/command.js';
import type { RowsBody as Rows } from '../../engine/writes/rows.js';
import { BadRequest } from '../../errors.js';
import { JSON_TYPE, negotiate, PREFERENCE_APPLIED, prefersMinimal, ROW_ENCODINGS, sendRows } from '../encode.js';
import { withWriter } from '../guard.js';
import { idempotencyKeyOf, REPLAYED_HEADER } from '../idempotency.js';

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

const NO_COUNTS: Counts = { matched: 0, n_tombstoned: 0, n_not_found: 0 };

/** The counts of an update or delete, as its reply shows them. */
const countsOf = (outcome: WriteOutcome): Counts => {
  const { matched, n_tombstoned, n_not_found } = outcome.counts ?? NO_COUNTS;
  return { matched, n_tombstoned, n_not_found };
};

/** The headers every write answers with: the table version it made, and whether it repeats an earlier answer. */
function headed(reply: FastifyReply, outcome: WriteOutcome): void {
  void reply.header('x-strata-table-version', String(outcome.version));
  if (outcome.replayed) void reply.header(REPLAYED_HEADER, 'true');
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
      const rows = rowsOf(req);
      const outcome = await withWriter(ctx, req.accountId, req.params.database, (worker) =>
        worker.write({ kind: 'append', table, rows }, { key: idempotencyKeyOf(req), echo: encoding !== undefined }),
      );
      headed(reply, outcome);
      if (encoding === undefined || outcome.stored === undefined) {
        return reply.header(PREFERENCE_APPLIED, 'return=minimal').code(204).send(null);
      }
      return sendRows(reply, encoding, outcome.stored, 'written');
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
      const rows = rowsOf(req);
      const outcome = await withWriter(ctx, req.accountId, req.params.database, (worker) =>
        worker.write(
          { kind: 'update', table, predicate, rows },
          { key: idempotencyKeyOf(req), echo: encoding !== JSON_TYPE },
        ),
      );
      headed(reply, outcome);
      const counts = countsOf(outcome);
      if (encoding === JSON_TYPE || outcome.stored === undefined) return counts;
      void reply.headers({
        'x-strata-matched': String(counts.matched),
        'x-strata-tombstoned': String(counts.n_tombstoned),
        'x-strata-not-found': String(counts.n_not_found),
      });
      return sendRows(reply, encoding, outcome.stored, 'written');
    },
  );

  app.post(
    '/v1/upsert/:database',
    {
      schema: {
        tags,
        summary:
          "Write rows by the table's primary key in one atomic commit: a row whose key exists replaces it, the others are inserted",
        params: DatabasePathParams,
        querystring: AppendQuery,
        headers: WriteHeaders,
        body: RowsBytes,
        response: { 200: Upserted, ...errors },
      },
      config: documented,
    },
    async (req, reply) => {
      const { table } = req.query;
      const rows = rowsOf(req);
      const outcome = await withWriter(ctx, req.accountId, req.params.database, (worker) =>
        worker.write({ kind: 'upsert', table, rows }, { key: idempotencyKeyOf(req), echo: false }),
      );
      headed(reply, outcome);
      return outcome.upserted ?? { inserted: 0, updated: 0 };
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
      const outcome = await withWriter(ctx, req.accountId, req.params.database, (worker) =>
        worker.write({ kind: 'delete', table, predicate }, { key: idempotencyKeyOf(req), echo: false }),
      );
      headed(reply, outcome);
      return countsOf(outcome);
    },
  );
};
