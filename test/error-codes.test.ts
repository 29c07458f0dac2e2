import { readFileSync } from 'node:fs';
import { beforeAll, expect, test } from 'vitest';
import { ERROR_CODES } from '../src/errors.js';
import { serveFile } from './support/server.js';

const { strata } = serveFile();

beforeAll(async () => {});

const codes = Object.keys(ERROR_CODES).sort();

test('docs/errors.md lists every error code, and no other', () => {
  const doc = readFileSync(new URL('../docs/errors.md', import.meta.url), 'utf8');
  const listed = [...doc.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]).sort();

  expect(listed).toEqual(codes);
});

test('the OpenAPI document names every error code on the error body', async () => {
  const document = JSON.stringify(await (await fetch(`${strata.url}/v1/openapi.json`)).json());

  for (const code of codes) expect(document, code).toContain(code);
});

test('an error answer carries its code beside its sentence', async () => {
  const res = await fetch(`${strata.url}/v1/databases`);

  expect(res.status).toBe(401);
  expect(await res.json()).toEqual({ error: 'missing or invalid API key', code: 'unauthorized' });
});
