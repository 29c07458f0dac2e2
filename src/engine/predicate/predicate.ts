import type { Schema } from 'apache-arrow';
import { BadRequest } from '../../errors.js';
import { isClosedTable, isMissingDataset, lanceMessage, PREDICATE_TIMEOUT_MS } from '../lance/index.js';
import { canonicalPredicate } from './parser.js';

/** Longer predicates are refused before they are parsed; an IN list of 10,000 ids fits many times over. */
export const MAX_PREDICATE_BYTES = 256 * 1024;

/**
 * A user predicate, checked and written as Lance will read it (docs/api.md, Predicates): present, exactly one
 * boolean expression over the columns of `schema` (the table's own), with nothing after it, no placeholders, and no function
 * that builds values of any size. Every refusal is a 400 naming what was found.
 */
export function checkPredicate(predicate: string | undefined, schema: Schema, what = 'predicate'): string {
  if (predicate === undefined || predicate.trim() === '') {
    throw new BadRequest(
      what === 'predicate'
        ? 'predicate is required (to match every row, send predicate=true)'
        : `${what} must not be empty (omit it to match every row)`,
    );
  }
  const bytes = Buffer.byteLength(predicate);
  if (bytes > MAX_PREDICATE_BYTES) {
    throw new BadRequest(`${what} is ${bytes} bytes; the limit is ${MAX_PREDICATE_BYTES}`);
  }
  try {
    return canonicalPredicate(predicate, schema.fields);
  } catch (err) {
    if (err instanceof BadRequest) throw new BadRequest(`${what}: ${err.message}`);
    throw err;
  }
}

/**
 * Runs the first read that uses a predicate, turning Lance's refusal of it (types, say) into a 400 with Lance's
 * message, and a read past its time into a 400 that says so. Nothing is written before this read, so a bad
 * predicate changes nothing.
 */
export async function readingPredicate<T>(read: () => Promise<T>, what = 'predicate'): Promise<T> {
  try {
    return await read();
  } catch (err) {
    // The table went away under the read (dropped, or its database deleted): not the predicate's fault, and
    // answered as the drop is by those who know of it (404, or 503 while a database is deleted).
    if (isMissingDataset(err) || isClosedTable(err)) throw err;
    if (/timed? ?out|deadline/i.test(lanceMessage(err))) {
      throw new BadRequest(`${what}: evaluating it took longer than ${PREDICATE_TIMEOUT_MS / 1000} s; narrow it`);
    }
    throw new BadRequest(`${what}: ${lanceMessage(err)}`);
  }
}
