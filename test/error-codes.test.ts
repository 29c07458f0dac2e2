import { readFileSync } from 'node:fs';
import { beforeAll, expect, test } from 'vitest';
import { committing } from '../src/engine/lance/lance.js';
import { ERROR_CODES, StrataError } from '../src/errors.js';
import { statusOf } from '../src/http/errors.js';
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

test('a write that lost a commit Lance could not rebase is 409 write_conflict with Retry-After, never a 500', async () => {
  const lost = await committing(() => Promise.reject(new Error('Retryable commit conflict for version 7: ...'))).catch(
    (err: unknown) => err,
  );

  expect(lost).toBeInstanceOf(StrataError);
  expect(lost).toMatchObject({ kind: 'conflict', code: 'write_conflict', retryAfterS: 1 });
  expect(statusOf(lost as StrataError)).toBe(409);
  await expect(committing(() => Promise.reject(new Error('disk on fire')))).rejects.toThrow('disk on fire');
});

test('an error answer carries its code beside its sentence', async () => {
  const res = await fetch(`${strata.url}/v1/databases`);

  expect(res.status).toBe(401);
  expect(await res.json()).toEqual({ error: 'missing or invalid API key', code: 'unauthorized' });
});
