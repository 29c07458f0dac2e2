import type { QueryExecutionOptions } from '@lancedb/lancedb';

/**
 * How the service's Lance reads run (all but a SQL load's, which reads vectors wholesale: `sql-source.ts`). Lance
 * scans in batches of up to this many rows, not its default of 1,024: scans that a predicate or filter drives
 * then read and filter far fewer, larger batches. At 1.32M rows (16,384 against 1,024): `id = 777` 7.3 ms against
 * 16.7; a predicate matching 10% 20 ms against 159; a search leg with that as its filter 13.3 ms (text) and
 * 21.6 ms (vector) against 26.1 and 39.5; counting 91k full-text hits 36 ms against 52. Search legs without a
 * filter, and their scan of rows no index covers yet, measured the same.
 */
export const READ_OPTIONS: Partial<QueryExecutionOptions> = { maxBatchLength: 16_384 };
