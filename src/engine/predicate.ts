import type { Table as LanceTable } from '@lancedb/lancedb';
import { BadRequest } from '../errors.js';
import { ROW_KEY } from './schema.js';

/**
 * Identifiers outside string literals: bare words and back-quoted names. Used only to keep the service's own
 * columns out of user predicates; parsing and type checking are Lance's, whose messages we pass on.
 */
function identifiers(predicate: string): string[] {
  const out: string[] = [];
  const token = /'(?:[^']|'')*'|"((?:[^"]|"")*)"|`((?:[^`]|``)*)`|([A-Za-z_][A-Za-z0-9_]*)/g;
  for (const m of predicate.matchAll(token)) {
    const name = m[1] ?? m[2] ?? m[3];
    if (name !== undefined) out.push(name);
  }
  return out;
}

/** Lance's message without its plumbing, and without the service's own column in lists of valid fields. */
export function engineMessage(err: unknown): string {
  const raw = err instanceof Error ? err.message : String(err);
  return raw
    .replace(/^Failed to execute query stream: /, '')
    .replace(/^GenericFailure, /, '')
    .replace(/^Invalid input, /, '')
    .replace(/^lance error: /i, '')
    .replace(/, `_rowkey`/g, '')
    .replace(/`_rowkey`, /g, '')
    .split('\n')[0] as string;
}

/** A user predicate checked before anything runs: present, about user columns only, and accepted by Lance. */
export async function checkPredicate(table: LanceTable, predicate: string | undefined): Promise<string> {
  if (predicate === undefined || predicate.trim() === '') {
    throw new BadRequest('predicate is required (to match every row, send predicate=true)');
  }
  const reserved = identifiers(predicate).find((name) => name.startsWith('_'));
  if (reserved !== undefined) {
    throw new BadRequest(`predicate: no column named "${reserved}" (names starting with _ are reserved)`);
  }
  try {
    await table.query().where(predicate).select([ROW_KEY]).limit(1).toArray();
  } catch (err) {
    throw new BadRequest(`predicate: ${engineMessage(err)}`);
  }
  return predicate;
}
