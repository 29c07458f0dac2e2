import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join, resolve } from 'node:path';
import { type DuckDBConnection, DuckDBInstance, type DuckDBType, DuckDBTypeId } from '@duckdb/node-api';
import type { RecordBatch, Schema } from 'apache-arrow';
import { arrow } from '../arrow/arrow.js';
import { chunkToBatch } from '../sql/results.js';
import { quoteIdent } from '../sql/types.js';
import { type ColumnRead, columnRead, DOUBLE_DIGITS } from './column-types.js';
import { encodeGroup } from './encode.js';
import { LoadError } from './errors.js';

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

/** One request's rows, already an Arrow IPC stream, and the file row its first row is. */
export interface EncodedGroup {
  ipc: Uint8Array;
  rows: number;
  start: number;
}

/** A file opened for loading: its columns (as Arrow), its row count when cheap to know, and its rows in groups. */
export interface LoadFile {
  schema: Schema;
  totalRows: number | undefined;
  /** What the service has no type for in this file, and how each such column loads instead. */
  notes: string[];
  /**
   * The file's rows in file order, `groupRows` to a group (the last shorter), each encoded the same way on every
   * run: a re-run sends the same bytes for the same rows, under the same keys.
   */
  groups(groupRows: number): AsyncGenerator<EncodedGroup>;
  /** For `--create`: refuses a text column whose values but a few are all of one narrower type. */
  checkNotWidened(): Promise<void>;
  close(): void;
}

/** The DuckDB table function that reads a file of this kind; `extra` adds reader options. */
function reader(kind: Exclude<FileKind, 'arrow'>, path: string, extra = ''): string {
  const file = `'${path.replaceAll("'", "''")}'`;
  switch (kind) {
    case 'parquet':
      return `read_parquet(${file}${extra})`;
    case 'csv':
      return `read_csv(${file}, header = true${extra})`;
    case 'tsv':
      return `read_csv(${file}, header = true, delim = '\t'${extra})`;
    case 'jsonl':
      return `read_json(${file}, format = 'newline_delimited'${extra})`;
  }
}

/** The file's size and modification time; a missing file is the user's to fix, not a crash. */
function statOf(path: string) {
  try {
    const stat = statSync(path);
    if (!stat.isFile()) throw new LoadError(`${path}: not a file`);
    return stat;
  } catch (err) {
    if (err instanceof LoadError) throw err;
    throw new LoadError(`${path}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : String(err)}`);
  }
}

/**
 * Opens a file for loading with DuckDB (Parquet, CSV, TSV, JSON Lines) or Arrow JS (IPC). `vectors` names the
 * columns to load as vectors and their dimension: read as lists (JSON arrays, or CSV text such as `[0.1, 0.2]`),
 * they become fixed-size float vectors.
 */
export async function openFile(path: string, kind: FileKind, vectors: ReadonlyMap<string, number>): Promise<LoadFile> {
  statOf(path);
  if (kind === 'arrow') return openArrowFile(path);
  // DuckDB reads its path argument as a glob ('a[1].csv' is a1.csv): it gets a link of a plain name instead.
  const linkDir = mkdtempSync(join(tmpdir(), 'strata-load-'));
  const link = join(linkDir, `file${extname(path).toLowerCase()}`);
  symlinkSync(resolve(path), link);
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  const close = () => {
    connection.closeSync();
    instance.closeSync();
    rmSync(linkDir, { recursive: true, force: true });
  };
  const failure = (err: unknown) => duckdbFailure(path, link, err);
  try {
    // Rows in file order on every run, read in parallel all the same (DuckDB's default, stated so it stays).
    await connection.run('SET preserve_insertion_order = true');
    const describe = (options: string) =>
      connection.run(`SELECT * FROM ${reader(kind, link, options)} LIMIT 0`).catch((err: unknown) => {
        throw failure(err);
      });
    let options = '';
    let described = await describe(options);
    // A comma-separated file with a row of another width is sniffed as one column of whole lines: read it with
    // its commas, so that the row is refused rather than loaded as text.
    if (kind === 'csv' && described.columnCount === 1 && described.columnName(0).includes(',')) {
      options = ", delim = ','";
      // The columns from the rows of the header's width; reading the rest refuses the others, by line.
      described = await describe(`${options}, ignore_errors = true`);
    }
    const source = reader(kind, link, options);
    const names = described.columnNames();
    const fileTypes = described.columnTypes();
    const fit = await decimalsFittingDouble(connection, source, names, fileTypes);
    const reads = names.map((name, c) =>
      columnRead(name, fileTypes[c] as DuckDBType, { vectorDim: vectors.get(name), decimalsFitDouble: fit.has(name) }),
    );
    const query = `SELECT ${reads.map((read, c) => `${read.sql} AS ${quoteIdent(names[c] as string)}`).join(', ')} FROM ${source}`;
    const schema = new arrow.Schema(names.map((name, c) => new arrow.Field(name, (reads[c] as ColumnRead).type, true)));
    const totalRows =
      kind === 'parquet'
        ? Number((await (await connection.run(`SELECT count(*) AS n FROM ${source}`)).getRowObjects())[0]?.n)
        : undefined;
    const file: FileColumns = { path, kind, link, options, names, fileTypes, vectors };
    return {
      schema,
      totalRows,
      notes: reads.flatMap((read, c) => (read.note === undefined ? [] : [`column "${names[c]}" ${read.note}`])),
      groups: (groupRows) => duckdbGroups(connection, query, schema, groupRows, file),
      checkNotWidened: () => checkNotWidened(connection, file),
      close,
    };
  } catch (err) {
    close();
    throw err;
  }
}

