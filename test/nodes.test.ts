import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@lancedb/lancedb';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openControlStore } from '../src/control/open.js';
import type { ControlStore } from '../src/control/store.js';
import { rememberSecret } from './support/logs.js';
import { freshControlUrl } from './support/postgres.js';
import { cli, type Served, serveProcess } from './support/processes.js';
import { type Client, client, eventually } from './support/server.js';
import { type Row, tablesOf } from './support/tables.js';

/**
 * Three `strata serve` processes on one PostgreSQL control store and one data dir: any node answers any request
 * the same, and nothing acknowledged is lost or doubled (docs/deploy.md).
 * Slow: about 30 s, three server processes started, killed and started again, and waits for a lease to pass to
 * a survivor and for a purge to be let go by every node.
 */

const LEASE_MS = 1500;
let controlUrl: string;
let dataDir: string;
let store: ControlStore;
const nodes: Served[] = [];
let apis: Client[];
let secret: string;
let keyId: string;

const env = () => ({
  STRATA_CONTROL_URL: controlUrl,
  STRATA_UPKEEP_INTERVAL_MS: '200',
  STRATA_UPKEEP_LEASE_MS: String(LEASE_MS),
});

beforeAll(async () => {
  controlUrl = await freshControlUrl();
  dataDir = mkdtempSync(join(tmpdir(), 'strata-nodes-'));
  // The key is made with the CLI against PostgreSQL before any node starts: no node bootstraps one of its own.
  const created = await cli(['keys', 'create', '--account', 'acme'], { STRATA_CONTROL_URL: controlUrl });
  secret = created.stdout.trim();
  keyId = /created key (key_\w+)/.exec(created.stderr)?.[1] ?? '';
  rememberSecret(secret);
  nodes.push(...(await Promise.all([0, 1, 2].map(() => serveProcess(dataDir, env())))));
  apis = nodes.map((node) => client(node.url, `Bearer ${secret}`));
  store = await openControlStore({ controlUrl, dataDir });
}, 60_000);

afterAll(async () => {
  for (const node of nodes) node.child.kill('SIGKILL');
  await store?.close();
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
});

const api = (i: number): Client => apis[i % apis.length] as Client;
const db = (i: number, database: string) => tablesOf(api(i), database);

async function metric(node: Served, name: string): Promise<number> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

async function sqlRows(i: number, database: string, query: string): Promise<Row[]> {
  const res = await api(i).request<{ data: Row[] }>(
    'POST',
    `/v1/query_sql/${database}`,
    { query },
    { accept: 'application/json' },
  );
  if (res.status !== 200) throw new Error(`sql on node ${i}: ${res.status} ${JSON.stringify(res.json)}`);
  return res.json.data;
}

/** Registers a local database on node `on`, verifies it there, and waits until it is active. */
async function activeDatabase(on: number, name: string): Promise<void> {
  expect((await api(on).post('/v1/databases', { name, storage: { provider: 'local', bucket: name } })).status).toBe(
    201,
  );
  expect((await api(on).post(`/v1/databases/${name}/storage/verify`)).status).toBe(200);
  await eventually(
    async () => (await api(on).get<{ databases: { name: string; state: string }[] }>('/v1/databases')).json,
    (list) => list.databases.some((d) => d.name === name && d.state === 'active'),
  );
}

