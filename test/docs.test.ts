import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startStrata, type TestServer } from './support/server.js';

const ROOT = resolve(import.meta.dirname, '..');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
/** The README and every page under docs/, as paths from the repository's root. */
const PAGES = ['README.md', ...readdirSync(join(ROOT, 'docs')).map((name) => `docs/${name}`)].filter((path) =>
  path.endsWith('.md'),
);

/** The anchors GitHub gives a page's headings: lowercased, punctuation dropped, spaces as hyphens. */
function anchorsOf(markdown: string): Set<string> {
  const headings = [...markdown.replace(/```[\s\S]*?```/g, '').matchAll(/^#{1,6} (.+)$/gm)];
  return new Set(
    headings.map((m) =>
      (m[1] as string)
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replaceAll(' ', '-'),
    ),
  );
}

let server: TestServer;
beforeAll(async () => {
  server = await startStrata();
});
afterAll(async () => {
  await server?.close();
});

describe('docs/api.md', () => {
  test('names every route of the OpenAPI document as "METHOD /path"', async () => {
    const res = await fetch(`${server.url}/v1/openapi.json`);
    const doc = (await res.json()) as { paths: Record<string, Record<string, unknown>> };
    const routes = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
    );
    const api = read('docs/api.md');

    expect(routes.length).toBeGreaterThanOrEqual(17);
    expect(routes.filter((route) => !api.includes(route))).toEqual([]);
  });

  test('names every route without a key', () => {
    const api = read('docs/api.md');

    for (const route of ['GET /healthz', 'GET /readyz', 'GET /metrics', 'GET /v1/openapi.json', 'GET /docs']) {
      expect(api).toContain(route);
    }
  });
});

describe('the README and docs/ stand on their own', () => {
  test.each(PAGES)('%s points at nothing outside the repository', (page) => {
    const text = read(page);
    const targets = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1] as string);
    const local = targets.filter((target) => !/^(https?:|mailto:|#)/.test(target));
    const outside = local.filter((target) => {
      const [path = '', anchor] = target.split('#');
      const file = path === '' ? join(ROOT, page) : resolve(ROOT, dirname(page), path);
      if (relative(ROOT, file).startsWith('..') || !existsSync(file)) return true;
      return anchor !== undefined && file.endsWith('.md') && !anchorsOf(readFileSync(file, 'utf8')).has(anchor);
    });

    expect(text).not.toMatch(/\.\.\/shared|shared\/(API|DESIGN|STYLE)\.md|seed\//);
    expect(outside, 'links to files or headings that are not in the repository').toEqual([]);
  });
});

describe('the README is a front door', () => {
  test('of at most 9,000 bytes, whose settings are on a page of their own', () => {
    const readme = read('README.md');

    expect(Buffer.byteLength(readme)).toBeLessThanOrEqual(9000);
    expect(readme).toContain('](docs/configuration.md)');
    expect(readme).not.toMatch(/^\| `STRATA_/m);
  });
});
