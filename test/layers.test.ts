import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, test } from 'vitest';

/**
 * The layers of docs/architecture.md are held by the linter (biome.json): a module that imports upwards fails
 * `npm run lint`. Each probe is linted with the project's own biome.json in a folder of its own.
 */

const ROOT = join(import.meta.dirname, '..');
const BIOME = join(ROOT, 'node_modules', '.bin', 'biome');
const work = mkdtempSync(join(tmpdir(), 'strata-layers-'));
copyFileSync(join(ROOT, 'biome.json'), join(work, 'biome.json'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The diagnostics biome gives for one module at `path` (relative to the repository) holding `text`. */
async function lint(path: string, text: string): Promise<string> {
  mkdirSync(join(work, dirname(path)), { recursive: true });
  writeFileSync(join(work, path), text);
  try {
    await promisify(execFile)(BIOME, ['lint', '--max-diagnostics=20', path], { cwd: work });
    return '';
  } catch (err) {
    const { stdout, stderr } = err as { stdout: string; stderr: string };
    return `${stdout}${stderr}`;
  } finally {
    rmSync(join(work, path));
  }
}

const importing = (from: string) => `import { x } from '${from}';\nexport const y = x;\n`;

describe('layers call downwards only', () => {
  test.each([
    ['src/engine/search/probe.ts', '../../http/errors.js'],
    ['src/engine/probe.ts', '../cli/output.js'],
    ['src/control/probe.ts', '../http/guard.js'],
    ['src/storage/probe.ts', '../http/app.js'],
    ['src/arrow/probe.ts', '../cli/load.js'],
    ['src/sql/probe.ts', '../http/errors.js'],
  ])('%s may not import %s', async (path, from) => {
    expect(await lint(path, importing(from))).toMatch(/noRestrictedImports/);
  });

  test.each([
    ['src/sql/probe.ts', '../engine/lance.js'],
    ['src/sql/probe.ts', '../control/store.js'],
    ['src/sql/probe.ts', '../storage/objects.js'],
  ])('sql/ is a port: %s may not import %s', async (path, from) => {
    expect(await lint(path, importing(from))).toMatch(/sql\/ is a port of its own/);
  });

  test.each([
    ['src/http/probe.ts', '../engine/lance.js'],
    ['src/sql/probe.ts', '../arrow/arrow.js'],
    ['src/sql/probe.ts', '../errors.js'],
    ['src/engine/probe.ts', '../control/store.js'],
  ])('%s may import %s', async (path, from) => {
    expect(await lint(path, importing(from))).toBe('');
  });

  test('only engine/lance/ imports LanceDB', async () => {
    expect(await lint('src/engine/search/probe.ts', importing('@lancedb/lancedb'))).toMatch(/Only engine\/lance\//);
    expect(await lint('src/engine/lance/probe.ts', importing('@lancedb/lancedb'))).toBe('');
  });

  test.each([
    ['src/engine/workers/probe.ts', '../lance/rows.js'],
    ['src/http/probe.ts', '../engine/lance/store.js'],
    ['src/engine/probe.ts', './lance/legs.js'],
  ])('engine/lance/ is reached through its index.js alone: %s may not import %s', async (path, from) => {
    expect(await lint(path, importing(from))).toMatch(/reached through its index\.js alone/);
  });

  test.each([
    ['src/engine/search/probe.ts', '../lance/index.js'],
    ['src/engine/writes/probe.ts', '../lance/index.js'],
    ['src/engine/upkeep/probe.ts', '../lance/rows.js'],
    ['src/engine/tables/probe.ts', '../lance.js'],
  ])('search, writes, upkeep and tables speak the row-source port: %s may not import %s', async (path, from) => {
    expect(await lint(path, importing(from))).toMatch(/speak the row-source port/);
  });

  test.each([
    ['src/engine/workers/probe.ts', '../lance/index.js'],
    ['src/engine/search/probe.ts', '../rows/source.js'],
    ['src/engine/lance/probe.ts', './lance.js'],
  ])('%s may import %s', async (path, from) => {
    expect(await lint(path, importing(from))).toBe('');
  });
});

test('Arrow values come from arrow/arrow.ts alone: elsewhere apache-arrow is imported for types only', () => {
  const files = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
    );
  const valueImports = files(join(ROOT, 'src'))
    .filter((file) => !file.endsWith(join('arrow', 'arrow.ts')))
    .filter((file) => /^import (?!type )[^;]*from 'apache-arrow'/m.test(readFileSync(file, 'utf8')))
    .map((file) => file.slice(ROOT.length + 1));
  expect(valueImports).toEqual([]);
});
