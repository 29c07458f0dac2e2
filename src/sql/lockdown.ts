import { type DuckDBConnection, DuckDBInstance, type DuckDBPreparedStatement, StatementType } from '@duckdb/node-api';
import { BadRequest, StrataError } from '../errors.js';
import type { SqlMemoryBudget } from './memory-budget.js';

/** What a database's SQL engine is given: its DuckDB's memory limit and threads, and the node's budget for copies. */
export interface InstanceOptions {
  memoryMb: number;
  threads: number;
  budget: SqlMemoryBudget;
}

/**
 * An in-memory DuckDB that can reach nothing outside itself (docs/architecture.md): no files, no network, no
 * extensions, and settings frozen once made. With `checkStatement` in front, user SQL can only read.
 */
export async function openLockedInstance(
  options: Pick<InstanceOptions, 'memoryMb' | 'threads'>,
): Promise<{ instance: DuckDBInstance; loader: DuckDBConnection }> {
  const instance = await DuckDBInstance.create(':memory:', {
    enable_external_access: 'false',
    autoinstall_known_extensions: 'false',
    autoload_known_extensions: 'false',
    allow_community_extensions: 'false',
    allow_unsigned_extensions: 'false',
    memory_limit: `${options.memoryMb}MB`,
    threads: String(options.threads),
    // Copies let go to make room must leave the process, not only DuckDB's count: without these threads RSS was
    // unchanged 2 s after a 137 MiB copy was dropped (the allocator kept its pages); with them it fell by 135 MiB.
    allocator_background_threads: 'true',
  });
  // The service's own connection for loading tables, its session set before the lock: loads insert from
  // several threads, which DuckDB does only where insertion order need not be kept.
  const loader = await instance.connect();
  try {
    await loader.run('SET SESSION preserve_insertion_order = false');
    await loader.run('SET lock_configuration = true');
  } catch (err) {
    loader.closeSync();
    instance.closeSync();
    throw err;
  }
  return { instance, loader };
}

/** The statements docs/api.md allows, by their first keyword (DuckDB types PRAGMA and SUMMARIZE as SELECT too). */
const READING = new Set(['select', 'with', 'values', 'from', 'table', 'describe', 'show', 'summarize', '(']);

/** The first keyword of a statement, after comments and white space. */
function firstKeyword(sql: string): string {
  const rest = sql.replace(/^(?:\s+|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*/, '');
  if (rest.startsWith('(')) return '(';
  return (/^[A-Za-z_]+/.exec(rest)?.[0] ?? rest.slice(0, 12)).toLowerCase();
}

const ALLOWED = 'SELECT, WITH … SELECT, VALUES, DESCRIBE, SHOW TABLES';

/** The cheap half of `checkStatement`, without DuckDB: refuses by the first keyword. */
export function checkKeyword(sql: string): void {
  const keyword = firstKeyword(sql);
  if (keyword === '') throw new BadRequest('query is empty: send one read-only SQL statement');
  if (!READING.has(keyword)) {
    throw new BadRequest(`query must be one read-only statement (${ALLOWED}); ${keyword.toUpperCase()} is not allowed`);
  }
}

/**
 * Parses and binds user SQL, refusing anything but exactly one read-only statement (400 naming why); the
 * prepared statement is returned to run. The keyword check catches what DuckDB types as SELECT but is
 * not a query (PRAGMA); the statement type catches the rest.
 */
export async function checkStatement(connection: DuckDBConnection, sql: string): Promise<DuckDBPreparedStatement> {
  checkKeyword(sql);
  const extracted = await sqlCall(() => connection.extractStatements(sql));
  if (extracted.count !== 1) {
    throw new BadRequest(`query must be exactly one statement; it has ${extracted.count}`);
  }
  const prepared = await sqlCall(() => extracted.prepare(0));
  if (prepared.statementType !== StatementType.SELECT) {
    prepared.destroySync();
    throw new BadRequest(
      `query must be one read-only statement (${ALLOWED}); ${StatementType[prepared.statementType]} is not allowed`,
    );
  }
  return prepared;
}

/** DuckDB's own error classes that are faults of the service, not of the statement. */
const SERVICE_FAULT = /^(?:INTERNAL|FATAL) Error/i;

/** Runs a DuckDB call, turning its errors about the statement into 400 with the engine's message. */
export async function sqlCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof StrataError || !(err instanceof Error) || SERVICE_FAULT.test(err.message)) throw err;
    throw new BadRequest(err.message);
  }
}
