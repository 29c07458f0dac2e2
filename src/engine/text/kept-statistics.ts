import type { Analyzer } from '../indexes/registry.js';
import { TimeSlice } from '../time-slice.js';

/**
 * BM25's statistics of a table's full-text columns at one version, kept in the database's bucket beside the table,
 * so that a node that restarts (or a node that never built them) starts from them and follows the table from their
 * version rather than tokenizing every row (14 s at 1M rows). The bucket is the customer's: what is read back is
 * checked like any other input, and anything amiss means a build from every row instead.
 */

/** One column's counts: rows with tokens, their tokens, and rows per term. */
export interface ColumnCounts {
  docs: number;
  tokens: number;
  rowsWith: ReadonlyMap<string, number>;
}

export interface KeptStatistics {
  version: number;
  columns: Map<string, ColumnCounts>;
}

/** The name they are kept under, beside the table (`RowStore.aside`). */
export const KEPT_STATISTICS = 'bm25-statistics.ndjson';

/**
 * The most terms kept, over all columns: copying the counts to write them holds the event loop (~1 s a million terms
 * here), so a larger vocabulary is not kept and a node without statistics builds them from every row.
 */
export const MAX_KEPT_TERMS = 200_000;

/** The largest kept statistics read back, and the longest line: a file past them is none. */
export const MAX_KEPT_BYTES = 32 * 1024 * 1024;
const MAX_LINE_CHARS = 4 * 1024 * 1024;

/** Format of the header line, and terms per line after it. */
const FORMAT = 1;
const TERMS_PER_LINE = 4096;

interface Header {
  strata_bm25_statistics: number;
  version: number;
  columns: { column: string; analyzer: Analyzer; docs: number; tokens: number; terms: number }[];
}

/**
 * Lines of JSON: a header naming the version and each column (its analyzer, counts and number of terms), then each
 * column's terms and counts, `TERMS_PER_LINE` a line, in the header's order.
 */
export async function encodeKept(
  kept: KeptStatistics,
  analyzers: ReadonlyMap<string, Analyzer>,
  slice = new TimeSlice(),
): Promise<Uint8Array> {
  const columns = [...kept.columns];
  const header: Header = {
    strata_bm25_statistics: FORMAT,
    version: kept.version,
    columns: columns.map(([column, counts]) => ({
      column,
      analyzer: analyzers.get(column) as Analyzer,
      docs: counts.docs,
      tokens: counts.tokens,
      terms: counts.rowsWith.size,
    })),
  };
  const lines = [JSON.stringify(header)];
  for (const [, counts] of columns) {
    let line: [string, number][] = [];
    for (const entry of counts.rowsWith) {
      line.push(entry);
      if (line.length < TERMS_PER_LINE) continue;
      lines.push(JSON.stringify(line));
      line = [];
      await slice.pause();
    }
    if (line.length > 0) lines.push(JSON.stringify(line));
  }
  return new TextEncoder().encode(`${lines.join('\n')}\n`);
}

/**
 * The statistics `bytes` hold, when they are whole and of exactly these columns with these analyzers; undefined for
 * anything else (another format, a column or analyzer changed since, a torn or altered file).
 */
export async function decodeKept(
  bytes: Uint8Array,
  analyzers: ReadonlyMap<string, Analyzer>,
  slice = new TimeSlice(),
): Promise<KeptStatistics | undefined> {
  if (bytes.byteLength > MAX_KEPT_BYTES) return undefined;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
  // Lines are taken one at a time, each bounded: a file of nothing but newlines must not become an array of them.
  let from = 0;
  const nextLine = (): string | undefined => {
    const end = text.indexOf('\n', from);
    if (end < 0 || end - from > MAX_LINE_CHARS) return undefined;
    const line = text.slice(from, end);
    from = end + 1;
    return line;
  };
  const header = parsed(nextLine() ?? '');
  if (!isHeader(header) || header.columns.length !== analyzers.size) return undefined;
  if (header.columns.reduce((n, c) => n + c.terms, 0) > MAX_KEPT_TERMS) return undefined;
  const columns = new Map<string, ColumnCounts>();
  for (const column of header.columns) {
    const analyzer = analyzers.get(column.column);
    if (analyzer === undefined || JSON.stringify(analyzer) !== JSON.stringify(column.analyzer)) return undefined;
    if (columns.has(column.column)) return undefined;
    const rowsWith = new Map<string, number>();
    while (rowsWith.size < column.terms) {
      await slice.pause();
      const line = parsed(nextLine() ?? '');
      if (!Array.isArray(line) || line.length === 0 || line.length > TERMS_PER_LINE) return undefined;
      for (const entry of line) {
        if (!Array.isArray(entry) || entry.length !== 2) return undefined;
        const [term, n] = entry as unknown[];
        if (typeof term !== 'string' || !isCount(n) || n === 0 || n > column.docs || rowsWith.has(term))
          return undefined;
        rowsWith.set(term, n);
      }
    }
    if (rowsWith.size !== column.terms) return undefined;
    columns.set(column.column, { docs: column.docs, tokens: column.tokens, rowsWith });
  }
  // Nothing may follow the last column's terms.
  if (from !== text.length) return undefined;
  return { version: header.version, columns };
}

function parsed(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

const isCount = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;

function isHeader(value: unknown): value is Header {
  if (typeof value !== 'object' || value === null) return false;
  const header = value as Partial<Header>;
  return (
    header.strata_bm25_statistics === FORMAT &&
    isCount(header.version) &&
    Array.isArray(header.columns) &&
    header.columns.every(isColumnHeader)
  );
}

function isColumnHeader(value: unknown): value is Header['columns'][number] {
  if (typeof value !== 'object' || value === null) return false;
  const column = value as Partial<Header['columns'][number]>;
  // Every document holds a token.
  return (
    typeof column.column === 'string' &&
    isCount(column.docs) &&
    isCount(column.tokens) &&
    isCount(column.terms) &&
    column.docs <= column.tokens
  );
}
