import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { LanceRows } from '../src/engine/lance/rows.js';
import { admit } from '../src/engine/workers/gate.js';
import { DurableFolder, GroupSync } from '../src/storage/durable.js';
import { setAsideInterruptedCommits } from '../src/storage/interrupted.js';
import { activeLocalDatabase, serveFile } from './support/server.js';
import { openDataset, tablesOf } from './support/tables.js';

const dirs: string[] = [];
const { strata, api } = serveFile();

beforeAll(async () => {});
afterAll(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
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

describe('a group sync', () => {
  /** A flush the test finishes by hand, counting how many began. */
  function flushes() {
    const started: { finish: (err?: Error) => void }[] = [];
    const flush = () =>
      new Promise<void>((resolve, reject) => {
        started.push({ finish: (err) => (err === undefined ? resolve() : reject(err)) });
      });
    return { started, flush };
  }
  const settled = (p: Promise<void>) => {
    const seen = { done: false, failed: undefined as unknown };
    p.then(
      () => {
        seen.done = true;
      },
      (err: unknown) => {
        seen.failed = err;
      },
    );
    return seen;
  };
  const tick = () => new Promise((resolve) => setImmediate(resolve));

  test('callers during a flush share the next one, which begins after it', async () => {
    const { started, flush } = flushes();
    const group = new GroupSync(flush);
    const first = settled(group.sync());
    const later = Array.from({ length: 5 }, () => settled(group.sync()));
    await tick();
    expect(started).toHaveLength(1);

    started[0]?.finish();
    await tick();
    // The first flush may have begun before their changes: they wait for the second.
    expect(first.done).toBe(true);
    expect(later.some((s) => s.done)).toBe(false);
    expect(started).toHaveLength(2);

    started[1]?.finish();
    await tick();
    expect(later.every((s) => s.done)).toBe(true);
    expect(started).toHaveLength(2);
  });

  test('a failed flush fails its callers and every later one, without flushing again', async () => {
    const { started, flush } = flushes();
    const group = new GroupSync(flush);
    const failing = settled(group.sync());
    const queued = settled(group.sync());
    await tick();
    started[0]?.finish(new Error('EIO'));
    await tick();
    expect((failing.failed as Error).message).toBe('EIO');
    // What the failed fsync could not write may be gone for good: no later flush can vouch for it.
    expect((queued.failed as Error).message).toBe('EIO');
    const later = settled(group.sync());
    await tick();
    expect((later.failed as Error).message).toBe('EIO');
    expect(started).toHaveLength(1);
  });
});

describe('writes to local storage', () => {
  test('leave no file of the dataset unsynced once answered: create, append, replace, delete', async () => {
    await activeLocalDatabase(api, 'd');
    const db = tablesOf(api, 'd');
    const account = await strata.app.ctx.store.ensureAccount('acme');
    const pending = async () => {
      const lease = await admit(strata.app.ctx.workers, await strata.app.ctx.databases.get(account.id, 'd'));
      try {
        const table = await lease.worker.tables.get('t');
        const { folder } = table.rows as LanceRows;
        expect(folder).toBeDefined();
        return folder?.pending();
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

/** The folder of the one table of a local database. */
function datasetOf(database: string): string {
  const tables = join(strata.dataDir, 'buckets', database, 'tables');
  return join(tables, readdirSync(tables).find((name) => name.endsWith('.lance')) as string);
}

/** Manifest names, newest first. */
function manifestsOf(dataset: string): string[] {
  return readdirSync(join(dataset, '_versions'))
    .filter((name) => name.endsWith('.manifest'))
    .sort((a, b) => Number(BigInt(a.split('.')[0] as string) - BigInt(b.split('.')[0] as string)));
}

/** The files under `folder` (relative to the dataset) that the newest manifest names and the one before does not. */
function newestCommitFiles(dataset: string, folder: string, named: (file: string) => Buffer): string[] {
  const [newest, before] = manifestsOf(dataset).map((m) => readFileSync(join(dataset, '_versions', m)));
  return readdirSync(join(dataset, folder)).filter(
    (file) => newest?.includes(named(file)) === true && before?.includes(named(file)) !== true,
  );
}

/** As after a restart: the database's worker lets go of its tables. */
async function releaseWorker(database: string): Promise<void> {
  const account = await strata.app.ctx.store.ensureAccount('acme');
  const found = await strata.app.ctx.store.findDatabase(account.id, database);
  await strata.app.ctx.workers.release(found?.id ?? '');
}

const countRows = async (database: string) =>
  (
    await api.request(
      'POST',
      `/v1/query_sql/${database}`,
      { query: 'SELECT count(*) AS n, sum(id) AS s FROM t' },
      { accept: 'application/json' },
    )
  ).json;

/** A table `t` (id, body with a full-text index) in a new local database. */
async function textTable(database: string) {
  await activeLocalDatabase(api, database);
  const db = tablesOf(api, database);
  await db.create({
    table_name: 't',
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'body', type: 'utf8' },
    ],
    indexes: { fts: ['body'] },
  });
  return db;
}

/** The ids a text search of `t` finds, in id order. */
async function textSearchIds(database: string, query: string): Promise<number[]> {
  const res = await api.request(
    'POST',
    `/v1/hybrid_search/${database}`,
    { table_name: 't', text_field: 'body', text_query: query, k: 10, projection: ['id'] },
    { accept: 'application/json' },
  );
  expect(res.status).toBe(200);
  return (res.json as { data: { id: number }[] }).data.map((row) => row.id).sort((a, b) => a - b);
}

describe('a commit cut short by a power cut', () => {
  test('leaves a torn manifest, set aside when the table opens again: the answered rows are all there', async () => {
    await activeLocalDatabase(api, 'cut');
    const db = tablesOf(api, 'cut');
    await db.create({ table_name: 't', schema: [{ name: 'id', type: 'i64', nullable: false }] });
    await db.append('t', [{ id: 1 }, { id: 2 }]);
    const dataset = datasetOf('cut');
    expect(await setAsideInterruptedCommits(dataset)).toBeUndefined(); // a readable dataset is never touched

    // The next commit's manifest was created, never written.
    await releaseWorker('cut');
    const newest = BigInt((manifestsOf(dataset)[0] as string).split('.')[0] as string);
    const torn = `${newest - 1n}.manifest`;
    writeFileSync(join(dataset, '_versions', torn), '');

    const read = await api.post('/v1/exact_match/cut', { table_name: 't', field_name: 'id', value: '2' });
    expect(read.status).toBe(200);
    expect(existsSync(join(dataset, '_interrupted', '_versions', torn))).toBe(true);
    expect(existsSync(join(dataset, '_versions', torn))).toBe(false);
    await db.append('t', [{ id: 3 }]);
    expect(await countRows('cut')).toEqual({ data: [{ n: 3, s: 6 }] });
  });

  test('leaves a whole manifest naming a torn data file: that version is set aside, the one before is read', async () => {
    const db = await textTable('cutdata');
    await db.append('t', [
      { id: 1, body: 'one' },
      { id: 2, body: 'two' },
    ]);
    // The last append's commit stands for one cut before its sync: its data file is written, its answer never was.
    await db.append('t', [{ id: 3, body: 'three' }]);
    await releaseWorker('cutdata');
    const dataset = datasetOf('cutdata');
    const [newest] = manifestsOf(dataset);
    const [file] = newestCommitFiles(dataset, 'data', (name) => Buffer.from(name));
    expect(file).toBeDefined();
    writeFileSync(join(dataset, 'data', file as string), '');

    expect(await countRows('cutdata')).toEqual({ data: [{ n: 2, s: 3 }] });
    expect(await textSearchIds('cutdata', 'one two three')).toEqual([1, 2]);
    expect(existsSync(join(dataset, '_interrupted', '_versions', newest as string))).toBe(true);
    expect(existsSync(join(dataset, '_interrupted', 'data', file as string))).toBe(true);
    await db.append('t', [{ id: 4, body: 'four' }]);
    expect(await countRows('cutdata')).toEqual({ data: [{ n: 3, s: 7 }] });
  });

  test('leaves a torn index file: the upkeep commit that made it is set aside, search still finds every row', async () => {
    const db = await textTable('cutindex');
    await db.append('t', [
      { id: 1, body: 'apple pie' },
      { id: 2, body: 'apple tart' },
    ]);
    await releaseWorker('cutindex');
    // Upkeep's commit, as it would fold the rows into the index, cut short before its files were synced.
    const dataset = await openDataset(strata, 'acme', 'cutindex', 't');
    await dataset.lance.optimize();
    dataset.close();
    const folder = datasetOf('cutindex');
    const [index] = newestCommitFiles(folder, '_indices', (uuid) => Buffer.from(uuid.replaceAll('-', ''), 'hex'));
    expect(index).toBeDefined();
    const files = readdirSync(join(folder, '_indices', index as string));
    for (const file of files) writeFileSync(join(folder, '_indices', index as string, file), '');

    expect(await textSearchIds('cutindex', 'apple')).toEqual([1, 2]);
    expect(readdirSync(join(folder, '_interrupted', '_indices', index as string)).sort()).toEqual(files.sort());
  });

  test('leaves a torn deletion file: the delete it belonged to is set aside, its rows are back', async () => {
    await activeLocalDatabase(api, 'cutdel');
    const db = tablesOf(api, 'cutdel');
    await db.create({ table_name: 't', schema: [{ name: 'id', type: 'i64', nullable: false }] });
    await db.append('t', [{ id: 1 }, { id: 2 }, { id: 3 }]);
    expect((await db.remove('t', 'id = 2')).status).toBe(200);
    await releaseWorker('cutdel');
    const dataset = datasetOf('cutdel');
    const deletions = readdirSync(join(dataset, '_deletions'));
    expect(deletions).toHaveLength(1);
    writeFileSync(join(dataset, '_deletions', deletions[0] as string), '');

    expect(await countRows('cutdel')).toEqual({ data: [{ n: 3, s: 6 }] });
    expect(existsSync(join(dataset, '_interrupted', '_deletions', deletions[0] as string))).toBe(true);
  });

  test('never touches a torn file no manifest names (one another process may still be writing)', async () => {
    await activeLocalDatabase(api, 'cutnone');
    const db = tablesOf(api, 'cutnone');
    await db.create({ table_name: 't', schema: [{ name: 'id', type: 'i64', nullable: false }] });
    await db.append('t', [{ id: 1 }]);
    await releaseWorker('cutnone');
    const dataset = datasetOf('cutnone');
    const writing = join(dataset, 'data', 'still-being-written.lance');
    writeFileSync(writing, 'LA');
    const before = manifestsOf(dataset);

    expect(await setAsideInterruptedCommits(dataset)).toBeUndefined();
    expect(existsSync(writing)).toBe(true);
    expect(manifestsOf(dataset)).toEqual(before);
    expect(await countRows('cutnone')).toEqual({ data: [{ n: 1, s: 1 }] });
  });
});
