import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openDatabase } from '../src/http/guard.js';
import { DurableFolder, setAsideTornManifest } from '../src/storage/durable.js';
import { activeLocalDatabase, type Client, startStrata, type TestServer } from './support/server.js';
import { tablesOf } from './support/tables.js';

const dirs: string[] = [];
let strata: TestServer;
let api: Client;
beforeAll(async () => {
  strata = await startStrata();
  api = await strata.as('acme');
});
afterAll(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  await strata?.close();
});

describe('a durable folder', () => {
  test('syncs each file once, the hint Lance rewrites every time, and nothing of a folder that is gone', async () => {
    const root = mkdtempSync(join(tmpdir(), 'strata-durable-'));
    dirs.push(root);
    writeFileSync(join(root, 'a.manifest'), 'a');
    mkdirSync(join(root, 'data'));
    writeFileSync(join(root, 'data', 'one.lance'), '1');
    const folder = new DurableFolder(root);
    expect(await folder.pending()).toHaveLength(2);

    expect(await folder.sync()).toBe(2);
    expect(await folder.sync()).toBe(0);

    writeFileSync(join(root, 'data', 'two.lance'), '2');
    writeFileSync(join(root, 'latest_version_hint.json'), '{}');
    expect((await folder.pending()).map((p) => p.slice(root.length))).toEqual(
      expect.arrayContaining(['/data/two.lance', '/latest_version_hint.json']),
    );
    expect(await folder.sync()).toBe(2);
    expect(await folder.sync()).toBe(1); // the hint: Lance writes it again under the same name
    expect(await folder.pending()).toEqual([]);

    expect(await new DurableFolder(join(root, 'dropped')).sync()).toBe(0);
  });

  test('reads again only folders that changed, and finds what came into a folder below a settled one', async () => {
    const root = mkdtempSync(join(tmpdir(), 'strata-durable-'));
    dirs.push(root);
    mkdirSync(join(root, 'data'));
    writeFileSync(join(root, 'data', 'one.lance'), '1');
    const folder = new DurableFolder(root);
    expect(await folder.sync()).toBe(1);
    // Both folders last changed a minute ago: settled, so neither is read again while unchanged.
    const past = new Date(Date.now() - 60_000);
    utimesSync(join(root, 'data'), past, past);
    utimesSync(root, past, past);
    expect(await folder.sync()).toBe(0);

    writeFileSync(join(root, 'data', 'two.lance'), '2');
    expect(await folder.pending()).toEqual([join(root, 'data', 'two.lance')]);
    expect(await folder.sync()).toBe(1);
    expect(await folder.pending()).toEqual([]);
  });
});

describe('writes to local storage', () => {
  test('leave no file of the dataset unsynced once answered: create, append, replace, delete', async () => {
    await activeLocalDatabase(api, 'd');
    const db = tablesOf(api, 'd');
    const account = await strata.app.ctx.store.ensureAccount('acme');
    const pending = async () => {
      const lease = await openDatabase(strata.app.ctx, account.id, 'd');
      try {
        const table = await lease.worker.tables.get('t');
        expect(table.folder).toBeDefined();
        return table.folder?.pending();
      } finally {
        lease.release();
      }
    };
    await db.create({
      table_name: 't',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'body', type: 'utf8' },
      ],
      indexes: { fts: ['body'] },
    });
    expect(await pending()).toEqual([]);

    await db.append('t', [
      { id: 1, body: 'one' },
      { id: 2, body: 'two' },
    ]);
    expect(await pending()).toEqual([]);

    expect((await db.update('t', 'id = 1', [{ id: 1, body: 'uno' }])).status).toBe(200);
    expect(await pending()).toEqual([]);

    expect((await db.remove('t', 'id = 2')).status).toBe(200);
    expect(await pending()).toEqual([]);
  });
});

describe('a commit cut short by a power cut', () => {
  test('leaves a torn manifest, set aside when the table opens again: the answered rows are all there', async () => {
    await activeLocalDatabase(api, 'cut');
    const db = tablesOf(api, 'cut');
    await db.create({ table_name: 't', schema: [{ name: 'id', type: 'i64', nullable: false }] });
    await db.append('t', [{ id: 1 }, { id: 2 }]);
    const tables = join(strata.dataDir, 'buckets', 'cut', 'tables');
    const dataset = join(tables, readdirSync(tables).find((name) => name.endsWith('.lance')) as string);
    expect(await setAsideTornManifest(dataset)).toBeUndefined(); // a whole manifest is never touched

    // The worker lets go of the table, as after a restart; the next commit's manifest was created, never written.
    const account = await strata.app.ctx.store.ensureAccount('acme');
    const database = await strata.app.ctx.store.findDatabase(account.id, 'cut');
    await strata.app.ctx.workers.release(database?.id ?? '');
    const versions = join(dataset, '_versions');
    const newest = readdirSync(versions)
      .filter((name) => name.endsWith('.manifest'))
      .map((name) => BigInt(name.split('.')[0] as string))
      .sort((a, b) => Number(a - b))[0] as bigint;
    const torn = `${newest - 1n}.manifest`;
    writeFileSync(join(versions, torn), '');

    const read = await api.post('/v1/exact_match/cut', { table_name: 't', field_name: 'id', value: '2' });
    expect(read.status).toBe(200);
    expect(existsSync(join(dataset, '_interrupted', torn))).toBe(true);
    expect(existsSync(join(versions, torn))).toBe(false);
    await db.append('t', [{ id: 3 }]);
    const counted = await api.request(
      'POST',
      '/v1/query_sql/cut',
      { query: 'SELECT count(*) AS n FROM t' },
      { accept: 'application/json' },
    );
    expect(counted.json).toEqual({ data: [{ n: 3 }] });
  });
});
