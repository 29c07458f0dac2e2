import type { RecordBatch, Schema } from 'apache-arrow';
import type { RowsBody } from './rows.js';
import type { RowCounts } from './writes.js';

export type { RowCounts } from './writes.js';

/**
 * A write, as data: one name per operation, the same in the route (`/v1/append`, `/v1/update`, `/v1/upsert`,
 * `/v1/delete`), the engine, the fingerprint of its idempotency key and the logs.
 */
export type WriteCommand =
  | { kind: 'append'; table: string; rows: RowsBody }
  | { kind: 'update'; table: string; predicate: string | undefined; rows: RowsBody }
  | { kind: 'upsert'; table: string; rows: RowsBody }
  | { kind: 'delete'; table: string; predicate: string | undefined };

/** What an upsert did: rows whose key was new, and rows that replaced the row holding their key. */
export interface Upserted {
  inserted: number;
  updated: number;
}

export type WriteKind = WriteCommand['kind'];

/** Rows a write stored (the user's columns), with their schema, and their IPC stream when the body was exactly it. */
export interface StoredRows {
  rows: RecordBatch[];
  schema: Schema;
  stream?: Uint8Array;
}

/**
 * What a write answers: the table version its commit made (or the version it is placed at), the counts of an
 * update or delete (an upsert's own), and the rows as stored for an append or update whose caller asked for them.
 */
export interface WriteAnswer {
  version: number;
  counts?: RowCounts;
  upserted?: Upserted;
  stored?: StoredRows;
}

/** A write's answer, and whether it repeats an earlier request's instead of writing (`Idempotent-Replayed`). */
export interface WriteOutcome extends WriteAnswer {
  replayed: boolean;
}

/** How a write is asked for beyond the command: its idempotency key, and whether its rows are answered. */
export interface WriteOptions {
  /** The request's `Idempotency-Key`, with the account it belongs to. */
  key?: { accountId: string; key: string };
  /** Whether the caller answers the rows as stored (a replayed append or update then makes them again). */
  echo: boolean;
}
