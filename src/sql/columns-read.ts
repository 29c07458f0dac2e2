import type { DuckDBConnection } from '@duckdb/node-api';

/**
 * The column names a statement names (each part of every column reference, lowercased), or `all` when it may
 * read columns it does not name.
 */
export type ColumnsRead = 'all' | ReadonlySet<string>;

type Node = { [key: string]: unknown };

const isNode = (value: unknown): value is Node => typeof value === 'object' && value !== null;

/**
 * Finds the columns a statement reads from DuckDB's own parse of it (`json_serialize_sql`, which parses and
 * never binds or runs). Anything that reads columns without naming them makes the answer `all`: a star or
 * COLUMNS(…), a positional reference, a whole row named by its table or alias, NATURAL joins and USING
 * (which compare every like-named column), PIVOT (which groups by every column it does not name), renamed
 * columns of a table (`t(a, b)`, by position), a name that is neither a column of `columns` nor an alias the
 * statement defines, and any statement DuckDB cannot serialize (only SELECTs can be).
 */
export async function columnsRead(
  connection: DuckDBConnection,
  sql: string,
  columns: ReadonlySet<string>,
): Promise<ColumnsRead> {
  let parsed: Node;
  try {
    const reader = await connection.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR) AS tree', [sql]);
    parsed = JSON.parse(String(reader.getRowObjects()[0]?.tree)) as Node;
  } catch {
    return 'all';
  }
  if (parsed.error !== false) return 'all';
  const named = new Set<string>();
  const single: string[] = [];
  const aliases = new Set<string>();
  /** Names of tables, CTEs and their aliases: alone, such a name stands for a whole row. */
  const relations = new Set<string>();
  let all = false;
  const visit = (value: unknown): void => {
    if (all) return;
    if (Array.isArray(value)) {
      for (const item of value) visit(item);
      return;
    }
    if (!isNode(value)) return;
    if (value.class === 'STAR' || value.class === 'POSITIONAL_REFERENCE' || value.type === 'PIVOT') {
      all = true;
      return;
    }
    if (value.ref_type === 'NATURAL' || (Array.isArray(value.using_columns) && value.using_columns.length > 0)) {
      all = true;
      return;
    }
    if (Array.isArray(value.column_name_alias) && value.column_name_alias.length > 0) {
      all = true;
      return;
    }
    if (typeof value.alias === 'string' && value.alias !== '') {
      (value.class === undefined ? relations : aliases).add(value.alias.toLowerCase());
    }
    if (typeof value.table_name === 'string') relations.add(value.table_name.toLowerCase());
    const ctes = isNode(value.cte_map) && Array.isArray(value.cte_map.map) ? value.cte_map.map : [];
    for (const cte of ctes) if (isNode(cte) && typeof cte.key === 'string') relations.add(cte.key.toLowerCase());
    if (value.class === 'COLUMN_REF' && Array.isArray(value.column_names)) {
      const parts = value.column_names.map((part) => String(part).toLowerCase());
      for (const part of parts) named.add(part);
      if (parts.length === 1) single.push(parts[0] as string);
    }
    for (const child of Object.values(value)) visit(child);
  };
  visit(parsed.statements);
  // A lone name that is no column may be a table or alias standing for its whole row.
  const wholeRow = (name: string) => relations.has(name) || (!columns.has(name) && !aliases.has(name));
  if (all || single.some(wholeRow)) return 'all';
  return named;
}
