import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { rememberSecret } from './support/logs.js';
import { type Served, serveProcess } from './support/processes.js';
import { activeLocalDatabase, type Client, client } from './support/server.js';
import { type Row, tablesOf } from './support/tables.js';

/**
 * The server kills itself (SIGKILL) after every third committed write, before answering it: a test build's kill
 * point (`STRATA_TEST_CRASH_AFTER_COMMIT_EVERY`). Each write is sent again with its key, after a restart, until
 * it is answered; the table must then hold every write exactly once.
 * Slow: about 14 s, a `strata serve` process started again after each kill.
 */

const KEY = `sk_${'i'.repeat(43)}`;
const dataDir = mkdtempSync(join(tmpdir(), 'strata-idem-crash-'));
const env = {
  STRATA_BOOTSTRAP_KEY: KEY,
  STRATA_TEST_CRASH_AFTER_COMMIT_EVERY: '3',
  // A dead node's hold on a key lapses this soon, so the retry does not wait long to look for its write.
  STRATA_IDEMPOTENCY_HOLD_MS: '300',
};
let node: Served | undefined;
afterAll(() => {
  node?.child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

async function start(): Promise<Client> {
  node = await serveProcess(dataDir, env);
  return client(node.url, `Bearer ${KEY}`);
}

type Op =
  | { kind: 'append'; rows: { id: number; v: number }[] }
  | { kind: 'update'; id: number; v: number }
  | { kind: 'delete'; id: number };

/** Appends mostly, with replaces of earlier rows and deletes among them. */
function operations(): Op[] {
  const ops: Op[] = [];
  for (let n = 0; n < 24; n++) {
    if (n % 4 === 3) ops.push({ kind: 'update', id: (n - 3) * 10, v: 1000 + n });
    else if (n % 6 === 5) ops.push({ kind: 'delete', id: (n - 5) * 10 + 1 });
    else ops.push({ kind: 'append', rows: Array.from({ length: 5 }, (_, i) => ({ id: n * 10 + i, v: n })) });
  }
  return ops;
}

function request(op: Op): { path: string; body?: unknown } {
  if (op.kind === 'append') return { path: '/v1/append/db?table=t', body: { data: op.rows } };
  const predicate = encodeURIComponent(`id = ${op.id}`);
  if (op.kind === 'update') {
    return { path: `/v1/update/db?table=t&predicate=${predicate}`, body: { data: [{ id: op.id, v: op.v }] } };
  }
  return { path: `/v1/delete/db?table=t&predicate=${predicate}` };
}

test('writes retried with their keys after the server died between commit and reply land exactly once', async () => {
  rememberSecret(KEY);
  let api = await start();
  await activeLocalDatabase(api, 'db');
  const created = await tablesOf(api, 'db').create({
    table_name: 't',
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'v', type: 'i64', nullable: false },
    ],
  });
  expect(created.status).toBe(200);

  const model = new Map<number, number>();
  let crashes = 0;
  let replays = 0;
  for (const [n, op] of operations().entries()) {
    const { path, body } = request(op);
    for (let attempt = 0; ; attempt++) {
      expect(attempt, `op ${n} never answered`).toBeLessThan(40);
      const sent = await api
        .request('POST', path, body, { 'idempotency-key': `op-${n}`, accept: 'application/json' })
        .catch(() => undefined);
      if (sent === undefined) {
        // The server died with the write committed and unanswered: start it again and send the same request.
        crashes++;
        await node?.exited;
        api = await start();
        continue;
      }
      if (sent.status === 200) {
        if (sent.headers.get('idempotent-replayed') === 'true') replays++;
        if (op.kind !== 'append') expect(sent.json).toMatchObject({ matched: 1, n_tombstoned: 1, n_not_found: 0 });
        break;
      }
      // The database's worker is placed again after a restart; a dead node's hold on the key lapses.
      expect([409, 503], JSON.stringify(sent.json)).toContain(sent.status);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    if (op.kind === 'append') for (const row of op.rows) model.set(row.id, row.v);
    else if (op.kind === 'update') model.set(op.id, op.v);
    else model.delete(op.id);
  }

  expect(crashes).toBeGreaterThanOrEqual(6);
  expect(replays).toBeGreaterThanOrEqual(crashes);
  const stored = await api.request<{ data: Row[] }>(
    'POST',
    '/v1/query_sql/db',
    { query: 'SELECT id::INTEGER AS id, v::INTEGER AS v FROM t ORDER BY id' },
    { accept: 'application/json' },
  );
  expect(stored.json.data).toEqual([...model.entries()].sort((a, b) => a[0] - b[0]).map(([id, v]) => ({ id, v })));
}, 120_000);
