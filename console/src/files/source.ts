import type { RowsSource } from '@strata/client';
import { tableFromIPC } from 'apache-arrow';
import { type ColumnShape, parseCsv, rowsOfCsv, rowsOfJsonLines } from './csv';

/** The files the console loads, by extension, as `strata load` names them. */
export type FileKind = 'csv' | 'tsv' | 'jsonl' | 'parquet' | 'arrow';

const KINDS: Readonly<Record<string, FileKind>> = {
  csv: 'csv',
  tsv: 'tsv',
  jsonl: 'jsonl',
  ndjson: 'jsonl',
  parquet: 'parquet',
  arrow: 'arrow',
  arrows: 'arrow',
  ipc: 'arrow',
};

export function kindOf(name: string): FileKind | undefined {
  const dot = name.lastIndexOf('.');
  return dot < 0 ? undefined : KINDS[name.slice(dot + 1).toLowerCase()];
}

/** A file read into what `StrataTable.append` takes, and how many rows that is. */
export interface ReadFile {
  kind: FileKind;
  rows: number;
  source: RowsSource;
}

/**
 * Reads a file the user chose. CSV and JSON Lines become JSON rows (CSV's text typed by the table's columns);
 * Arrow IPC (stream or file) goes as Arrow, which the client re-batches into bounded requests; Parquet is
 * decoded here (hyparquet, plain JavaScript bundled into the console) into JSON rows.
 */
export async function readFile(file: File, columns: readonly ColumnShape[]): Promise<ReadFile> {
  const kind = kindOf(file.name);
  switch (kind) {
    case 'csv':
    case 'tsv': {
      const rows = rowsOfCsv(parseCsv(await file.text(), kind === 'tsv' ? '\t' : ','), columns);
      return { kind, rows: rows.length, source: rows };
    }
    case 'jsonl': {
      const rows = rowsOfJsonLines(await file.text());
      return { kind, rows: rows.length, source: rows };
    }
    case 'arrow': {
      const table = tableFromIPC(new Uint8Array(await file.arrayBuffer()));
      return { kind, rows: table.numRows, source: table };
    }
    case 'parquet': {
      const rows = await parquetRows(await file.arrayBuffer(), columns);
      return { kind, rows: rows.length, source: rows };
    }
    case undefined:
      throw new Error(`${file.name}: not a file the console reads (.csv, .tsv, .jsonl, .ndjson, .parquet, .arrow)`);
  }
}

/**
 * Loaded on first use only: most visits never read a Parquet file. Snappy is hyparquet's own; gzip and Zstandard
 * are decoded by plain-JavaScript decoders (fflate, fzstd): those in WebAssembly, which the console's CSP does not
 * let run, are not used.
 */
async function parquetRows(buffer: ArrayBuffer, columns: readonly ColumnShape[]): Promise<Record<string, unknown>[]> {
  const [{ parquetReadObjects }, { gunzipSync }, { decompress }] = await Promise.all([
    import('hyparquet'),
    import('fflate'),
    import('fzstd'),
  ]);
  const compressors = {
    GZIP: (input: Uint8Array) => gunzipSync(input),
    ZSTD: (input: Uint8Array) => decompress(input),
  };
  const types = new Map(columns.map((column) => [column.name.toLowerCase(), column.type]));
  let read: Record<string, unknown>[];
  try {
    read = await parquetReadObjects({ file: buffer, compressors });
  } catch (err) {
    throw new Error(
      `cannot read this Parquet file here: ${err instanceof Error ? err.message : String(err)}. The console reads Parquet that is uncompressed, or compressed with Snappy, gzip or Zstandard; \`strata load\` reads every codec.`,
    );
  }
  return read.map((row) => {
    const out: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(row)) out[name] = jsonValue(value, types.get(name.toLowerCase()));
    return out;
  });
}

/** A decoded Parquet value as the JSON the column takes (docs/api.md, JSON values). */
export function jsonValue(value: unknown, type: string | undefined): unknown {
  if (value === undefined || value === null) return null;
  if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  if (value instanceof Date) return type === 'date32' ? value.toISOString().slice(0, 10) : value.toISOString();
  if (value instanceof Uint8Array) {
    if (type === 'utf8' || type === 'large_utf8') return new TextDecoder().decode(value);
    let text = '';
    for (const byte of value) text += String.fromCharCode(byte);
    return btoa(text);
  }
  if (ArrayBuffer.isView(value)) return Array.from(value as unknown as ArrayLike<number>);
  if (Array.isArray(value)) return value.map((item) => jsonValue(item, undefined));
  if (typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [name, item] of Object.entries(value)) out[name] = jsonValue(item, undefined);
    return out;
  }
  return value;
}
