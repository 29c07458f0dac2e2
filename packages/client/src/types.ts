// The request and reply types of the HTTP API (the server's OpenAPI document at /v1/openapi.json). Each set of
// words the service takes is a constant as well as a type, so that callers can list or check them, and so that
// test/client-types.test.ts can hold every one against the service's own validation.

export const DATABASE_STATES = ['unverified', 'verify_failed', 'activating', 'active'] as const;
export type DatabaseState = (typeof DATABASE_STATES)[number];

/** The metrics of a vector index, as the service answers them (docs/api.md). */
export const METRICS = ['cosine', 'l2sq', 'negdot'] as const;
export type Metric = (typeof METRICS)[number];
/** Other spellings the service takes for a metric in a declaration, and the metric each means. */
export const METRIC_ALIASES = { l2: 'l2sq', dot: 'negdot' } as const satisfies Readonly<Record<string, Metric>>;
/** A metric as a declaration may spell it. */
export type MetricInput = Metric | keyof typeof METRIC_ALIASES;

/** How a full-text index splits and folds text (docs/api.md); `ascii_lower` by default. */
/** The languages whose analyzer stems words and drops stop words (each is an analyzer's name too). */
export const LANGUAGES = [
  'arabic',
  'danish',
  'dutch',
  'english',
  'finnish',
  'french',
  'german',
  'greek',
  'hungarian',
  'italian',
  'norwegian',
  'portuguese',
  'romanian',
  'russian',
  'spanish',
  'swedish',
  'tamil',
  'turkish',
] as const;
export type Language = (typeof LANGUAGES)[number];
/** The analyzers by name: `ascii_lower`, `standard`, and each language (stemmed, with its stop words). */
export const ANALYZERS = ['ascii_lower', 'standard', ...LANGUAGES] as const;
export type AnalyzerName = (typeof ANALYZERS)[number];
/** How an analyzer splits text into words. */
export const TOKENIZERS = ['simple', 'icu'] as const;
/** An analyzer spelled out; members left out take their defaults (simple, lowercase, no folding, no stem, none dropped). */
export interface AnalyzerSettings {
  tokenizer?: (typeof TOKENIZERS)[number];
  lowercase?: boolean;
  ascii_folding?: boolean;
  stem?: Language | null;
  stop_words?: Language | null;
}
/** An analyzer by name or spelled out; the service answers the object form with every member. */
export type Analyzer = AnalyzerName | AnalyzerSettings;

/** The types of a column that are one value, as the service answers them. */
export const SCALAR_TYPES = [
  'bool',
  'i8',
  'i16',
  'i32',
  'i64',
  'u8',
  'u16',
  'u32',
  'u64',
  'f16',
  'f32',
  'f64',
  'utf8',
  'large_utf8',
  'binary',
  'large_binary',
  'date32',
  'timestamp_ms',
  'timestamp_us',
] as const;
export type ScalarType = (typeof SCALAR_TYPES)[number];
/** Other spellings the service takes for a scalar type in a schema, and the type each means. */
export const SCALAR_TYPE_ALIASES = { string: 'utf8' } as const satisfies Readonly<Record<string, ScalarType>>;
export type ScalarTypeInput = ScalarType | keyof typeof SCALAR_TYPE_ALIASES;
/** A column's type in the JSON schema form: a scalar, `vector` (with `dim`) or `list` (with `item`). */
export type ColumnType = ScalarType | 'vector' | 'list';

export const VERIFY_STEPS = ['credentials', 'put', 'get', 'list', 'conditional_put', 'delete'] as const;
export type VerifyStep = (typeof VERIFY_STEPS)[number];

/** How the tokens of a full-text query combine; the service takes either word in any case. */
export const TEXT_OPERATORS = ['or', 'and', 'OR', 'AND'] as const;
export type TextOperator = (typeof TEXT_OPERATORS)[number];

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
  step: VerifyStep;
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
  type: ColumnType | keyof typeof SCALAR_TYPE_ALIASES;
  dim?: number | null;
  item?: ScalarTypeInput | null;
  nullable?: boolean | null;
}

/** A full-text index; `positions: true` keeps word positions, which phrases in a query (`"red kettle"`) need. */
export type FtsIndexSpec = string | { column: string; analyzer?: Analyzer | null; positions?: boolean | null };

export interface VectorIndexSpec {
  column: string;
  metric: MetricInput;
  dim?: number | null;
}

