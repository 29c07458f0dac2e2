import { mkdirSync, readdirSync, renameSync, symlinkSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Nodes, startNodes } from './support/nodes.js';
import { type Client, eventually } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * A database purged through one node while the others write to it and read it: from the moment the purge begins
 * no node takes a write it cannot keep, none answers 500, and once it ends every node answers 404 and its files
 * are gone; a purge that fails part-way leaves it refused on every node until a DELETE finishes it. Three
 * `strata serve` processes on one PostgreSQL and one data folder (about a minute: a purge among several nodes
 * waits for the others to let the database go, 12 s each, and one case purges twice).
 */

let install: Nodes;
let apis: Client[];
let dataDir: string;

beforeAll(async () => {
  install = await startNodes(3);
  ({ apis, dataDir } = install);
}, 60_000);
afterAll(() => install?.stop());

const api = (i: number) => apis[i] as Client;

/** The dataset folders the database's bucket holds. */
const datasets = (database: string): string[] => {
  try {
    return readdirSync(join(dataDir, 'buckets', database, 'tables')).sort();
  } catch {
    return [];
  }
};

async function loadedDatabase(name: string, tables: string[]): Promise<void> {
  expect((await api(0).post('/v1/databases', { name, storage: { provider: 'local', bucket: name } })).status).toBe(201);
  expect((await api(0).post(`/v1/databases/${name}/storage/verify`)).status).toBe(200);
  await eventually(
    async () => (await api(0).get<{ databases: { name: string; state: string }[] }>('/v1/databases')).json,
    (list) => list.databases.some((d) => d.name === name && d.state === 'active'),
  );
  for (const table of tables) {
    const created = await tablesOf(api(0), name).create({
      table_name: table,
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'body', type: 'utf8' },
      ],
      indexes: { fts: ['body'] },
    });
    expect(created.status).toBe(200);
    const rows = Array.from({ length: 200 }, (_, id) => ({ id, body: `row ${id} text` }));
    expect((await tablesOf(api(1), name).append(table, rows)).status).toBe(200);
  }
}

interface Outcome {
  node: number;
  op: string;
  status: number;
  code?: string;
  retryAfter: string | null;
}

async function send(node: number, op: string, database: string, seq: number): Promise<Outcome> {
  const path =
    op === 'append'
      ? [`/v1/append/${database}?table=t`, { data: [{ id: 10_000 + seq, body: `appended ${seq} text` }] }]
      : op === 'count'
        ? [`/v1/count/${database}`, { table_name: 't', field_name: 'body', query: 'text' }]
        : [`/v1/query_sql/${database}`, { query: 'SELECT count(*) AS n FROM t' }];
  const res = await api(node).raw('POST', path[0] as string, path[1]);
  const text = await res.text();
  let code: string | undefined;
  try {
    code = (JSON.parse(text) as { code?: string }).code;
  } catch {
    code = undefined;
  }
  return { node, op, status: res.status, code, retryAfter: res.headers.get('retry-after') };
}

/** Appends and reads through nodes 2 and 3 in loops, until `done()` and a few answers more. */
async function hammer(database: string, done: () => boolean): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  let seq = 0;
  await Promise.all(
    [1, 2].flatMap((node) =>
      ['append', 'append', 'count', 'sql'].map(async (op) => {
        let after = 0;
        while (after < 3) {
          if (done()) after++;
          outcomes.push(await send(node, op, database, seq++));
        }
      }),
    ),
  );
  return outcomes;
}

const allowed = (o: Outcome) =>
  (o.status >= 200 && o.status < 300) ||
  (o.status === 404 && o.code === 'unknown_database') ||
  (o.status === 503 && o.retryAfter !== null);

/** Every node answers 404 for the database, to writes and reads alike, and does not list it. */
async function goneEverywhere(database: string): Promise<void> {
  for (const node of [0, 1, 2]) {
    for (const op of ['append', 'count', 'sql']) {
      const outcome = await send(node, op, database, 0);
      expect(outcome, `${op} on node ${node + 1}`).toMatchObject({ status: 404, code: 'unknown_database' });
    }
    const list = await api(node).get<{ databases: { name: string }[] }>('/v1/databases');
    expect(list.json.databases.map((d) => d.name)).not.toContain(database);
  }
}

describe('three nodes on one PostgreSQL and one data folder', () => {
  test('a purge on node 1 while nodes 2 and 3 append and read: never a 500, then 404 everywhere and no files', async () => {
    await loadedDatabase('racing', ['t']);
    expect(datasets('racing')).toHaveLength(1);
    let finished = false;
    const racing = hammer('racing', () => finished);
    await new Promise((resolve) => setTimeout(resolve, 500));

    const tries: number[] = [];
    for (let i = 0; i < 5 && tries.at(-1) !== 200; i++) {
      tries.push((await api(0).del(`/v1/databases/racing?purge=true`)).status);
    }
    finished = true;
    const outcomes = await racing;

    expect(tries).toEqual([200]);
    expect(outcomes.filter((o) => !allowed(o))).toEqual([]);
    // The loops ran across the purge: writes were taken before it, refused during it.
    expect(outcomes.some((o) => o.op === 'append' && o.status === 200)).toBe(true);
    expect(outcomes.some((o) => o.code === 'database_deleting' || o.code === 'unknown_database')).toBe(true);
    await goneEverywhere('racing');
    expect(datasets('racing')).toEqual([]);
    // No write that was under way when the purge began brings a file back afterwards.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(datasets('racing')).toEqual([]);
  }, 120_000);

  test('a purge that fails part-way leaves the database refused on every node until a DELETE finishes it', async () => {
    await loadedDatabase('stuck', ['a', 't']);
    const folders = datasets('stuck');
    expect(folders).toHaveLength(2);
    // The dataset the purge reaches last becomes a symbolic link, which the local store refuses to delete
    // through (root deletes any file, so a permission cannot make it fail).
    const last = join(dataDir, 'buckets', 'stuck', 'tables', folders.at(-1) as string);
    const aside = join(dataDir, 'aside');
    mkdirSync(aside);
    renameSync(last, join(aside, 'moved.lance'));
    symlinkSync(join(aside, 'moved.lance'), last);

    const failed = await api(0).del('/v1/databases/stuck?purge=true');
    expect(failed.status).toBe(503);
    expect(datasets('stuck')).toHaveLength(1);

    for (const node of [0, 1, 2]) {
      for (const op of ['append', 'count', 'sql']) {
        const outcome = await send(node, op, 'stuck', 1);
        expect(outcome, `${op} on node ${node + 1}`).toMatchObject({ status: 503, code: 'database_deleting' });
        expect(outcome.retryAfter).not.toBeNull();
      }
      const list = await api(node).get<{ databases: { name: string }[] }>('/v1/databases');
      expect(list.json.databases.map((d) => d.name)).not.toContain('stuck');
      expect((await api(node).post('/v1/databases/stuck/storage/verify')).status).toBe(503);
    }

    // What stood in the way is gone; a plain DELETE on another node finishes the purge that began.
    unlinkSync(last);
    const resumed = await api(1).del<{ purged: boolean }>('/v1/databases/stuck');
    expect(resumed.status).toBe(200);
    expect(resumed.json.purged).toBe(true);
    await goneEverywhere('stuck');
    expect(datasets('stuck')).toEqual([]);
  }, 120_000);
});
