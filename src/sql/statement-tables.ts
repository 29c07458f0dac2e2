import type { DuckDBConnection } from '@duckdb/node-api';
import type { Field } from 'apache-arrow';
import { arrow } from '../arrow/arrow.js';
import { columnsRead } from './columns-read.js';
import type { SqlTable } from './source.js';

const { Type } = arrow;

/** Table functions that take a table's name as a string, where the name may not appear as a word. */
const INDIRECT = /\bquery(?:_table)?\s*\(/i;

/** Statements that may show tables' columns without reading them, which a copy without some would misstate. */
const INTROSPECTION = /information_schema|pg_catalog|duckdb_|pragma|sqlite_|\b(?:show|describe|summarize)\b/i;
/** The one statement above that shows only tables' names. */
const SHOW_TABLES = /^\s*show\s+tables\s*;?\s*$/i;

/**
 * Columns loaded only for a statement that reads them: vectors and lists. They are nearly all of a table's
 * bytes (a 384-d vector is 1.5 KB a row) and most of a load's time (DuckDB's statistics of their floats alone
 * took ~29% of it), while aggregates and joins rarely read them.
 */
export const deferred = (field: Field) => field.type.typeId === Type.FixedSizeList || field.type.typeId === Type.List;

/** What a statement needs loaded: the tables to bring up, and the ids of those that must hold deferred columns. */
export interface StatementTables {
  targets: SqlTable[];
  whole: Set<string>;
}

/**
 * The tables to bring up for a statement (those it names; with every copy lacking columns when it may show
 * columns it does not read), and which of them must hold their deferred columns: those whose deferred
 * columns it reads, or may read without naming them (`columnsRead`). `holdsWhole` says whether a table's
 * copy already holds them (undefined when there is no copy yet).
 */
export async function statementTables(
  connection: DuckDBConnection,
  sql: string,
  tables: readonly SqlTable[],
  holdsWhole: (id: string) => boolean | undefined,
): Promise<StatementTables> {
  const named = namedTables(sql, tables);
  // String literals cannot name the catalog (a filter on the category 'show' is no SHOW).
  const code = sql.replace(/'(?:[^']|'')*'/g, "''");
  if (INTROSPECTION.test(code) && !SHOW_TABLES.test(code)) {
    const partial = tables.filter((t) => holdsWhole(t.id) === false && !named.includes(t));
    const targets = [...named, ...partial];
    return { targets, whole: new Set(targets.map((t) => t.id)) };
  }
  const withDeferred = named.filter((t) => holdsWhole(t.id) !== true && t.schema.fields.some(deferred));
  if (withDeferred.length === 0) return { targets: named, whole: new Set() };
  const columns = new Set(tables.flatMap((t) => t.schema.fields.map((f) => f.name.toLowerCase())));
  const read = await columnsRead(connection, sql, columns);
  const reads = (t: SqlTable) =>
    read === 'all' || t.schema.fields.some((f) => deferred(f) && read.has(f.name.toLowerCase()));
  return { targets: named, whole: new Set(withDeferred.filter(reads).map((t) => t.id)) };
}

/** The tables a statement names: any table whose name appears as a word, or all when it names them indirectly. */
function namedTables(sql: string, tables: readonly SqlTable[]): SqlTable[] {
  if (INDIRECT.test(sql)) return [...tables];
  const words = new Set(sql.toLowerCase().match(/[a-z0-9_]+/g) ?? []);
  return tables.filter((t) => words.has(t.name.toLowerCase()));
}