/**
 * The DECIMAL columns wider than a double's 15 digits whose values all have at most 15 significant digits (one
 * scan of those columns; Parquet answers it from its statistics where it has them).
 */
async function decimalsFittingDouble(
  connection: DuckDBConnection,
  source: string,
  names: readonly string[],
  types: readonly DuckDBType[],
): Promise<Set<string>> {
  const wide = names.flatMap((name, c) => {
    const type = types[c];
    return type?.typeId === DuckDBTypeId.DECIMAL && type.width > DOUBLE_DIGITS ? [{ name, scale: type.scale }] : [];
  });
  if (wide.length === 0) return new Set();
  const fits = wide.map(
    ({ name, scale }) => `coalesce(max(abs(${quoteIdent(name)})) < 1e${DOUBLE_DIGITS - scale}, true)`,
  );
  const row = (await (await connection.run(`SELECT ${fits.join(', ')} FROM ${source}`)).getRows())[0] ?? [];
  return new Set(wide.filter((_, k) => row[k] === true).map(({ name }) => name));
}

/** DuckDB's message with the user's path, its first line only: the rest is the CSV sniffer's settings dump. */
function duckdbFailure(path: string, link: string, err: unknown): LoadError {
  const message = String(err instanceof Error ? err.message : err);
  return new LoadError(`${path}: ${message.split('\n')[0]?.replaceAll(link, path)}`);
}

/**
 * Why reading a file failed, said as its row: a value not of its column's type, a vector that is not a list of
 * numbers, a CSV line DuckDB refuses; else DuckDB's own first line.
 */
async function readFailure(connection: DuckDBConnection, file: FileColumns, err: unknown): Promise<LoadError> {
  if (err instanceof LoadError) return err;
  const csv = file.kind === 'csv' || file.kind === 'tsv';
  return (
    (await firstBadRow(connection, file, csv)) ??
    (csv ? await csvRejected(connection, file) : undefined) ??
    duckdbFailure(file.path, file.link, err)
  );
}

/** What a diagnosis needs to know of a file DuckDB reads. */
interface FileColumns {
  path: string;
  kind: Exclude<FileKind, 'arrow'>;
  link: string;
  /** Reader options beyond the kind's own (see openFile). */
  options: string;
  names: readonly string[];
  fileTypes: readonly DuckDBType[];
  vectors: ReadonlyMap<string, number>;
}

async function* duckdbGroups(
  connection: DuckDBConnection,
  query: string,
  schema: Schema,
  groupRows: number,
  file: FileColumns,
): AsyncGenerator<EncodedGroup> {
  let start = 0;
  const regroup = regrouper(groupRows, (batches, rows): EncodedGroup => {
    const group = { ipc: encodeGroup(schema, batches, { file: file.path, start }), rows, start };
    start += rows;
    return group;
  });
  try {
    const result = await connection.stream(query);
    const types = result.columnTypes();
    for (;;) {
      const chunk = await result.fetchChunk();
      if (chunk === null || chunk.rowCount === 0) break;
      yield* regroup.add(chunkToBatch(chunk, types, schema));
    }
  } catch (err) {
    throw await readFailure(connection, file, err);
  }
  yield* regroup.rest();
}

