import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { connect, isClosedTable } from '../src/engine/lance/lance.js';
import { readingPredicate } from '../src/engine/predicate/predicate.js';
import { BadRequest } from '../src/errors.js';

// A search with a filter (or an update or delete by predicate) that raced a drop answered 400 "filter: Table t_…
// is closed": Lance names the table in the message, which the check did not expect, so the drop was taken for the
// predicate's fault instead of answered 404 as a drop is.

const dir = mkdtempSync(join(tmpdir(), 'strata-closed-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("a read on a table closed under it is the drop's, not the predicate's", async () => {
  const db = await connect(dir);
  const table = await db.createTable('t_0123abcd', [{ id: 1 }]);
  table.close();
  const err = await readingPredicate(() => table.query().where('id = 1').toArray(), 'filter').catch((e: unknown) => e);
  expect(String(err)).toMatch(/Table t_0123abcd is closed/);
  expect(err).not.toBeInstanceOf(BadRequest);
  expect(isClosedTable(err)).toBe(true);
  // A predicate Lance refuses is still the predicate's.
  const open = await db.openTable('t_0123abcd');
  const refused = await readingPredicate(() => open.query().where('nope = 1').toArray(), 'filter').catch(
    (e: unknown) => e,
  );
  expect(refused).toBeInstanceOf(BadRequest);
  expect(isClosedTable(refused)).toBe(false);
});