/**
 * How a scalar index finds rows: `btree` (exact values and ranges), `bitmap` (exact values of a column with few
 * distinct ones), `label_list` (list columns).
 */
export const SCALAR_INDEX_TYPES = ['btree', 'bitmap', 'label_list'] as const;
export type ScalarIndexType = (typeof SCALAR_INDEX_TYPES)[number];

/** A scalar index on a column; its kind is chosen by the column's type when not given. */
export type ScalarIndexSpec = string | { column: string; kind?: ScalarIndexType | null };

export interface IndexSpec {
  fts?: FtsIndexSpec[] | null;
  vector?: VectorIndexSpec[] | null;
  scalar?: ScalarIndexSpec[] | null;
}

/** A declared index on one column, as the service shows it beside the column. */
export type ColumnIndex =
  | { kind: 'fts'; analyzer: Analyzer; positions?: true }
  | { kind: 'vector'; metric: Metric }
  | { kind: 'scalar'; type: ScalarIndexType };

export interface ColumnDescriptor {
  name: string;
  /**
   * A `ColumnType`, or, for a column of a table created from an Arrow schema with a type the JSON form has no
   * spelling for (a struct, say), Arrow's own name of that type: so any string.
   */
  type: string;
  nullable: boolean;
  dim?: number;
  item?: ScalarType;
  /** The column's declared indexes; present only where it has some. */
  indexes?: ColumnIndex[];
  /** Present (true) on the table's primary key column only. */
  primary_key?: true;
}

export interface TableDescription {
  table_name: string;
  schema: ColumnDescriptor[];
  indexes: {
    fts: { column: string; analyzer: Analyzer; positions?: true }[];
    vector: { column: string; metric: Metric; dim: number }[];
    scalar: { column: string; type: ScalarIndexType }[];
  };
  /** The column whose values name one row each, or null. */
  primary_key: string | null;
}

export interface DropTableReply {
  table_name: string;
  purged: boolean;
  location: string;
}

export interface TableListing {
  table_name: string;
  num_rows: number;
  /** When index upkeep last committed work on the table (ms since the epoch), on any node; null before. */
  last_upkeep_ms: number | null;
}

export interface RowCounts {
  matched: number;
  n_tombstoned: number;
  n_not_found: number;
}

/** A full-text column of a text leg over several, and the weight of its BM25 score in the leg's (1 by default). */
export interface TextFieldSpec {
  field: string;
  boost?: number;
}

export interface SearchRequest {
  text?: string;
  textField?: string;
  /** Several full-text columns in place of `textField`: the leg's score is Σ boost × BM25 of each. */
  textFields?: TextFieldSpec[];
  /** The text's last word also stands for every term it begins. */
  prefix?: boolean;
  /** Each word of the text also stands for the terms within this many edits (0, 1 or 2). */
  fuzziness?: 0 | 1 | 2;
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
  /** `strong` (the default): every write answered before is searched; `eventual`: only the rows indexes cover. */
  consistency?: 'strong' | 'eventual';
  /** Adds `_explain` to every row, and the request's `explain` (`searchWithReceipt` answers it). */
  explain?: boolean;
}

/** What one leg of an explained search did (the service's docs/api.md, Explain). */
export interface LegExplain {
  read: 'index' | 'index_and_fresh' | 'index_and_scan' | 'scan';
  ms: number;
  candidates: number;
  outside_index: number;
  weight: number;
}

/** The request's part of an explained search: the version searched, the fusion constant, each leg that ran. */
export interface SearchExplain {
  version: number;
  rrf_k: number;
  legs: { text?: LegExplain; vector?: LegExplain };
}

/**
 * What a search read (docs/api.md, Freshness): the table version it started from, and the most rows any of its
 * legs read outside an index (0: the indexes answered it all).
 */
export interface Receipt {
  version: number;
  freshRows: number;
}

/** Upkeep on one node (`StrataAdmin`). */
export interface UpkeepState {
  /** The node that answered. */
  node: string;
  paused: boolean;
  /** Databases whose upkeep pass still runs on the node (a step under way still commits when it ends). */
  passes_under_way: number;
}

export interface MatchRequest {
  /** The full-text column, or several: a row matching in any of them counts once. */
  field: string | TextFieldSpec[];
  query: string;
  prefix?: boolean;
  fuzziness?: 0 | 1 | 2;
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

/** An upsert's report: an append's, with the rows whose key was new and those that replaced a row. */
export interface UpsertReport extends AppendReport {
  inserted: number;
  updated: number;
}
