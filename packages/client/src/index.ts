export type { EncodedRows, RowsSource } from './batches.js';
export type { AppendOptions, ReadOptions, StrataOptions } from './client.js';
export { Database, Databases, Strata, StrataTable } from './client.js';
export { type ClientErrorCode, StrataError } from './errors.js';
export type { RetryOptions } from './http.js';
export type * from './types.js';
