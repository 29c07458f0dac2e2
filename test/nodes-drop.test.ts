import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { rememberSecret } from './support/logs.js';
import { startNodes } from './support/nodes.js';
import { cli, type Served, serveProcess } from './support/processes.js';
import { activeLocalDatabase, type Client, client, eventually } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * A table dropped, with or without purge, while a node looks after its upkeep: that upkeep and its lease end with
 * the drop, on every node, at once. Two `strata serve` processes on one PostgreSQL and one data folder, then one on
 * SQLite (about 20 s: each case waits out several upkeep passes).
 */

const PASS_MS = 200;
/** Upkeep passes a case watches after the drop. */
const PASSES = 8;

const env = { STRATA_UPKEEP_INTERVAL_MS: String(PASS_MS), STRATA_UPKEEP_LEASE_MS: '1500' };
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** The nodes of an install, one client per node, and the upkeep leases its control store holds. */
interface Install {
  nodes: Served[];
  apis: Client[];
  /** Holder of each lease, by table id. */
  leases(): Promise<Map<string, string>>;
}

async function metric(node: Served, name: string): Promise<number> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

const failedPasses = (node: Served) =>
  node
    .output()
    .split('\n')
    .filter((line) => line.includes('index upkeep failed')).length;

/**
 * Creates tables `dropped` and `kept` through the first node, writes both through the last one (the only node that
 * opens them, so its upkeep takes their leases), waits until it holds both, drops `dropped` through the first node,
 * and watches `PASSES` upkeep passes.
 */
async function dropWhileLookedAfter(install: Install, database: string, purge: boolean): Promise<void> {
  const [first, last] = [install.apis[0] as Client, install.apis.at(-1) as Client];
  const keeper = install.nodes.at(-1) as Served;
  // The leases of this case's tables only: an earlier case's table may be looked after still.
  const earlier = new Set((await install.leases()).keys());
  const leases = async () => new Map([...(await install.leases())].filter(([id]) => !earlier.has(id)));
  await activeLocalDatabase(first, database);
  for (const table of ['dropped', 'kept']) {
    const created = await tablesOf(first, database).create({
      table_name: table,
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'body', type: 'utf8' },
      ],
      indexes: { fts: ['body'] },
    });
    expect(created.status).toBe(200);
    const rows = Array.from({ length: 20 }, (_, id) => ({ id, body: `row ${id} of ${table}` }));
    expect((await tablesOf(last, database).append(table, rows)).status).toBe(200);
  }
  const before = await eventually(
    leases,
    (held) => held.size === 2 && [...held.values()].every((holder) => keeper.output().includes(holder)),
    10_000,
  );
  expect(before.size).toBe(2);
  const failuresBefore = await Promise.all(install.nodes.map((node) => metric(node, 'strata_upkeep_failures_total')));
  const logBefore = install.nodes.map(failedPasses);
  const heldBefore = await metric(keeper, 'strata_upkeep_leases_held');

  const dropped = await tablesOf(first, database).drop('dropped', purge);
  expect(dropped.status).toBe(200);
  expect(dropped.json.purged).toBe(purge);
  await new Promise((resolve) => setTimeout(resolve, PASSES * PASS_MS));

  // No node tried the dropped table's upkeep again, and only the table that is left has a lease, still its node's.
  expect(await Promise.all(install.nodes.map((node) => metric(node, 'strata_upkeep_failures_total')))).toEqual(
    failuresBefore,
  );
  expect(install.nodes.map(failedPasses)).toEqual(logBefore);
  const after = await leases();
  expect(after.size).toBe(1);
  for (const [id, holder] of after) expect(before.get(id)).toBe(holder);
  expect(await metric(keeper, 'strata_upkeep_leases_held')).toBe(heldBefore - 1);
}

describe('two nodes on one PostgreSQL', () => {
  let install: Install;
  beforeAll(async () => {
    const started = await startNodes(2, env);
    cleanups.push(() => started.stop());
    const { controlUrl, nodes, apis } = started;
    const control = new pg.Client({ connectionString: controlUrl });
    await control.connect();
    cleanups.push(() => control.end());
    install = {
      nodes,
      apis,
      async leases() {
        const rows = await control.query<{ table_id: string; holder: string }>(
          'SELECT table_id, holder FROM upkeep_leases',
        );
        return new Map(rows.rows.map((row) => [row.table_id, row.holder]));
      },
    };
  }, 60_000);

  test('a table dropped with purge on A while B looks after it: no node works on it again, its lease is gone', async () => {
    await dropWhileLookedAfter(install, 'purged', true);
  }, 60_000);

  test('a table dropped without purge on A while B looks after it: the same', async () => {
    await dropWhileLookedAfter(install, 'unpurged', false);
  }, 60_000);
});

describe('one node on SQLite', () => {
  let install: Install;
  beforeAll(async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'strata-drop-single-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const created = await cli(['keys', 'create', '--account', 'acme', '--data-dir', dataDir]);
    const secret = created.stdout.trim();
    rememberSecret(secret);
    const node = await serveProcess(dataDir, env);
    cleanups.push(() => {
      node.child.kill('SIGKILL');
    });
    install = {
      nodes: [node],
      apis: [client(node.url, `Bearer ${secret}`)],
      async leases() {
        const db = new Database(join(dataDir, 'control.sqlite'), { readonly: true });
        try {
          const rows = db.prepare('SELECT table_id, holder FROM upkeep_leases').all() as {
            table_id: string;
            holder: string;
          }[];
          return new Map(rows.map((row) => [row.table_id, row.holder]));
        } finally {
          db.close();
        }
      },
    };
  }, 60_000);

  test('a table dropped with purge while its node looks after it: the upkeep and its lease end', async () => {
    await dropWhileLookedAfter(install, 'purged', true);
  }, 60_000);

  test('a table dropped without purge: the same', async () => {
    await dropWhileLookedAfter(install, 'unpurged', false);
  }, 60_000);
});
