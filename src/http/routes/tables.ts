import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errorReplies } from '../../contract/common.js';
import {
  CreateTableBody,
  DatabasePathParams,
  DropTableBody,
  DropTableReply,
  ListTablesReply,
  SchemaBody,
  SchemaReply,
  TableDescription,
} from '../../contract/tables.js';
import { schemaToIpc } from '../../engine/tables/schema.js';
import { withWorker } from '../guard.js';

const errors = errorReplies(404, 409, 503);
const tags = ['Tables'];

export const tableRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { ctx } = app;

  app.post(
    '/v1/create_table/:database',
    {
      schema: {
        tags,
        summary: 'Create a table with a schema and optional FTS and vector indexes',
        params: DatabasePathParams,
        body: CreateTableBody,
        response: { 200: TableDescription, ...errors },
      },
    },
    async (req) => withWorker(ctx, req.accountId, req.params.database, (worker) => worker.createTable(req.body)),
  );

  app.post(
    '/v1/drop_table/:database',
    {
      schema: {
        tags,
        summary: 'Drop a table (purge=true also deletes its files)',
        params: DatabasePathParams,
        body: DropTableBody,
        response: { 200: DropTableReply, ...errors },
      },
    },
    async (req) =>
      withWorker(ctx, req.accountId, req.params.database, (worker) =>
        worker.dropTable(req.body.table_name, req.body.purge ?? false),
      ),
  );

  app.post(
    '/v1/schema/:database',
    {
      schema: {
        tags,
        summary:
          "A table's schema as column descriptors (each with its declared indexes) or a schema-only Arrow IPC stream with the index declarations",
        params: DatabasePathParams,
        body: SchemaBody,
        response: { 200: SchemaReply, ...errors },
      },
    },
    async (req) => {
      const table = await withWorker(ctx, req.accountId, req.params.database, (worker) =>
        worker.describeTable(req.body.table_name),
      );
      return req.body.encoding === 'ipc'
        ? { schema_ipc: schemaToIpc(table.arrowSchema), indexes: table.indexes, primary_key: table.primary_key }
        : table.schema;
    },
  );

  const listTables = {
    schema: {
      tags,
      summary: 'List tables with row counts',
      params: DatabasePathParams,
      response: { 200: ListTablesReply, ...errors },
    },
  };
  const list = async (req: { accountId: string; params: { database: string } }) => ({
    tables: await withWorker(ctx, req.accountId, req.params.database, (worker) => worker.listTables()),
  });
  app.post('/v1/list_tables/:database', listTables, list);
  app.get('/v1/list_tables/:database', listTables, list);
};
