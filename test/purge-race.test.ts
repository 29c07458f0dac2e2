import { expect, test } from 'vitest';
import { activeLocalDatabase, serveFile } from './support/server.js';
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
