import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { activeLocalDatabase, onTableHandle, startStrata, type TestServer, upkeepPass } from './support/server.js';
import { readTable, tablesOf } from './support/tables.js';

/**
 * A node that writes a keyed table alone finds keys through the key's index and the keys it wrote since the last
 * fold (`FreshRows`, kind `key`). These drive what could leave a key in neither place, or a stale one held: a
 * commit that landed without an answer, the budget letting go meanwhile, a commit the tier could not count in,
 * and a delete whose predicate changes its answer between its read and its commit. Faults are injected into the
 * real row source on the server's own table handle.
 */

let server: TestServer;
let tables: ReturnType<typeof tablesOf>;
let tableNo = 0;

beforeAll(async () => {
  server = await startStrata({ STRATA_UPKEEP_INTERVAL_MS: '3600000' });
  const api = await server.as('acme');
  await activeLocalDatabase(api, 'pk');
  tables = tablesOf(api, 'pk');
});
afterAll(() => server.close());

type Source = Record<string, (...args: unknown[]) => Promise<unknown>>;

const ids = async (name: string) =>
  (await readTable(server, 'acme', 'pk', name)).map((r) => Number(r.id)).sort((a, b) => a - b);

/** A new table keyed by `id`, with `columns` beside it, and `indexes`. */
async function keyed(columns: unknown[], indexes: Record<string, unknown> = {}): Promise<string> {
  const name = `t${tableNo++}`;
  const schema = [{ name: 'id', type: 'i64' }, ...columns];
  expect((await tables.create({ table_name: name, schema, indexes, primary_key: 'id' })).status).toBe(200);
  return name;
}

/** Makes the source's `method` commit and then fail, as a commit the bucket never answered; returns the undo. */
function landsUnanswered(source: Source, method: string): () => void {
  const original = source[method] as (...args: unknown[]) => Promise<unknown>;
  source[method] = async (...args: unknown[]) => {
    await original.apply(source, args);
    throw new Error('the bucket could not be reached to commit the write; it may have landed');
  };
  return () => {
    delete source[method];
  };
}

/** Runs upkeep's next pass on `name` with `during` run as its fold begins (before it) or ends (after it). */
async function passWith(name: string, when: 'before' | 'after', during: (source: Source) => Promise<void>) {
  await onTableHandle(server, 'pk', name, async (handle) => {
    const source = handle.rows as unknown as Source;
    const optimize = source.optimize as (...args: unknown[]) => Promise<unknown>;
    source.optimize = async (...args: unknown[]) => {
      if (when === 'before') await during(source);
      await optimize.apply(handle.rows, args);
      if (when === 'after') await during(source);
    };
    try {
      await upkeepPass(server, 'pk');
    } finally {
      delete source.optimize;
    }
  });
}