/** Sends a write, sending it again after `Retry-After` while it answers 409 write_conflict; never a 5xx. */
async function settled<T extends { status: number; json: { code?: string } }>(write: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    const res = await write();
    expect(res.status, JSON.stringify(res.json)).toBeLessThan(500);
    if (res.status !== 409 || res.json.code !== 'write_conflict' || attempt > 20) return res;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('three nodes on one PostgreSQL', () => {
  test('a database registered and verified on one node is served by the others once active', async () => {
    await activeDatabase(0, 'shop');

    for (const i of [1, 2]) {
      const res = await db(i, 'shop').list();
      expect(res.status).toBe(200);
    }
  });

  test('a verification running on another node answers 409 on this one', async () => {
    const pool = new pg.Client({ connectionString: controlUrl });
    await pool.connect();
    // A node verifying now holds the claim; another node's verify must not run beside it.
    await pool.query(
      "UPDATE databases SET verifying_until_ms = (extract(epoch from clock_timestamp()) * 1000)::bigint + 60000 WHERE name = 'shop'",
    );
    const res = await api(1).post('/v1/databases/shop/storage/verify');
    await pool.query("UPDATE databases SET verifying_until_ms = NULL WHERE name = 'shop'");
    await pool.end();

    expect(res.status).toBe(409);
    expect(res.json.code).toBe('verification_running');
    expect((await api(2).post('/v1/databases/shop/storage/verify')).status).toBe(200);
  });

  test('create on A, append on B, search and SQL on C: every acknowledged write is read by the next read anywhere', async () => {
    const created = await db(0, 'shop').create({
      table_name: 'notes',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'body', type: 'utf8' },
      ],
      indexes: { fts: ['body'] },
    });
    expect(created.status).toBe(200);

    for (let i = 0; i < 12; i++) {
      const appended = await db(i + 1, 'shop').append('notes', [{ id: i, body: `note number ${i} about apples` }]);
      expect(appended.status).toBe(200);
      const [count] = await sqlRows(i + 2, 'shop', 'SELECT count(*)::INTEGER AS n, max(id)::INTEGER AS top FROM notes');
      expect(count).toEqual({ n: i + 1, top: i });
      const found = await api(i + 3).request<{ data: Row[] }>(
        'POST',
        '/v1/hybrid_search/shop',
        { table_name: 'notes', text_field: 'body', text_query: `apples`, k: 100 },
        { accept: 'application/json' },
      );
      expect(found.json.data).toHaveLength(i + 1);
    }
  });

  test('appends, replaces and deletes through one node are searched exactly by the next, while upkeep folds them', async () => {
    // Each node's fresh rows follow the table; upkeep (every 200 ms, on whichever node holds the lease) folds and
    // compacts meanwhile, moving rows into the indexes between a search's index read and its fresh rows' read.
    const created = await db(0, 'shop').create({
      table_name: 'living',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'body', type: 'utf8' },
      ],
      indexes: { fts: ['body'] },
    });
    expect(created.status).toBe(200);
    const live = new Map<number, string>();
    let next = 0;
    let seed = 5;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const anyLive = () => [...live.keys()][Math.floor(random() * live.size)] as number;
    const missed: string[] = [];
    for (let step = 0; step < 30; step++) {
      const writes = db(step + 1, 'shop');
      const r = random();
      if (r < 0.6 || live.size < 3) {
        const rows = Array.from({ length: 1 + Math.floor(random() * 3) }, () => {
          const id = next++;
          return { id, body: `note ${id} about apples` };
        });
        expect((await writes.append('living', rows)).status).toBe(200);
        for (const row of rows) live.set(row.id, row.body);
      } else if (r < 0.8) {
        const id = anyLive();
        const body = `note ${id} about apples, replaced at ${step}`;
        expect((await writes.update('living', `id = ${id}`, [{ id, body }])).status).toBe(200);
        live.set(id, body);
      } else {
        const id = anyLive();
        expect((await writes.remove('living', `id = ${id}`)).status).toBe(200);
        live.delete(id);
      }
      const found = await api(step + 2).request<{ data: Row[] }>(
        'POST',
        '/v1/hybrid_search/shop',
        { table_name: 'living', text_field: 'body', text_query: 'apples', k: 200 },
        { accept: 'application/json' },
      );
      expect(found.status).toBe(200);
      const rows = new Map(found.json.data.map((row) => [row.id as number, row.body]));
      if (rows.size !== live.size || [...live].some(([id, text]) => rows.get(id) !== text)) {
        missed.push(`step ${step}: ${rows.size} of ${live.size} rows`);
      }
    }
    expect(missed).toEqual([]);
  }, 60_000);

  test('the same table created through every node at once: one creation wins, the others are told why', async () => {
    const answers = await Promise.all(
      [0, 1, 2].map((n) => db(n, 'shop').create({ table_name: 'raced', schema: [{ name: 'id', type: 'i64' }] })),
    );

    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    for (const lost of answers.filter((a) => a.status !== 200)) {
      expect(lost.status).toBe(409);
      expect(['table_exists', 'catalog_change_in_flight']).toContain(lost.json.code);
    }
    for (const n of [0, 1, 2]) expect((await db(n, 'shop').append('raced', [{ id: n }])).status).toBe(200);
    expect(await sqlRows(0, 'shop', 'SELECT count(*)::INTEGER AS n FROM raced')).toEqual([{ n: 3 }]);
  });

  test('appends through every node at once: every acknowledged row is there exactly once, with unique row keys', async () => {
    await db(0, 'shop').create({ table_name: 'events', schema: [{ name: 'id', type: 'i64', nullable: false }] });

    const perNode = 12;
    const rows = 50;
    const answers = await Promise.all(
      [0, 1, 2].map(async (n) => {
        const statuses: number[] = [];
        for (let b = 0; b < perNode; b++) {
          const first = (n * perNode + b) * rows;
          const res = await settled(() =>
            db(n, 'shop').append(
              'events',
              Array.from({ length: rows }, (_, i) => ({ id: first + i })),
            ),
          );
          statuses.push(res.status);
        }
        return statuses;
      }),
    );

    expect(answers.flat()).toEqual(Array(3 * perNode).fill(200));
    for (const i of [0, 1, 2]) {
      expect(
        await sqlRows(i, 'shop', 'SELECT count(*)::INTEGER AS n, count(DISTINCT id)::INTEGER AS d FROM events'),
      ).toEqual([{ n: 3 * perNode * rows, d: 3 * perNode * rows }]);
    }
    const keys = await rowKeys('shop', 'events');
    expect(keys.length).toBe(3 * perNode * rows);
    expect(new Set(keys).size).toBe(keys.length);
  }, 90_000);

  test('replaces and deletes through several nodes at once: each acknowledged write applied exactly once', async () => {
    await db(0, 'shop').create({
      table_name: 'stock',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'v', type: 'i64', nullable: false },
        { name: 'who', type: 'utf8' },
      ],
    });
    expect(
      (
        await db(0, 'shop').append(
          'stock',
          Array.from({ length: 120 }, (_, id) => ({ id, v: 0, who: 'seed' })),
        )
      ).status,
    ).toBe(200);

    // Node 0 replaces rows 0–39, node 1 deletes 40–79, node 2 replaces 80–119; all three fight over row 0 too.
    const work = async (n: number) => {
      const won: number[] = [];
      for (let k = 0; k < 40; k++) {
        const id = n * 40 + k;
        const res =
          n === 1
            ? await settled(() => db(n, 'shop').remove('stock', `id = ${id}`))
            : await settled(() => db(n, 'shop').update('stock', `id = ${id}`, [{ id, v: k + 1, who: `node${n}` }]));
        expect(res.status, JSON.stringify(res.json)).toBe(200);
        expect(res.json).toMatchObject({ matched: 1 });
        const shared = await settled(() =>
          db(n, 'shop').update('stock', 'id = 0', [{ id: 0, v: 1000 + n * 100 + k, who: `node${n}` }]),
        );
        if (shared.status === 200) won.push(1000 + n * 100 + k);
        else expect(shared.json.code).toMatch(/write_conflict|row_count_mismatch/);
      }
      return won;
    };
    const won = (await Promise.all([0, 1, 2].map(work))).flat();

    for (const i of [0, 1, 2]) {
      const rows = await sqlRows(i, 'shop', 'SELECT id::INTEGER AS id, v::INTEGER AS v, who FROM stock ORDER BY id');
      expect(rows.map((r) => r.id)).toEqual([
        ...Array.from({ length: 40 }, (_, k) => k),
        ...Array.from({ length: 40 }, (_, k) => 80 + k),
      ]);
      for (const row of rows) {
        const id = row.id as number;
        if (id === 0) expect(won).toContain(row.v);
        else if (id < 40) expect(row).toEqual({ id, v: id + 1, who: 'node0' });
        else expect(row).toEqual({ id, v: id - 80 + 1, who: 'node2' });
      }
    }
    const keys = await rowKeys('shop', 'stock');
    expect(new Set(keys).size).toBe(80);
  }, 120_000);

  test('a key revoked with the CLI stops working on every node within a second', async () => {
    const extra = await cli(['keys', 'create', '--account', 'acme'], { STRATA_CONTROL_URL: controlUrl });
    const other = extra.stdout.trim();
    rememberSecret(other);
    const otherId = /created key (key_\w+)/.exec(extra.stderr)?.[1] ?? '';
    for (const node of nodes) expect((await client(node.url, `Bearer ${other}`).get('/v1/databases')).status).toBe(200);

    await cli(['keys', 'revoke', otherId], { STRATA_CONTROL_URL: controlUrl });
    const revokedAt = Date.now();
    // Nodes remember live keys while they listen for revocations: the notice reaches them within milliseconds.
    const statuses = await eventually(
      () =>
        Promise.all(nodes.map(async (node) => (await client(node.url, `Bearer ${other}`).get('/v1/databases')).status)),
      (all) => all.every((s) => s === 401),
      2000,
    );

    expect(statuses).toEqual([401, 401, 401]);
    expect(Date.now() - revokedAt).toBeLessThan(1000);
    expect(keyId).toMatch(/^key_/);
  });

  test('a database deleted with purge on A is 404 on B at once, and B lets its worker go', async () => {
    await activeDatabase(0, 'brief');
    await db(0, 'brief').create({ table_name: 't', schema: [{ name: 'id', type: 'i64' }] });
    expect((await db(1, 'brief').append('t', [{ id: 1 }])).status).toBe(200);
    const placedBefore = await metric(nodes[1] as Served, 'strata_workers_placed');

    expect((await api(0).del('/v1/databases/brief?purge=true')).status).toBe(200);

    const after = await api(1).get('/v1/list_tables/brief');
    expect(after.status).toBe(404);
    expect(after.json.code).toBe('unknown_database');
    const placed = await eventually(
      () => metric(nodes[1] as Served, 'strata_workers_placed'),
      (n) => n === placedBefore - 1,
      3000,
    );
    expect(placed).toBe(placedBefore - 1);
  });

  test('one node looks after a table; killed, another takes its upkeep over within the lease and folds new rows', async () => {
    // Every node opens the table, so every node's upkeep may claim it.
    for (const i of [0, 1, 2]) {
      const res = await api(i).request('POST', '/v1/count/shop', {
        table_name: 'notes',
        field_name: 'body',
        query: 'apples',
      });
      expect(res.status).toBe(200);
    }
    const victim = await leaseHolderOf('shop', 'notes');
    expect(victim).toBeGreaterThanOrEqual(0);
    // Exactly one node holds it: the others' gauges count only the tables they hold.
    expect(await metric(nodes[victim] as Served, 'strata_upkeep_leases_held')).toBeGreaterThan(0);

    const killed = nodes[victim] as Served;
    killed.child.kill('SIGKILL');
    await killed.exited;
    const survivors = [0, 1, 2].filter((i) => i !== victim);
    const survivor = survivors[0] as number;
    const takenAt = Date.now();
    const takeovers = await eventually(
      async () =>
        (
          await Promise.all(survivors.map((i) => metric(nodes[i] as Served, 'strata_upkeep_lease_takeovers_total')))
        ).reduce((a, b) => a + b, 0),
      (n) => n >= 1,
      LEASE_MS * 4,
    );
    expect(takeovers).toBeGreaterThanOrEqual(1);
    expect(Date.now() - takenAt).toBeLessThan(LEASE_MS * 4);

    const appended = await db(survivor, 'shop').append('notes', [{ id: 500, body: 'a fresh row about pears' }]);
    expect(appended.status).toBe(200);
    // The takeover counted may be of another table the dead node held: this table's comes within the lease too.
    const newHolder = await eventually(
      () => leaseHolderOf('shop', 'notes'),
      (holder) => survivors.includes(holder),
      LEASE_MS * 4,
    );
    expect(survivors).toContain(newHolder);
    const unindexed = await eventually(
      async () => (await ftsStats('shop', 'notes')).numUnindexedRows,
      (n) => n === 0,
      10_000,
    );
    expect(unindexed).toBe(0);
  }, 60_000);
});

