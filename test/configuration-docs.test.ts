import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { expect, test } from 'vitest';

/**
 * docs/configuration.md lists every `STRATA_*` environment variable the code reads, and nothing else: a setting
 * added, renamed or dropped in src/ fails here until the page says so. The code's names are every `STRATA_*` in
 * the .ts files under src/, outside comments (string literals, messages and `process.env.STRATA_…` alike), less
 * the test-only hooks `STRATA_TEST_*`, which are not settings.
 */

const ROOT = resolve(import.meta.dirname, '..');
const NAME = /STRATA_[A-Z0-9_]+/g;
const settings = (text: string) =>
  [...text.matchAll(NAME)].map((m) => m[0]).filter((n) => !n.startsWith('STRATA_TEST_'));

/** The variables the code reads. */
function readByCode(): Set<string> {
  const src = join(ROOT, 'src');
  const files = readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((path) => path.endsWith('.ts'));
  return new Set(
    files.flatMap((path) =>
      settings(
        readFileSync(join(src, path), 'utf8')
          .replace(/\/\*[\s\S]*?\*\//g, '')
          .replace(/^\s*\/\/.*$/gm, ''),
      ),
    ),
  );
}

const page = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8');
/** The variables the page's tables list, one a row, in the first column. */
const listed = new Set(
  page
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .flatMap((line) => settings(line.split('|')[1] ?? '')),
);
const code = readByCode();

test('every STRATA_* variable the code reads is listed in docs/configuration.md', () => {
  expect(code.size).toBeGreaterThanOrEqual(30);
  expect([...code].filter((name) => !listed.has(name)).sort()).toEqual([]);
});

test('docs/configuration.md names no STRATA_* variable the code does not read', () => {
  expect([...new Set(settings(page))].filter((name) => !code.has(name)).sort()).toEqual([]);
});
