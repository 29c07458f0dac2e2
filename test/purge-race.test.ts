import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { serveProcess } from './support/processes.js';
import { activeLocalDatabase, client, serveFile } from './support/server.js';
import { tablesOf } from './support/tables.js';

// A database deleted (and purged) while appends, searches and SQL run on it: each request is answered as one
// of them would be a moment before or after (2xx, 404 unknown_database, or 503 with Retry-After while it is
// being deleted), never a 500 from an engine whose tables went away underneath.

const { strata, api } = serveFile();

async function loadedDatabase(name: string): Promise<void> {
  await activeLocalDatabase(api, name);
  const db = tablesOf(api, name);
  await db.create({
    table_name: 't',
    schema: [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'body', type: 'utf8' },
      { name: 'emb', type: 'vector', dim: 4 },
    ],
    indexes: { fts: ['body'], vector: [{ column: 'emb', metric: 'cosine' }] },
  });
  const rows = Array.from({ length: 500 }, (_, i) => ({ id: i, body: `row ${i} text`, emb: [1, i % 7, 2, 3] }));
  expect((await db.append('t', rows)).status).toBe(200);
}

type Outcome = { status: number; code?: string; retryAfter: string | null; op: string };

async function hammer(name: string, until: () => boolean): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  let i = 1000;
  const ops: Record<string, () => Promise<Response>> = {
    append: () =>
      api.raw('POST', `/v1/append/${name}?table=t`, { data: [{ id: i++, body: 'more text', emb: [1, 1, 1, 1] }] }),
    search: () =>
      api.raw('POST', `/v1/hybrid_search/${name}`, {
        table_name: 't',
        text_query: 'text',
        text_field: 'body',
        vector_query: [1, 2, 3, 4],
        vector_field: 'emb',
        k: 5,
      }),
    sql: () => api.raw('POST', `/v1/query_sql/${name}`, { query: 'SELECT count(*) AS n FROM t' }),
    delete: () => api.raw('POST', `/v1/delete/${name}?table=t&predicate=id%20%3D%203`),
  };
  await Promise.all(
    Object.entries(ops).map(async ([op, send]) => {
      // Each loop runs until the database is gone and has answered at least once more after.
      let after = 0;
      while (after < 2) {
        if (until()) after++;
        const res = await send();
        const text = await res.text();
        let code: string | undefined;
        try {
          code = (JSON.parse(text) as { code?: string }).code;
        } catch {
          code = undefined;
        }
        outcomes.push({ status: res.status, code, retryAfter: res.headers.get('retry-after'), op });
      }
    }),
  );
  return outcomes;
}

test.each([true, false])(
  'requests racing a delete (purge %s) are answered 2xx, 404 or 503 with Retry-After, never 500',
  async (purge) => {
    const name = purge ? 'racepurge' : 'racekeep';
    await loadedDatabase(name);
    let deleted = false;
    const racing = hammer(name, () => deleted);
    await new Promise((resolve) => setTimeout(resolve, 400));
    const res = await api.del(`/v1/databases/${name}?purge=${purge}`);
    deleted = true;
    const outcomes = await racing;

    expect(res.status).toBe(200);
    const bad = outcomes.filter(
      (o) =>
        !(
          (o.status >= 200 && o.status < 300) ||
          (o.status === 404 && o.code === 'unknown_database') ||
          (o.status === 503 && o.retryAfter !== null)
        ),
    );
    expect(bad).toEqual([]);
    expect(outcomes.filter((o) => o.status === 404).length).toBeGreaterThanOrEqual(8);
    expect(strata.app.ctx.workers.placedIds()).not.toContain(name);
  },
);

// A table dropped with purge while many writes are queued on it: a write that had started when it left the catalog
// wrote into its folder while the drop deleted it ("Directory not empty", a 500 for the drop), and reads with a
// filter that raced it answered 400 ("filter: Table t_… is closed"), both found by a soak test against a server of
// its own, as here. The race is narrow: this test did not catch either on the code before in two runs, and
// test/closed-table.test.ts holds the 400's cause exactly.
test('writes and filtered reads racing a table drop (purge) are answered 2xx, 404 or 429, and its files go', {
  timeout: 120_000,
}, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'strata-droprace-'));
  const key = `sk_${randomBytes(24).toString('base64url')}`;
  const served = await serveProcess(dataDir, { STRATA_BOOTSTRAP_KEY: key, LANCEDB_LOG: 'error' });
  try {
    const remote = client(served.url, `Bearer ${key}`);
    await activeLocalDatabase(remote, 'db');
    const db = tablesOf(remote, 'db');
    const tables = join(dataDir, 'buckets', 'db', 'tables');
    const send = (i: number): Promise<Response> => {
      if (i % 3 === 0) return remote.raw('POST', `/v1/delete/db?table=t&predicate=${encodeURIComponent(`id = ${i}`)}`);
      return remote.raw('POST', '/v1/hybrid_search/db', {
        table_name: 't',
        text_query: 'hello world',
        text_field: 'msg',
        k: 10,
        ...(i % 3 === 1 ? { filter: `id > ${i}` } : {}),
      });
    };
    const outcomes: { status: number; text: string }[] = [];
    for (let round = 0; round < 8; round++) {
      await db.create({
        table_name: 't',
        schema: [
          { name: 'id', type: 'i64' },
          { name: 'msg', type: 'utf8' },
        ],
        indexes: { fts: ['msg'] },
      });
      const rows = Array.from({ length: 2000 }, (_, id) => ({ id, msg: `hello world ${id}` }));
      expect((await db.append('t', rows)).status).toBe(200);
      let dropped = false;
      const dropping = (async () => {
        await new Promise((resolve) => setTimeout(resolve, 30 + 3 * round));
        const res = await remote.post('/v1/drop_table/db', { table_name: 't', purge: true });
        dropped = true;
        return res;
      })();
      const answers: Promise<void>[] = [];
      for (let i = 0; !dropped && i < 400; i++) {
        answers.push(send(i).then(async (r) => void outcomes.push({ status: r.status, text: await r.text() })));
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      expect((await dropping).status).toBe(200);
      await Promise.all(answers);
      expect(readdirSync(tables).filter((f) => f.endsWith('.lance'))).toEqual([]);
    }
    expect(outcomes.filter((o) => ![200, 404, 429].includes(o.status))).toEqual([]);
    expect(outcomes.filter((o) => o.status === 404).length).toBeGreaterThan(0);
  } finally {
    served.child.kill('SIGTERM');
    await served.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
});
