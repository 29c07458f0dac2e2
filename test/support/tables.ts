import { join } from 'node:path';
import { connect } from '@lancedb/lancedb';
import type { RecordBatch, Table } from 'apache-arrow';
import { expect } from 'vitest';
import { arrow } from '../../src/arrow/arrow.js';
import { type JsonValue, rowsToJson } from '../../src/arrow/to-json.js';
import { ROW_KEY } from '../../src/engine/tables/schema.js';
import { activeLocalDatabase, type Client, type Reply, type TestServer } from './strata.js';

export type Row = Record<string, JsonValue>;

export const ARROW = 'application/vnd.apache.arrow.stream';

/** An HTTP client for the tables and rows of one database. */
export function tablesOf(api: Client, database: string) {
  const json = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    api.request(method, path, body, headers);
  const q = (table: string, predicate?: string) =>
    `?table=${encodeURIComponent(table)}${predicate === undefined ? '' : `&predicate=${encodeURIComponent(predicate)}`}`;
  return {
    create: (body: Record<string, unknown>) => json('POST', `/v1/create_table/${database}`, body),
    drop: (table_name: string, purge?: boolean) =>
      json('POST', `/v1/drop_table/${database}`, purge === undefined ? { table_name } : { table_name, purge }),
    schema: (table_name: string, encoding?: string) =>
      json('POST', `/v1/schema/${database}`, encoding === undefined ? { table_name } : { table_name, encoding }),
    list: () =>
      api.get<{ tables: { table_name: string; num_rows: number; last_upkeep_ms: number | null }[] }>(
        `/v1/list_tables/${database}`,
      ),
    append: (table: string, data: unknown[]) =>
      json('POST', `/v1/append/${database}${q(table)}`, { data }, { accept: 'application/json' }) as Promise<
        Reply<{ data: Row[]; error?: string; code?: string }>
      >,
    appendArrow: async (table: string, ipc: Uint8Array, accept = 'application/json') =>
      arrowPost(api, `/v1/append/${database}${q(table)}`, ipc, accept),
    update: (table: string, predicate: string | undefined, data: unknown[], accept = 'application/json') =>
      json('POST', `/v1/update/${database}${q(table, predicate)}`, { data }, { accept }),
    upsert: (table: string, data: unknown[], headers: Record<string, string> = {}) =>
      json('POST', `/v1/upsert/${database}${q(table)}`, { data }, headers) as Promise<
        Reply<{ inserted: number; updated: number; error?: string; code?: string }>
      >,
    remove: (table: string, predicate?: string) => json('POST', `/v1/delete/${database}${q(table, predicate)}`),
    count: async (table: string) =>
      (
        await api.get<{ tables: { table_name: string; num_rows: number }[] }>(`/v1/list_tables/${database}`)
      ).json.tables.find((t) => t.table_name === table)?.num_rows,
  };
}

/**
 * Registers and verifies the local database `database` and creates `table` in it: `id` (i64) and `body` (utf8)
 * with a full-text index. Returns the database's table client.
 */
export async function textTable(api: Client, database: string, table: string) {
  await activeLocalDatabase(api, database);
  const tables = tablesOf(api, database);
  await tables.create({
    table_name: table,
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'body', type: 'utf8' },
    ],
    indexes: { fts: ['body'] },
  });
  return tables;
}

async function arrowPost(api: Client, path: string, ipc: Uint8Array, accept: string) {
  return api.request('POST', path, ipc, { 'content-type': ARROW, accept });
}

/** Arrow IPC stream bytes of a table. */
export const ipcOf = (table: Table | RecordBatch[]): Uint8Array =>
  arrow.tableToIPC(Array.isArray(table) ? new arrow.Table(table) : table, 'stream');

/**
 * Every row of a table in row order, read straight from its Lance dataset in the bucket, as a customer
 * could: the test does not trust the service to report its own writes.
 */
export async function readTable(strata: TestServer, account: string, database: string, table: string): Promise<Row[]> {
  const { lance, close } = await openDataset(strata, account, database, table);
  try {
    const rows = rowsToJson(await lance.query().toArrow());
    rows.sort((a, b) => Number(a[ROW_KEY]) - Number(b[ROW_KEY]));
    for (const row of rows) delete row[ROW_KEY];
    return rows;
  } finally {
    close();
  }
}

/** A table's Lance dataset in the bucket, opened as any Lance client would. */
export async function openDataset(strata: TestServer, account: string, database: string, table: string) {
  const store = strata.app.ctx.store;
  const acct = await store.ensureAccount(account);
  const db = await store.findDatabase(acct.id, database);
  if (db === undefined || db.binding.provider !== 'local') throw new Error(`no local database ${database}`);
  const record = await store.findTable(db.id, table);
  if (record === undefined) throw new Error(`no table ${table}`);
  const dir = join(
    strata.dataDir,
    'buckets',
    db.binding.bucket,
    ...db.binding.prefix.split('/').filter(Boolean),
    'tables',
  );
  const connection = await connect(dir);
  const lance = await connection.openTable(record.tableId);
  return {
    lance,
    close: () => {
      lance.close();
      connection.close();
    },
  };
}

/**
 * Each query answered the same rows in the same order, with the same `_bm25` (relative 1e-6: Lance's are 32-bit
 * floats), before and after something that must not change a search (a fold, say).
 */
export function expectSameHits(
  after: readonly { id: number; _bm25: number }[][],
  before: readonly { id: number; _bm25: number }[][],
  queries: readonly unknown[],
): void {
  after.forEach((rows, i) => {
    const was = before[i] ?? [];
    expect(
      rows.map((r) => r.id),
      JSON.stringify(queries[i]),
    ).toEqual(was.map((r) => r.id));
    rows.forEach((r, j) => {
      expect(Math.abs(r._bm25 - (was[j]?._bm25 as number)) / r._bm25).toBeLessThan(1e-6);
    });
  });
}
