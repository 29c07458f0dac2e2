import type { Table } from 'apache-arrow';
import type { Hits } from '../rows/source.js';
import type { TableHandle } from '../tables/tables.js';
import { bm25Scorer, type CollectionStatistics } from '../text/bm25.js';

/**
 * How a text leg scores its hits itself: BM25 over the live rows (docs/api.md, Freshness), for a leg whose index's
 * own statistics no longer describe them (rows outside it, or deletions it still counts).
 */
export interface TextScoring {
  field: string;
  /** The query's tokens under the column's analyzer. */
  query: string[];
  stats: CollectionStatistics;
  table: TableHandle;
}

/** The scoring of a text leg over `field` at `version`; undefined when the column's statistics cannot be had. */
export async function textScoring(
  table: TableHandle,
  version: number,
  field: string,
  query: string,
): Promise<TextScoring | undefined> {
  const stats = await table.text.at(version, field);
  if (stats === undefined) return undefined;
  const [tokens = []] = await table.text.tokensOf([query], field);
  return { field, query: tokens, stats, table };
}

/** The hits with their scores replaced by BM25 over the live rows, from the texts the leg read with them. */
export async function rescored(hits: Hits, scoring: TextScoring): Promise<Hits> {
  const texts = textColumn(hits.rows, scoring.field);
  const tokens = await scoring.table.text.tokensOf(texts, scoring.field);
  const score = bm25Scorer(scoring.query, scoring.stats, (term) => term);
  return { ...hits, values: tokens.map(score) };
}

function textColumn(rows: Table, field: string): (string | null)[] {
  const column = rows.getChild(field);
  return Array.from({ length: rows.numRows }, (_, i) => (column?.get(i) as string | null | undefined) ?? null);
}