describe('schema migrations', () => {
  test('a node that finds a newer control store schema than it knows refuses to start, saying why', async () => {
    const url = await freshControlUrl();
    await cli(['keys', 'list'], { STRATA_CONTROL_URL: url }); // migrates the fresh database
    const control = new pg.Client({ connectionString: url });
    await control.connect();
    await control.query('INSERT INTO schema_migrations (version, applied_ms) VALUES (99, 0)');
    await control.end();

    const refused = await cli(['serve', '--data-dir', dataDir, '--port', '0'], { STRATA_CONTROL_URL: url }).catch(
      (err: { code: number; stderr: string }) => err,
    );

    expect((refused as { code: number }).code).toBe(2);
    expect((refused as { stderr: string }).stderr).toMatch(/schema is at version 99, newer than this build knows/);
  });
});

/** The node (index into `nodes`) whose upkeep holds the lease of a table: the holder is the id a node logs at start. */
async function leaseHolderOf(database: string, table: string): Promise<number> {
  const tableId = await tableIdOf(database, table);
  const control = new pg.Client({ connectionString: controlUrl });
  await control.connect();
  try {
    const holder = await eventually(
      async () =>
        (await control.query<{ holder: string }>('SELECT holder FROM upkeep_leases WHERE table_id = $1', [tableId]))
          .rows[0]?.holder,
      (found) => found !== undefined,
      5000,
    );
    return holder === undefined ? -1 : nodes.findIndex((node) => node.output().includes(holder));
  } finally {
    await control.end();
  }
}

