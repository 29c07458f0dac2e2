// The request and reply types of the HTTP API (the server's OpenAPI document at /v1/openapi.json).

export type DatabaseState = 'unverified' | 'verify_failed' | 'activating' | 'active';

export type StorageBinding =
  | { provider: 'local'; bucket: string; prefix?: string }
  | {
      provider: 's3';
      bucket: string;
      prefix?: string;
      region?: string;
      endpoint?: string;
      role_arn?: string;
      requester_pays?: boolean;
    };

export interface RegisterDatabaseRequest {
  name: string;
  storage: StorageBinding;
}

export interface DatabaseSummary {
  name: string;
  created_ms: number;
  state: DatabaseState;
  external_id: string;
}

export interface VerifyCheck {
  step: 'credentials' | 'put' | 'get' | 'list' | 'conditional_put' | 'delete';
  ok: boolean;
  ms: number;
  note?: string;
}

export interface VerifyReply {
  name: string;
  state: DatabaseState;
  checks: VerifyCheck[];
}

export interface DeleteDatabaseReply {
  name: string;
  purged: boolean;
}

/** A column as the JSON schema form spells it: `{name: 'id', type: 'i64'}`, `{name: 'v', type: 'vector', dim: 384}`. */
export interface FieldSpec {
  name: string;
  type: string;
  dim?: number | null;
  item?: string | null;
  nullable?: boolean | null;
}

export type FtsIndexSpec = string | { column: string; analyzer?: string | null };

export interface VectorIndexSpec {
  column: string;
  metric: 'cosine' | 'l2' | 'dot' | string;
  dim?: number | null;
}

export interface IndexSpec {
  fts?: FtsIndexSpec[] | null;
  vector?: VectorIndexSpec[] | null;
}

export interface ColumnDescriptor {
  name: string;
  type: string;
  nullable: boolean;
  dim?: number;
  item?: string;
}

export interface TableDescription {
  table_name: string;
  schema: ColumnDescriptor[];
  indexes: {
    fts: { column: string; analyzer: string }[];
    vector: { column: string; metric: string; dim: number }[];
  };
}

export interface DropTableReply {
  table_name: string;
  purged: boolean;
  location: string;
}

export interface TableListing {
  table_name: string;
  num_rows: number;
}

export interface RowCounts {
  matched: number;
  n_tombstoned: number;
  n_not_found: number;
}

export type TextOperator = 'or' | 'and' | 'OR' | 'AND';

export interface SearchRequest {
  text?: string;
  textField?: string;
  vector?: number[];
  vectorField?: string;
  filter?: string;
  k: number;
  offset?: number;
  window?: number;
  operator?: TextOperator;
  projection?: string[];
  rrfK?: number;
  textWeight?: number;
  vectorWeight?: number;
}

export interface MatchRequest {
  field: string;
  query: string;
  operator?: TextOperator;
  projection?: string[];
  limit?: number;
}

export interface ExactMatchRequest {
  field: string;
  value: string;
  projection?: string[];
  limit?: number;
}

/** What an append sent: rows, requests, and how many requests the server had already applied (replayed). */
export interface AppendReport {
  rows: number;
  requests: number;
  replayed: number;
  /** The table's version after the last request. */
  version: number | undefined;
}
