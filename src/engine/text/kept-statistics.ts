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

/** The largest kept statistics read back: 16M terms or so. */
export const MAX_KEPT_BYTES = 256 * 1024 * 1024;

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
  let lines: string[];
  try {
    lines = new TextDecoder('utf-8', { fatal: true }).decode(bytes).split('\n');
  } catch {
    return undefined;
  }
  if (lines.at(-1) !== '') return undefined;
  const header = parsed(lines[0] ?? '');
  if (!isHeader(header) || header.columns.length !== analyzers.size) return undefined;
  const columns = new Map<string, ColumnCounts>();
  let at = 1;
  for (const column of header.columns) {
    const analyzer = analyzers.get(column.column);
    if (analyzer === undefined || JSON.stringify(analyzer) !== JSON.stringify(column.analyzer)) return undefined;
    if (columns.has(column.column)) return undefined;
    const rowsWith = new Map<string, number>();
    while (rowsWith.size < column.terms) {
      await slice.pause();
      const line = parsed(lines[at++] ?? '');
      if (!Array.isArray(line) || line.length === 0) return undefined;
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
  // Nothing may follow the last column's terms but the final newline.
  if (at !== lines.length - 1) return undefined;
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