async function tableIdOf(database: string, table: string): Promise<string> {
  const account = await store.ensureAccount('acme');
  const record = await store.findDatabase(account.id, database);
  if (record === undefined) throw new Error(`no database ${database}`);
  const found = await store.findTable(record.id, table);
  if (found === undefined) throw new Error(`no table ${table}`);
  return found.tableId;
}

async function openLance(database: string, table: string) {
  const connection = await connect(join(dataDir, 'buckets', database, 'tables'));
  return { connection, lance: await connection.openTable(await tableIdOf(database, table)) };
}

/** Every internal row key of a table, read straight from its Lance dataset. */
async function rowKeys(database: string, table: string): Promise<string[]> {
  const { connection, lance } = await openLance(database, table);
  try {
    const result = await lance.query().select(['_rowkey']).toArrow();
    return result.getChild('_rowkey')?.toArray().map(String) ?? [];
  } finally {
    lance.close();
    connection.close();
  }
}

async function ftsStats(database: string, table: string) {
  const { connection, lance } = await openLance(database, table);
  try {
    const index = (await lance.listIndices()).find((i) => i.columns.includes('body'));
    return (await lance.indexStats(index?.name ?? '')) ?? { numUnindexedRows: -1 };
  } finally {
    lance.close();
    connection.close();
  }
}
