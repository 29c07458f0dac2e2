import { BadRequest } from '../errors.js';
import { lanceMessage } from './lance.js';

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

/** A user predicate as given: present, and about user columns only (Lance checks the rest). */
export function checkPredicate(predicate: string | undefined, what = 'predicate'): string {
  if (predicate === undefined || predicate.trim() === '') {
    throw new BadRequest(
      what === 'predicate'
        ? 'predicate is required (to match every row, send predicate=true)'
        : `${what} must not be empty (omit it to match every row)`,
    );
  }
  const reserved = identifiers(predicate).find((name) => name.startsWith('_'));
  if (reserved !== undefined) {
    throw new BadRequest(`${what}: no column named "${reserved}" (names starting with _ are reserved)`);
  }
  return predicate;
}

/**
 * Runs the first read that uses a predicate, turning Lance's refusal of it (unknown column, syntax, types)
 * into a 400 with Lance's message. Nothing is written before this read, so a bad predicate changes nothing.
 */
export async function readingPredicate<T>(read: () => Promise<T>, what = 'predicate'): Promise<T> {
  try {
    return await read();
  } catch (err) {
    throw new BadRequest(`${what}: ${lanceMessage(err)}`);
  }
}