describe('keys found through the index and the fresh rows', () => {
  test('a write that landed unanswered during a fold, then the budget letting go: its key is still taken', async () => {
    const name = await keyed([{ name: 'body', type: 'utf8' }]);
    expect((await tables.append(name, [{ id: 1, body: 'a' }])).status).toBe(200);
    await upkeepPass(server, 'pk');
    expect((await tables.append(name, [{ id: 2, body: 'b' }])).status).toBe(200);
    await passWith(name, 'after', async (source) => {
      const restore = landsUnanswered(source, 'append');
      try {
        expect((await tables.append(name, [{ id: 50, body: 'lost' }])).status).toBe(500);
      } finally {
        restore();
      }
      await onTableHandle(server, 'pk', name, async (handle) => handle.fresh.overflow());
    });
    expect(await ids(name)).toEqual([1, 2, 50]);
    expect((await tables.append(name, [{ id: 50, body: 'again' }])).status).toBe(409);
    expect(await ids(name)).toEqual([1, 2, 50]);
  });

  test('a key change that landed unanswered, then a fold of another kind: the old key is free, the new one taken', async () => {
    // A vector column without its ANN index yet: a fold covers the key's index but not every kind.
    const name = await keyed([{ name: 'emb', type: 'vector', dim: 2 }], { vector: [{ column: 'emb', metric: 'l2' }] });
    const row = (id: number) => ({ id, emb: [id, 1] });
    expect((await tables.append(name, [row(1), row(2)])).status).toBe(200);
    await upkeepPass(server, 'pk');
    expect((await tables.append(name, [row(7)])).status).toBe(200);
    await passWith(name, 'before', async (source) => {
      const restore = landsUnanswered(source, 'replaceByKey');
      try {
        expect((await tables.update(name, 'id = 7', [row(8)])).status).toBe(500);
      } finally {
        restore();
      }
      expect((await tables.append(name, [row(20)])).status).toBe(200);
    });
    expect(await ids(name)).toEqual([1, 2, 8, 20]);
    const upserted = await tables.upsert(name, [row(7)]);
    expect(upserted.json).toEqual({ inserted: 1, updated: 0 });
    expect(await ids(name)).toEqual([1, 2, 7, 8, 20]);
    expect((await tables.append(name, [row(8)])).status).toBe(409);
  });

  test('a commit the fresh rows could not count in leaves keyed writes to read the keys Lance’s way', async () => {
    const name = await keyed([{ name: 'body', type: 'utf8' }], { fts: ['body'] });
    expect((await tables.append(name, [{ id: 1, body: 'a' }])).status).toBe(200);
    await upkeepPass(server, 'pk');
    await onTableHandle(server, 'pk', name, async (handle) => {
      const fresh = handle.fresh as unknown as { tokens: unknown };
      const tokens = fresh.tokens;
      // As when Lance fails to tokenize a text only it can.
      fresh.tokens = () => Promise.reject(new Error('tokenize failed'));
      try {
        expect((await tables.append(name, [{ id: 2, body: 'b' }])).status).toBe(200);
        expect((await tables.append(name, [{ id: 3, body: 'c' }])).status).toBe(200);
        expect((await tables.upsert(name, [{ id: 4, body: 'd' }])).status).toBe(200);
        expect((await tables.append(name, [{ id: 2, body: 'dup' }])).status).toBe(409);
      } finally {
        fresh.tokens = tokens;
      }
    });
    expect(await ids(name)).toEqual([1, 2, 3, 4]);
  });
});

describe('a delete whose predicate reads the clock', () => {
  /** Runs `remove` with the commit of its delete held 1.1 s: the clock passes a second between read and delete. */
  async function slowDelete(name: string, remove: () => Promise<void>) {
    await onTableHandle(server, 'pk', name, async (handle) => {
      const source = handle.rows as unknown as Source;
      const original = source.delete as (...args: unknown[]) => Promise<unknown>;
      source.delete = async (...args: unknown[]) => {
        await new Promise((resolve) => setTimeout(resolve, 1100));
        return original.apply(handle.rows, args);
      };
      try {
        await remove();
      } finally {
        delete source.delete;
      }
    });
  }
  const seconds = () => Math.floor(Date.now() / 1000);
  /** Waits until just after the clock's next second. */
  const nextSecond = () => new Promise((resolve) => setTimeout(resolve, 1000 - (Date.now() % 1000) + 10));

  test('a row it matched and then no longer does stays, and its key stays taken', async () => {
    const name = await keyed([{ name: 'expires', type: 'i64' }]);
    expect((await tables.append(name, [{ id: 1, expires: 0 }])).status).toBe(200);
    await upkeepPass(server, 'pk');
    await nextSecond();
    expect((await tables.append(name, [{ id: 5, expires: seconds() }])).status).toBe(200);
    await slowDelete(name, async () => {
      const removed = await tables.remove(name, 'expires >= to_unixtime(now())');
      expect(removed.json).toEqual({ matched: 1, n_tombstoned: 0, n_not_found: 1 });
    });
    expect(await ids(name)).toEqual([1, 5]);
    expect((await tables.append(name, [{ id: 5, expires: 0 }])).status).toBe(409);
  });

  test('a row that comes to match it between its read and its commit is not deleted', async () => {
    const name = await keyed([{ name: 'expires', type: 'i64' }]);
    expect((await tables.append(name, [{ id: 1, expires: 0 }])).status).toBe(200);
    await upkeepPass(server, 'pk');
    await nextSecond();
    const rows = [
      { id: 2, expires: 0 },
      { id: 5, expires: seconds() },
      { id: 6, expires: 4102444800 },
    ];
    expect((await tables.append(name, rows)).status).toBe(200);
    await slowDelete(name, async () => {
      const removed = await tables.remove(name, 'expires < to_unixtime(now()) AND id <> 1');
      expect(removed.json).toEqual({ matched: 1, n_tombstoned: 1, n_not_found: 0 });
    });
    expect(await ids(name)).toEqual([1, 5, 6]);
    expect((await tables.upsert(name, [{ id: 5, expires: 99 }])).json).toEqual({ inserted: 0, updated: 1 });
    expect(await ids(name)).toEqual([1, 5, 6]);
  });
});
