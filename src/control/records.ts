import type { DatabaseState } from '../contract/databases.js';
import type { TableRecord } from '../engine/tables/catalog.js';
import { Conflict } from '../errors.js';
import type { Binding } from '../storage/binding.js';
import type { ApiKeyRecord, DatabaseRecord } from './store.js';

// Rows as both stores read them (PostgreSQL answers BIGINT columns as strings), and the records they make.

/** Milliseconds as a store answers them. */
type Ms = number | string;

export interface KeyRow {
  id: string;
  account_id: string;
  hash: string;
  created_ms: Ms;
  revoked_ms: Ms | null;
}

export interface DatabaseRow {
  id: string;
  account_id: string;
  name: string;
  created_ms: Ms;
  state: DatabaseState;
  binding: string;
  last_error: string | null;
}

export interface TableRow {
  database_id: string;
  name: string;
  table_id: string;
  schema_ipc: string;
  indexes: string;
  created_ms: Ms;
  state: TableRecord['state'];
  upkeep_ms?: Ms | null;
}

export const keyFromRow = (row: KeyRow): ApiKeyRecord => ({
  id: row.id,
  accountId: row.account_id,
  hash: row.hash,
  createdMs: Number(row.created_ms),
  revokedMs: row.revoked_ms === null ? null : Number(row.revoked_ms),
});

export const databaseFromRow = (row: DatabaseRow): DatabaseRecord => ({
  id: row.id,
  accountId: row.account_id,
  name: row.name,
  createdMs: Number(row.created_ms),
  state: row.state,
  binding: JSON.parse(row.binding) as Binding,
  lastError: row.last_error,
});

export const tableFromRow = (row: TableRow): TableRecord => ({
  databaseId: row.database_id,
  name: row.name,
  tableId: row.table_id,
  schemaIpc: row.schema_ipc,
  indexes: row.indexes,
  createdMs: Number(row.created_ms),
  state: row.state,
  ...(row.upkeep_ms === null || row.upkeep_ms === undefined ? {} : { upkeepMs: Number(row.upkeep_ms) }),
});

/** The refusal of a table whose name the database already has. */
export const tableExists = (name: string): Conflict =>
  new Conflict(`table "${name}" already exists`, { code: 'table_exists' });
