import type { TableHandle } from '../tables/tables.js';
import type { Receipt } from './request.js';

/**
 * How a search reads beside its indexes: its receipt, for each leg whether it reads only what its index covers,
 * and for each whether its index's own statistics still describe the live rows (no row outside it, no deletion
 * it still counts): a text leg's BM25 scores are then Lance's, else the service's (`engine/text/bm25.ts`).
 */
export interface Freshness {
  receipt: Receipt;
  /** For each leg, whether its index exists (a leg without one scans its column exactly). */
  indexed: boolean[];
  /** For each leg, the rows it reads outside its index. */
  outside: number[];
  indexedOnly: boolean[];
  exactIndex: boolean[];
  /** Whether the full-text indexes' statistics still count rows deleted since (`UnindexedRows.countsDeleted`). */
  countsDeleted: boolean;
}

/**
 * The version a search starts from and what its legs (each the declaration key of the index it reads through, or
 * undefined for a leg that does not run) read outside their indexes there. Under `eventual`, a leg whose index is
 * built reads only what that covers, and so nothing outside it; one whose index upkeep has not built yet scans as
 * ever (docs/api.md).
 */
export async function freshnessOf(
  table: TableHandle,
  legs: readonly (string | undefined)[],
  eventual: boolean,
): Promise<Freshness> {
  const version = await table.rows.version();
  const unindexed = await table.unindexed.at(version);
  const indexedOnly = legs.map((key) => eventual && key !== undefined && unindexed.indexed.has(key));
  const outside = legs.map((key, i) => (key === undefined || indexedOnly[i] ? 0 : (unindexed.rows.get(key) ?? 0)));
  const countsDeleted = table.unindexed.countsDeleted(unindexed);
  const exactIndex = legs.map((key) => key !== undefined && unindexed.rows.get(key) === 0 && !countsDeleted);
  const indexed = legs.map((key) => key !== undefined && unindexed.indexed.has(key));
  return {
    receipt: { version, freshRows: Math.max(0, ...outside) },
    indexed,
    outside,
    indexedOnly,
    exactIndex,
    countsDeleted,
  };
}