/** DuckDB's type as the refusal of a value says it. */
function typeName(type: string): string {
  const names: Readonly<Record<string, string>> = {
    BIGINT: 'a whole number',
    DOUBLE: 'a number',
    BOOLEAN: 'true or false',
    DATE: 'a date',
    TIME: 'a time of day',
    TIMESTAMP: 'a timestamp',
    'FLOAT[]': 'a list of numbers',
  };
  return names[type] ?? `a ${type} value`;
}

/** One column's check: the type its values must be, and the SQL that says whether one is. */
interface Check {
  column: string;
  type: string;
  /** True when the column's value is of the type (null is any type). */
  fits: string;
}

/** A check that the column's values cast to `type`. */
function castCheck(column: string, type: string): Check {
  const value = quoteIdent(column);
  // DuckDB casts '1.25' to the BIGINT 1: a whole number is one that casts to the same double.
  const fits =
    type === 'BIGINT'
      ? `TRY_CAST(${value} AS BIGINT) = TRY_CAST(${value} AS DOUBLE)`
      : `TRY_CAST(${value} AS ${type}) IS NOT NULL`;
  return { column, type, fits };
}

/**
 * The first row whose value in a checked column does not cast to the column's type, as an error naming the file
 * row, the column and the value; undefined when every value casts. Rows come in file order (as the load reads
 * them), so the count of rows before it is its place in the file.
 */
async function findBadRow(
  connection: DuckDBConnection,
  file: FileColumns,
  checks: readonly Check[],
  asText: boolean,
  why: (check: Check, value: string) => string,
): Promise<LoadError | undefined> {
  if (checks.length === 0) return undefined;
  const source = reader(file.kind, file.link, `${file.options}${asText ? ', all_varchar = true' : ''}`);
  const bad = checks
    .map((check, k) => `WHEN ${quoteIdent(check.column)} IS NOT NULL AND NOT coalesce(${check.fits}, false) THEN ${k}`)
    .join(' ');
  const result = await connection.stream(`SELECT CASE ${bad} END AS bad FROM ${source}`);
  let row = 0;
  for (;;) {
    const chunk = await result.fetchChunk();
    if (chunk === null || chunk.rowCount === 0) return undefined;
    const flags = chunk.getColumnValues(0);
    const at = flags.findIndex((flag) => flag !== null);
    if (at >= 0) {
      const check = checks[Number(flags[at])] as Check;
      const value = await connection.run(
        `SELECT CAST(${quoteIdent(check.column)} AS VARCHAR) AS v FROM ${source} LIMIT 1 OFFSET ${row + at}`,
      );
      const text = String((await value.getRowObjects())[0]?.v);
      return new LoadError(`${file.path}: row ${row + at + 1}, column "${check.column}": ${why(check, text)}`);
    }
    row += chunk.rowCount;
  }
}

/**
 * Why a read failed, as the row that failed it: a CSV value that is not of its column's detected type, or a
 * vector column's value that is not a list of numbers. Undefined when no row is at fault.
 */
function firstBadRow(connection: DuckDBConnection, file: FileColumns, csv: boolean): Promise<LoadError | undefined> {
  const checks = file.names.flatMap((column, c): Check[] => {
    if (file.vectors.has(column)) return [castCheck(column, 'FLOAT[]')];
    const type = file.fileTypes[c];
    return csv && type !== undefined && type.typeId !== DuckDBTypeId.VARCHAR
      ? [castCheck(column, type.toString())]
      : [];
  });
  return findBadRow(connection, file, checks, csv, (check, value) =>
    check.type === 'FLOAT[]'
      ? `${quoted(value)} is not a list of numbers (a vector)`
      : `${quoted(value)} is not ${typeName(check.type)}, as the column's first rows are (${check.type})`,
  ).catch(() => undefined);
}

/**
 * The first line DuckDB's CSV reader refuses (a row of another width, a quote left open) as an error naming the
 * file's line, the column when there is one, and the line itself; undefined when it refuses none.
 */
