import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { DatabaseParams, ErrorBody, errorReplies } from '../../contract/common.js';
import {
  DatabaseList,
  DatabaseSummary,
  DeleteDatabaseQuery,
  DeleteDatabaseReply,
  RegisterDatabaseBody,
  VerifyReply,
} from '../../contract/databases.js';
import { summary } from '../../control/databases.js';

const errors = errorReplies(404, 409, 422, 503);

export const databaseRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { databases } = app.ctx;

  app.post(
    '/v1/databases',
    {
      schema: {
        tags: ['Databases'],
        summary: 'Register a database bound to a bucket',
        body: RegisterDatabaseBody,
        response: { 201: DatabaseSummary, ...errors },
      },
    },
    async (req, reply) => {
      const { db, externalId } = await databases.register(req.accountId, req.body);
      return reply.status(201).send(summary(db, externalId));
    },
  );

  app.get(
    '/v1/databases',
    { schema: { tags: ['Databases'], summary: 'List databases', response: { 200: DatabaseList, 401: ErrorBody } } },
    async (req) => {
      const externalId = await databases.externalId(req.accountId);
      return { databases: (await databases.list(req.accountId)).map((db) => summary(db, externalId)) };
    },
  );

  app.post(
    '/v1/databases/:name/storage/verify',
    {
      schema: {
        tags: ['Databases'],
        summary: 'Prove the storage grant end to end',
        params: DatabaseParams,
        response: { 200: VerifyReply, ...errors },
      },
    },
    async (req) => {
      const { db, checks } = await databases.verify(req.accountId, req.params.name);
      return { name: db.name, state: db.state, checks };
    },
  );

  app.delete(
    '/v1/databases/:name',
    {
      schema: {
        tags: ['Databases'],
        summary: 'Delete a database (purge=true also deletes its objects)',
        params: DatabaseParams,
        querystring: DeleteDatabaseQuery,
        response: { 200: DeleteDatabaseReply, ...errors },
      },
    },
    async (req) => databases.delete(req.accountId, req.params.name, req.query.purge === 'true'),
  );
};
