import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { type DuckDBConnection, DuckDBInstance, type DuckDBType } from '@duckdb/node-api';
import type { Field, RecordBatch, Schema } from 'apache-arrow';
import { arrow } from '../arrow/arrow.js';
import { chunkToBatch } from '../sql/results.js';
import { arrowType, quoteIdent } from '../sql/types.js';

const { Type } = arrow;

/** The files `strata load` reads, by extension. */
export type FileKind = 'parquet' | 'csv' | 'tsv' | 'jsonl' | 'arrow';

const KINDS: Readonly<Record<string, FileKind>> = {
  '.parquet': 'parquet',
  '.csv': 'csv',
  '.tsv': 'tsv',
  '.jsonl': 'jsonl',
  '.ndjson': 'jsonl',
  '.arrow': 'arrow',
  '.arrows': 'arrow',
  '.ipc': 'arrow',
};

export function kindOf(path: string): FileKind | undefined {
  return KINDS[extname(path).toLowerCase()];
}

/** One request's rows, already an Arrow IPC stream. */
export interface EncodedGroup {
  ipc: Uint8Array;
  rows: number;
}

/** A file opened for loading: its columns (as Arrow), its row count when cheap to know, and its rows in groups. */
export interface LoadFile {
  schema: Schema;
  totalRows: number | undefined;
  /** The file's rows in file order, `groupRows` to a group (the last shorter): the same groups on every run. */
  groups(groupRows: number): AsyncGenerator<EncodedGroup>;
  close(): void;
}

/** The DuckDB table function that reads a file of this kind. */
function reader(kind: Exclude<FileKind, 'arrow'>, path: string): string {
  const file = `'${path.replaceAll("'", "''")}'`;
  switch (kind) {
    case 'parquet':
      return `read_parquet(${file})`;
    case 'csv':
      return `read_csv(${file}, header = true)`;
    case 'tsv':
      return `read_csv(${file}, header = true, delim = '\t')`;
    case 'jsonl':
      return `read_json(${file}, format = 'newline_delimited')`;
  }
}

/**
 * Opens a file for loading with DuckDB (Parquet, CSV, TSV, JSON Lines) or Arrow JS (IPC). `vectors` names the
 * columns to load as vectors and their dimension: read as lists (JSON arrays, or CSV text such as `[0.1, 0.2]`),
 * they are cast to fixed-size float vectors.
 */
export async function openFile(path: string, kind: FileKind, vectors: ReadonlyMap<string, number>): Promise<LoadFile> {
  if (kind === 'arrow') return openArrowFile(path);
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  const source = reader(kind, path);
  const columns = (await (await connection.run(`DESCRIBE SELECT * FROM ${source}`)).getRowObjects()).map((row) =>
    String(row.column_name),
  );
  const select = columns
    .map((name) => {
      const dim = vectors.get(name);
      return dim === undefined
        ? quoteIdent(name)
        : `CAST(CAST(${quoteIdent(name)} AS FLOAT[]) AS FLOAT[${dim}]) AS ${quoteIdent(name)}`;
    })
    .join(', ');
  const query = `SELECT ${select} FROM ${source}`;
  const totalRows =
    kind === 'parquet'
      ? Number((await (await connection.run(`SELECT count(*) AS n FROM ${source}`)).getRowObjects())[0]?.n)
      : undefined;
  const probe = await connection.run(`${query} LIMIT 0`);
  const types = probe.columnTypes();
  const schema = new arrow.Schema(
    probe.columnNames().map((name, c) => new arrow.Field(name, arrowType(types[c] as DuckDBType), true)),
  );
  return {
    schema,
    totalRows,
    groups: (groupRows) => duckdbGroups(connection, query, schema, groupRows),
    close() {
      connection.closeSync();
      instance.closeSync();
    },
  };
}

async function* duckdbGroups(
  connection: DuckDBConnection,
  query: string,
  schema: Schema,
  groupRows: number,
): AsyncGenerator<EncodedGroup> {
  const result = await connection.stream(query);
  const types = result.columnTypes();
  const regroup = regrouper(groupRows, encoded);
  for (;;) {
    const chunk = await result.fetchChunk();
    if (chunk === null || chunk.rowCount === 0) break;
    yield* regroup.add(chunkToBatch(chunk, types, schema));
  }
  yield* regroup.rest();
}

function openArrowFile(path: string): LoadFile {
  const reader = arrow.RecordBatchReader.from(readFileSync(path));
  const table = new arrow.Table(reader.readAll() as RecordBatch[]);
  return {
    schema: table.schema,
    totalRows: table.numRows,
    async *groups(groupRows) {
      const regroup = regrouper(groupRows, encoded);
      for (const batch of table.batches) yield* regroup.add(batch);
      yield* regroup.rest();
    },
    close: () => undefined,
  };
}

/** Batches regrouped into groups of exactly `groupRows` rows (the last shorter), each made into a `T` by `make`. */
export function regrouper<T>(groupRows: number, make: (batches: RecordBatch[], rows: number) => T) {
  let pending: RecordBatch[] = [];
  let rows = 0;
  const group = (): T => {
    const made = make(pending, rows);
    pending = [];
    rows = 0;
    return made;
  };
  return {
    *add(batch: RecordBatch): Generator<T> {
      let rest = batch;
      while (rows + rest.numRows >= groupRows) {
        const take = groupRows - rows;
        pending.push(rest.slice(0, take));
        rows += take;
        yield group();
        rest = rest.slice(take);
      }
      if (rest.numRows > 0) {
        pending.push(rest);
        rows += rest.numRows;
      }
    },
    *rest(): Generator<T> {
      if (rows > 0) yield group();
    },
  };
}

/** A group of rows as one IPC stream, as `strata load` sends it. */
const encoded = (batches: RecordBatch[], rows: number): EncodedGroup => ({
  ipc: arrow.tableToIPC(new arrow.Table(batches), 'stream'),
  rows,
});

/**
 * The idempotency key prefix of a file's load into a table: the same file (by path, size and modification time),
 * table and group size give the same keys, so a load run again skips the groups that already landed.
 */
export function loadKeyPrefix(path: string, database: string, table: string, groupRows: number): string {
  const stat = statSync(path);
  const identity = JSON.stringify([resolve(path), stat.size, stat.mtimeMs, database, table, groupRows]);
  return `load-${createHash('sha256').update(identity).digest('hex').slice(0, 32)}`;
}

/** The service's spelling of a column type, for `--create` (docs/api.md, Tables); undefined when it has none. */
export function serviceType(field: Field): { type: string; dim?: number; item?: string } | undefined {
  const t = field.type;
  switch (t.typeId) {
    case Type.Int:
      return { type: `${t.isSigned ? 'i' : 'u'}${t.bitWidth}` };
    case Type.Float:
      return { type: ['f16', 'f32', 'f64'][t.precision] ?? 'f64' };
    case Type.Utf8:
      return { type: 'utf8' };
    case Type.LargeUtf8:
      return { type: 'large_utf8' };
    case Type.Bool:
      return { type: 'bool' };
    case Type.Binary:
      return { type: 'binary' };
    case Type.Date:
      return { type: 'date32' };
    case Type.Timestamp:
      return { type: ['timestamp_s', 'timestamp_ms', 'timestamp_us', 'timestamp_ns'][t.unit] ?? 'timestamp_us' };
    case Type.FixedSizeList:
      return { type: 'vector', dim: t.listSize };
    case Type.List: {
      const item = serviceType(t.children[0]);
      return item === undefined ? undefined : { type: 'list', item: item.type };
    }
    default:
      return undefined;
  }
}