async function csvRejected(connection: DuckDBConnection, file: FileColumns): Promise<LoadError | undefined> {
  try {
    const result = await connection.stream(
      `SELECT * FROM ${reader(file.kind, file.link, `${file.options}, store_rejects = true`)}`,
    );
    while (((await result.fetchChunk())?.rowCount ?? 0) > 0) {}
    const rejected = await connection.run(
      'SELECT line, column_name, error_message, csv_line FROM reject_errors ORDER BY line LIMIT 1',
    );
    const row = (await rejected.getRowObjectsJS())[0];
    if (row === undefined) return undefined;
    const column = row.column_name === null || row.column_name === '' ? '' : `, column "${String(row.column_name)}"`;
    const why = String(row.error_message).split('\n')[0];
    return new LoadError(
      `${file.path}: line ${String(row.line)}${column}: ${why} (the line: ${quoted(String(row.csv_line))})`,
    );
  } catch {
    return undefined;
  }
}

/** Types a text column of a CSV or JSON file might be but for a few rows, the narrowest first. */
const NARROWER = ['BIGINT', 'DOUBLE', 'DATE', 'TIMESTAMP', 'BOOLEAN'];

/** At most this share of a column's values may be the odd ones out for it to count as widened by them. */
const ODD_SHARE = 0.01;

async function checkNotWidened(connection: DuckDBConnection, file: FileColumns): Promise<void> {
  if (file.kind === 'parquet') return;
  const text = file.names.filter(
    (name, c) => file.fileTypes[c]?.typeId === DuckDBTypeId.VARCHAR && !file.vectors.has(name),
  );
  if (text.length === 0) return;
  const counts = text.flatMap((name) => [
    `count(${quoteIdent(name)})`,
    ...NARROWER.map((type) => `count(*) FILTER (WHERE ${castCheck(name, type).fits})`),
  ]);
  const counted = await connection
    .run(`SELECT ${counts.join(', ')} FROM ${reader(file.kind, file.link, file.options)}`)
    .catch(async (err: unknown) => {
      throw await readFailure(connection, file, err);
    });
  const row = (await counted.getRows())[0];
  const widened = text.flatMap((column, t): (Check & { others: number })[] => {
    const values = Number(row?.[t * (NARROWER.length + 1)]);
    for (const [k, type] of NARROWER.entries()) {
      const fit = Number(row?.[t * (NARROWER.length + 1) + 1 + k]);
      const odd = values - fit;
      if (odd > 0 && fit > 0 && odd <= Math.max(1, Math.floor(values * ODD_SHARE)))
        return [{ ...castCheck(column, type), others: fit }];
    }
    return [];
  });
  const refusal = await findBadRow(connection, file, widened, false, (check, value) => {
    const others = widened.find((w) => w.column === check.column)?.others ?? 0;
    return (
      `${quoted(value)} is not ${typeName(check.type)}, as its other ${others.toLocaleString('en-US')} values are. ` +
      '--create will not make the column text for a few odd rows: correct the row, or create the table with ' +
      `"${check.column}" as utf8 first and load without --create`
    );
  });
  if (refusal !== undefined) throw refusal;
}

const quoted = (value: string) => JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);

function openArrowFile(path: string): LoadFile {
  const reader = arrow.RecordBatchReader.from(readFileSync(path));
  const table = new arrow.Table(reader.readAll() as RecordBatch[]);
  return {
    schema: table.schema,
    totalRows: table.numRows,
    notes: [],
    async *groups(groupRows) {
      let start = 0;
      // The file's batches are the same on every run, so their encoding is too.
      const regroup = regrouper(groupRows, (batches, rows): EncodedGroup => {
        const group = { ipc: arrow.tableToIPC(new arrow.Table(batches), 'stream'), rows, start };
        start += rows;
        return group;
      });
      for (const batch of table.batches) yield* regroup.add(batch);
      yield* regroup.rest();
    },
    checkNotWidened: async () => undefined,
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

/**
 * The idempotency key prefix of a file's load into a table: the same file (by path, size and modification time)
 * into the same table gives the same prefix, whatever the settings; each request's key adds the file row its
 * rows start at (load.ts), so a key names the rows it carries.
 */
export function loadKeyPrefix(path: string, database: string, table: string, upsert = false): string {
  const stat = statOf(path);
  // An upsert load's requests are other requests than an append load's of the same file: other keys.
  const identity = JSON.stringify([
    resolve(path),
    stat.size,
    stat.mtimeMs,
    database,
    table,
    ...(upsert ? ['upsert'] : []),
  ]);
  return `load-${createHash('sha256').update(identity).digest('hex').slice(0, 32)}`;
}
