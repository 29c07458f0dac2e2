export type { EncodedRows, RowsSource } from './batches.js';
export type { AppendOptions, ReadOptions, SearchAnswer, StrataAdminOptions, StrataOptions } from './client.js';
export { Database, Databases, Strata, StrataAdmin, StrataTable } from './client.js';
export { type ClientErrorCode, StrataError } from './errors.js';
export type { RetryOptions } from './http.js';
export type * from './types.js';
export {
  ANALYZERS,
  DATABASE_STATES,
  LANGUAGES,
  METRIC_ALIASES,
  METRICS,
  SCALAR_INDEX_TYPES,
  SCALAR_TYPE_ALIASES,
  SCALAR_TYPES,
  TEXT_OPERATORS,
  TOKENIZERS,
  VERIFY_STEPS,
} from './types.js';
