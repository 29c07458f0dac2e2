import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@lancedb/lancedb';
import { afterAll, expect, test } from 'vitest';
import { rng } from '../bench/corpus.js';
import { rowsToJson } from '../src/arrow/to-json.js';
import { SqliteControlStore } from '../src/control/sqlite.js';
import { rememberSecret } from './support/logs.js';
import { activeLocalDatabase, client, freePort } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * A `strata serve` process killed with SIGKILL 50 times in the middle of updates: every row set the bucket holds is
 * wholly old or wholly new, and no acknowledged write is lost. Slow: about 2 minutes, a server process started 50
 * times, with the bucket read between kills while no server runs.
 */

const CLI = join(import.meta.dirname, '..', 'dist', 'cli.js');
const KEY = `sk_${'c'.repeat(43)}`;
const GROUPS = 6;
const PER_GROUP = 4;
const KILLS = 50;

const dataDir = mkdtempSync(join(tmpdir(), 'strata-crash-'));
let child: ChildProcess | undefined;
afterAll(() => {
  child?.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

async function start(): Promise<string> {
  const port = await freePort();
  child = spawn(
    process.execPath,
    [CLI, 'serve', '--data-dir', dataDir, '--port', String(port), '--log-level', 'warn'],
    {
      env: { ...process.env, STRATA_BOOTSTRAP_KEY: KEY },
      stdio: 'ignore',
    },
  );
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 400; i++) {
    if (
      await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return url;
    await new Promise((resolve) => setTimeout(resolve, 15));
  }
  throw new Error('server did not start');
}

async function kill(): Promise<void> {
  const dying = child;
  if (dying === undefined) return;
  const exited = new Promise((resolve) => dying.once('exit', resolve));
  dying.kill('SIGKILL');
  await exited;
  child = undefined;
}

/** The rows as the bucket holds them, read while no server runs. */
async function bucketRows(): Promise<{ grp: number; gen: number }[]> {
  const store = new SqliteControlStore(join(dataDir, 'control.sqlite'));
  const account = await store.ensureAccount('default');
  const db = await store.findDatabase(account.id, 'crash');
  const table = await store.findTable(db?.id ?? '', 'ledger');
  await store.close();
  const connection = await connect(join(dataDir, 'buckets', 'crash', 'tables'));
  const lance = await connection.openTable(table?.tableId ?? '');
  const rows = rowsToJson(await lance.query().select(['grp', 'gen']).toArrow()) as { grp: number; gen: number }[];
  lance.close();
  connection.close();
  return rows;
}

test(`updates killed with SIGKILL ${KILLS} times leave every row set wholly old or wholly new, losing no acknowledged write`, async () => {
  rememberSecret(KEY);
  const rand = rng(20261123);
  let url = await start();
  const setup = client(url, `Bearer ${KEY}`);
  await activeLocalDatabase(setup, 'crash');
  await tablesOf(setup, 'crash').create({
    table_name: 'ledger',
    schema: [
      { name: 'grp', type: 'i64', nullable: false },
      { name: 'gen', type: 'i64', nullable: false },
      { name: 'slot', type: 'i32', nullable: false },
    ],
  });
  const rowsOf = (grp: number, gen: number) => Array.from({ length: PER_GROUP }, (_, slot) => ({ grp, gen, slot }));
  const initial = Array.from({ length: GROUPS }, (_, g) => rowsOf(g, 0)).flat();
  expect((await tablesOf(setup, 'crash').append('ledger', initial)).status).toBe(200);

  const acknowledged = new Array<number>(GROUPS).fill(0);
  const attempted = new Array<number>(GROUPS).fill(0);
  let acks = 0;

  for (let round = 0; round < KILLS; round++) {
    const api = tablesOf(client(url, `Bearer ${KEY}`), 'crash');
    let running = true;
    const writer = async (group: number) => {
      while (running) {
        const gen = (attempted[group] ?? 0) + 1;
        attempted[group] = gen;
        const res = await api.update('ledger', `grp = ${group}`, rowsOf(group, gen)).catch(() => undefined);
        if (res?.status === 200) {
          acknowledged[group] = gen;
          acks++;
        } else if (res !== undefined) {
          throw new Error(`update answered ${res.status}: ${JSON.stringify(res.json)}`);
        }
      }
    };
    const writers = [0, 1, 2].map((w) => writer((round + w * 2) % GROUPS));
    // The kill lands a random while after the round's first acknowledged write, not after a fixed start: on a
    // slow machine the first update after a restart (which opens the table) can outlast a fixed delay, and a
    // round without acknowledged writes tests nothing.
    const before = acks;
    for (let waited = 0; acks === before; waited += 5) {
      if (waited > 60_000) throw new Error(`no update was acknowledged within a minute in round ${round}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await new Promise((resolve) => setTimeout(resolve, rand() * 400));
    await kill();
    running = false;
    await Promise.all(writers);

    const rows = await bucketRows();
    for (let g = 0; g < GROUPS; g++) {
      const mine = rows.filter((r) => r.grp === g);
      expect(mine, `group ${g} after kill ${round}`).toHaveLength(PER_GROUP);
      const gens = new Set(mine.map((r) => r.gen));
      expect(gens.size, `group ${g} mixes generations ${[...gens]} after kill ${round}`).toBe(1);
      const gen = [...gens][0] as number;
      expect(gen).toBeGreaterThanOrEqual(acknowledged[g] as number);
      expect(gen).toBeLessThanOrEqual(attempted[g] as number);
    }
    url = await start();
  }
  await kill();
  expect(acks).toBeGreaterThan(KILLS);
}, 600_000);
