import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { StrataAdmin, StrataError } from '@strata/client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../src/config.js';
import { capturedLogs, rememberSecret } from './support/logs.js';
import { CLI } from './support/processes.js';
import { client, eventually, startStrata, type TestServer, upkeepPass } from './support/server.js';
import { textTable } from './support/tables.js';

/**
 * The node's admin routes (docs/api.md, Admin) under its admin key: upkeep paused and resumed at run time, through
 * HTTP, the client and the CLI. Upkeep passes run by hand unless resumed (the timer's never comes).
 */

const ADMIN_KEY = `admin_${'k'.repeat(40)}`;
const run = promisify(execFile);

let server: TestServer;
beforeAll(async () => {
  rememberSecret(ADMIN_KEY);
  server = await startStrata({ STRATA_ADMIN_KEY: ADMIN_KEY, STRATA_UPKEEP_INTERVAL_MS: '3600000' });
});
afterAll(() => server.close());

const admin = () => client(server.url, `Bearer ${ADMIN_KEY}`);

describe('who may call the admin routes', () => {
  test('only the admin key: none, a wrong one or an account API key is 401', async () => {
    const account = await server.as('acme');
    for (const caller of [client(server.url, undefined), client(server.url, `Bearer ${'x'.repeat(48)}`), account]) {
      const reply = await caller.get<{ code: string }>('/v1/admin/upkeep');
      expect(reply.status).toBe(401);
      expect(reply.json.code).toBe('unauthorized');
    }
    // And the admin key is no API key.
    expect((await admin().get('/v1/databases')).status).toBe(401);
  });

  test('a node started without STRATA_ADMIN_KEY answers 401 admin_disabled', async () => {
    const plain = await startStrata();
    try {
      const reply = await client(plain.url, `Bearer ${ADMIN_KEY}`).get<{ code: string; error: string }>(
        '/v1/admin/upkeep',
      );
      expect(reply.status).toBe(401);
      expect(reply.json.code).toBe('admin_disabled');
      expect(reply.json.error).toContain('STRATA_ADMIN_KEY');
    } finally {
      await plain.close();
    }
  });

  test('an admin key shorter than 32 characters is refused at start', () => {
    expect(() => loadConfig({ STRATA_ADMIN_KEY: 'short' })).toThrow(/STRATA_ADMIN_KEY must be at least 32/);
    expect(() => loadConfig({ STRATA_ADMIN_KEY: `ключ_${'k'.repeat(40)}` })).toThrow(/printable ASCII/);
  });

  test('a body that is not {paused: boolean} is 400 naming the field', async () => {
    for (const body of [{}, { paused: 'yes' }, { paused: true, extra: 1 }]) {
      const reply = await admin().request<{ error: string }>('PUT', '/v1/admin/upkeep', body);
      expect(reply.status, JSON.stringify(body)).toBe(400);
      expect(reply.json.error).toMatch(/paused|extra/);
    }
  });
});

describe('upkeep paused at run time', () => {
  test('while paused no pass folds anything; resumed, upkeep folds at once', async () => {
    const acme = await server.as('acme');
    const tables = await textTable(acme, 'maint', 'docs');
    const paused = await admin().request<{ paused: boolean; passes_under_way: number; node: string }>(
      'PUT',
      '/v1/admin/upkeep',
      { paused: true },
    );
    expect(paused.status).toBe(200);
    expect(paused.json).toMatchObject({ paused: true, passes_under_way: 0 });
    expect(paused.json.node).toMatch(/^node_/);
    expect((await admin().get('/v1/admin/upkeep')).json).toMatchObject({ paused: true });

    const rows = Array.from({ length: 30 }, (_, i) => ({ id: i, body: `word ${i}` }));
    expect((await tables.append('docs', rows)).status).toBe(200);
    // The rows a search reads outside the full-text index, by its receipt.
    const outside = async () => {
      const reply = await acme.post('/v1/hybrid_search/maint', {
        table_name: 'docs',
        text_field: 'body',
        text_query: 'word',
        k: 1,
      });
      return Number(reply.headers.get('x-strata-fresh-rows'));
    };
    await upkeepPass(server, 'maint');
    expect(await outside()).toBe(30);

    const resumed = await admin().request<{ paused: boolean }>('PUT', '/v1/admin/upkeep', { paused: false });
    expect(resumed.json.paused).toBe(false);
    // Resuming starts a pass by itself: the timer's is an hour away.
    expect(await eventually(outside, (n) => n === 0)).toBe(0);
  });

  test('the client and the CLI pause and resume it too, and the key is never logged', async () => {
    const node = new StrataAdmin({ url: server.url, adminKey: ADMIN_KEY });
    expect(await node.pauseUpkeep()).toMatchObject({ paused: true, passes_under_way: 0 });
    expect((await node.upkeep()).paused).toBe(true);
    expect((await node.resumeUpkeep()).paused).toBe(false);
    const wrong = new StrataAdmin({ url: server.url, adminKey: 'y'.repeat(40), retry: { retries: 0 } });
    await expect(wrong.upkeep()).rejects.toBeInstanceOf(StrataError);

    const env = { ...process.env, STRATA_ADMIN_KEY: ADMIN_KEY };
    const cli = (verb: string) => run(process.execPath, [CLI, 'upkeep', verb, '--url', server.url], { env });
    expect(JSON.parse((await cli('pause')).stdout)).toMatchObject({ paused: true });
    expect(JSON.parse((await cli('status')).stdout)).toMatchObject({ paused: true });
    expect(JSON.parse((await cli('resume')).stdout)).toMatchObject({ paused: false });
    await expect(
      run(process.execPath, [CLI, 'upkeep', 'status', '--url', server.url], {
        env: { ...process.env, STRATA_ADMIN_KEY: '' },
      }),
    ).rejects.toMatchObject({ code: 2, stderr: expect.stringContaining('admin key is required') });
    expect(capturedLogs().join('')).not.toContain(ADMIN_KEY);
  });
});
