import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { RowChanges } from '../src/engine/lance/row-changes.js';
import { LiveTexts, referenceBm25 } from './support/bm25.js';
import { freshControlUrl } from './support/postgres.js';
import {
  activeLocalDatabase,
  type Client,
  onTableHandle,
  startStrata,
  type TestServer,
  upkeepPass,
} from './support/server.js';
import { tablesOf, textTable } from './support/tables.js';

/**
 * BM25 over the live rows where nodes share the table (docs/api.md, Freshness): a node that did not make the commits
 * since its statistics' version follows them by the rows that differ, and builds them from every row only once.
 * Two in-process servers on one PostgreSQL and one data folder; upkeep passes by hand.
 */

const HAND_RUN = { STRATA_UPKEEP_INTERVAL_MS: '3600000', STRATA_ANN_MIN_ROWS: '1000000' };

let writer: TestServer;
let reader: TestServer;

beforeAll(async () => {
  const controlUrl = await freshControlUrl();
  writer = await startStrata({ ...HAND_RUN, STRATA_CONTROL_URL: controlUrl });
  reader = await startStrata({ ...HAND_RUN, STRATA_CONTROL_URL: controlUrl, STRATA_DATA_DIR: writer.dataDir });
});
afterAll(async () => {
  await reader?.close();
  await writer?.close();
});

describe('BM25 over the live rows, written through another node', () => {
  test('scores the rows another node wrote, replaced and deleted, and folds, exactly, without building again', async () => {
    const words = ['red', 'kettle', 'blue', 'pot', 'tea', 'cup', 'green', 'steel'];
    const { model, check, random, pick } = await followedTexts('shared', words, { seed: 7, longest: 7, nulls: true });

    await model.append(80);
    await upkeepPass(writer, 'shared');
    // A tail: the reader scores it with statistics it builds once, from every row.
    await model.append(20);
    await check('first tail');
    for (let step = 0; step < 10; step++) {
      const action = pick(['append', 'append', 'update', 'delete', 'fold'] as const);
      if (action === 'append') await model.append(1 + Math.floor(random() * 20));
      if (action === 'fold') await upkeepPass(writer, 'shared');
      if (action === 'update' || action === 'delete') await model.change(action);
      // A tail stays, so that the reader scores the rows itself.
      await model.append(3);
      await check(`step ${step} (${action})`);
    }
    await onTableHandle(reader, 'shared', 'docs', async (handle) => {
      expect(handle.text.builds).toBe(1);
    });
  });
});

describe('the fresh rows of a table nodes share', () => {
  test('a node that did not write the rows outside the index reads them from the bucket and follows the table', async () => {
    const { model, check } = await followedTexts('followed', ['oak', 'ash', 'elm', 'fir', 'yew'], {
      seed: 3,
      longest: 5,
    });
    const held = async () => {
      let rows = -1;
      await onTableHandle(reader, 'followed', 'docs', async (handle) => {
        expect(handle.fresh.follows).toBe(true);
        expect(handle.fresh.usable('text')).toBe(true);
        rows = handle.fresh.size;
      });
      return rows;
    };

    await model.append(150);
    await upkeepPass(writer, 'followed');
    await model.append(30);
    // The first search on the other node reads the 30 rows written since the recorded fold from the bucket.
    await check('a tail written through the other node');
    expect(await held()).toBe(30);

    await model.change('update');
    await model.change('delete');
    await model.append(10);
    await check('replaced, deleted and appended through the other node');
    expect(await held()).toBeGreaterThanOrEqual(40);

    await upkeepPass(writer, 'followed');
    await model.append(5);
    await check('folded, and appended again');
    // The fold recorded let go of every row it covered.
    expect(await held()).toBe(5);

    // A step too large to read row by row (a compaction of a table under Lance's fragment target moves every row):
    // the rows outside the index at the new version are read instead, and held in place of those before.
    await upkeepPass(writer, 'followed');
    await model.append(7);
    await model.change('update');
    const skipped = await skipNextStep('followed');
    await check('a step past the rows a node follows one by one');
    expect(skipped()).toBe(1);
    // Exactly the rows the index misses (the ones appended and replaced since the fold, and any it left).
    let outside = -1;
    await onTableHandle(reader, 'followed', 'docs', async (handle) => {
      outside = (await handle.rows.indexStats('body_idx'))?.unindexedRows ?? -1;
    });
    expect(outside).toBeGreaterThanOrEqual(8);
    expect(await held()).toBe(outside);
  });
});

describe('a step of following that takes longer than a search waits', () => {
  test("leaves the searches meanwhile to Lance's own way, which answers the live rows, and is used once it is done", async () => {
    const words = ['gorse', 'heath', 'bracken', 'fern'];
    const { model, check } = await followedTexts('stalled', words, { seed: 11, longest: 4 });
    await model.append(60);
    await upkeepPass(writer, 'stalled');
    await model.append(12);
    await check('followed');

    // The reader's next step of following stalls until released (a fold's compaction of a large tail).
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let stalled = 0;
    await onTableHandle(reader, 'stalled', 'docs', async (handle) => {
      const rows = handle.rows as unknown as { changedRows: (...args: unknown[]) => Promise<unknown> };
      const original = rows.changedRows.bind(rows);
      rows.changedRows = async (...args: unknown[]) => {
        rows.changedRows = original;
        stalled++;
        await released;
        return original(...args);
      };
    });
    await model.append(5);
    await model.change('update');
    // Neither search waits for the step: both would hang until the release otherwise.
    await check('while the step stalls');
    await check('again while it stalls');
    expect(stalled).toBe(1);
    release();
    await model.append(3);
    await check('after it');
    let held = -1;
    await onTableHandle(reader, 'stalled', 'docs', async (handle) => {
      expect(handle.fresh.usable('text')).toBe(true);
      held = handle.fresh.size;
    });
    expect(held).toBeGreaterThanOrEqual(20);
  });
});

/**
 * Table `docs` of acme's database `database`, written through the writer and searched through the reader: bodies of
 * 1 to `longest` of `words` (one in 20 null, with `nulls`), and a check of the reader's scores of two random words.
 */
async function followedTexts(
  database: string,
  words: readonly string[],
  how: { seed: number; longest: number; nulls?: boolean },
) {
  const tables = await textTable(await writer.as('acme'), database, 'docs');
  const searches: Client = await reader.as('acme');
  const { random, pick } = seeded(how.seed);
  const body = () =>
    how.nulls === true && random() < 0.05
      ? null
      : Array.from({ length: 1 + Math.floor(random() * how.longest) }, () => pick(words)).join(' ');
  const model = new LiveTexts(tables, 'docs', body, random);
  const check = (step: string) => model.expectScores(searches, database, `${pick(words)} ${pick(words)}`, false, step);
  return { model, check, random, pick };
}

/** A repeatable stream of numbers in [0, 1) from `seed`, and a pick among values by it. */
function seeded(seed: number) {
  let state = seed;
  const random = () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)] as T;
  return { random, pick };
}

async function scores(client: Client, table: string, query: string) {
  const rows = await searchRows(client, 'racing', table, query);
  return new Map(rows.map((r) => [r.id, r._bm25] as const));
}

function expectLive(got: Map<number, number>, live: Map<number, string | null>, query: string) {
  const want = referenceBm25(live, query, false);
  expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
  for (const [id, score] of want) expect(Math.abs((got.get(id) ?? 0) - score) / score, `row ${id}`).toBeLessThan(1e-6);
}

/** Arms a one-shot hook: right after this node's write read the texts it will remove, `between` runs. */
async function afterTextRead(table: string, between: () => Promise<void>) {
  await onTableHandle(reader, 'racing', table, async (handle) => {
    const rows = handle.rows as unknown as { rowsByKey: (...args: unknown[]) => Promise<unknown> };
    const original = rows.rowsByKey.bind(rows);
    rows.rowsByKey = async (...args: unknown[]) => {
      const out = await original(...args);
      rows.rowsByKey = original;
      await between();
      return out;
    };
  });
}

describe('own writes racing another node on an unkeyed table', () => {
  beforeAll(async () => {
    await activeLocalDatabase(await writer.as('acme'), 'racing');
  });

  test.each(['update', 'delete', 'gone'] as const)(
    '%s: this node writes a row another node replaced (gone: deleted) after this node read its text',
    async (action) => {
      const table = `t_${action}`;
      const created = await tablesOf(await writer.as('acme'), 'racing').create({
        table_name: table,
        schema: [
          { name: 'id', type: 'i64', nullable: false },
          { name: 'body', type: 'utf8' },
        ],
        indexes: { fts: ['body'] },
      });
      expect(created.status).toBe(200);
      const otherTables = tablesOf(await writer.as('acme'), 'racing');
      const selfClient = await reader.as('acme');
      const selfTables = tablesOf(selfClient, 'racing');
      const live = new Map<number, string | null>([
        [0, 'red kettle'],
        [1, 'blue pot'],
        [2, 'green tea cup'],
        [3, 'steel kettle tea'],
        [4, 'red red pot'],
      ]);
      expect(
        (
          await otherTables.append(
            table,
            [...live].map(([id, body]) => ({ id, body })),
          )
        ).status,
      ).toBe(200);

      // This node builds its statistics, so that its writes read the texts they remove.
      const query = 'kettle tea zebra pot';
      expectLive(await scores(selfClient, table, query), live, query);

      // Between this node's read of row 3's text and its commit, another node replaces row 3.
      if (action === 'gone') {
        // Another node deletes row 3 meanwhile: this node's replace finds it gone (n_not_found 1) and writes nothing.
        await afterTextRead(table, async () => {
          expect((await otherTables.remove(table, 'id = 3')).status).toBe(200);
        });
        live.delete(3);
        const reply = await selfTables.update(table, 'id = 3', [{ id: 3, body: 'blue kettle' }]);
        expect(reply.status).toBe(200);
        expect((reply.json as { n_not_found: number }).n_not_found).toBe(1);
        expectLive(await scores(selfClient, table, query), live, query);
        return;
      }
      await afterTextRead(table, async () => {
        expect((await otherTables.update(table, 'id = 3', [{ id: 3, body: 'zebra zebra' }])).status).toBe(200);
      });
      live.set(3, 'zebra zebra');
      if (action === 'update') {
        const reply = await selfTables.update(table, 'id = 3', [{ id: 3, body: 'blue kettle' }]);
        expect(reply.status).toBe(200);
        live.set(3, 'blue kettle');
      } else {
        const reply = await selfTables.remove(table, 'id = 3');
        expect(reply.status).toBe(200);
        live.delete(3);
      }

      // The table's live rows, as Lance holds them.
      expectLive(await scores(selfClient, table, query), live, query);
    },
  );
});

describe('two nodes appending in turn', () => {
  test('one search after both nodes wrote reads the rows that differ once, not once per gap', async () => {
    const otherTables = await textTable(await writer.as('acme'), 'turns', 'docs');
    const selfClient: Client = await reader.as('acme');
    const selfTables = tablesOf(selfClient, 'turns');
    const live = new Map<number, string>();
    let id = 0;
    const rowsOf = (n: number) =>
      Array.from({ length: n }, () => {
        const row = { id: id++, body: `word${id % 7} kettle` };
        live.set(row.id, row.body);
        return row;
      });
    expect((await otherTables.append('docs', rowsOf(2000))).status).toBe(200);
    const search = async () => {
      const reply = await selfClient.request<{ data: { id: number; _bm25: number }[] }>(
        'POST',
        '/v1/hybrid_search/turns',
        { table_name: 'docs', text_field: 'body', text_query: 'word3', k: 5000, projection: ['id'] },
        { accept: 'application/json' },
      );
      expect(reply.status).toBe(200);
      return reply.json.data;
    };
    await search();
    const layouts = vi.spyOn(RowChanges.prototype as never, 'layoutAt');
    const reads = vi.spyOn(RowChanges.prototype as never, 'read');
    for (let turn = 0; turn < 10; turn++) {
      expect((await selfTables.append('docs', rowsOf(1))).status).toBe(200);
      expect((await otherTables.append('docs', rowsOf(1))).status).toBe(200);
    }
    const got = await search();
    const want = referenceBm25(live, 'word3', false);
    expect(got.length).toBe(want.size);
    // One read of the row ids of each of the two versions between, not one per gap the other node's appends left.
    expect(layouts.mock.calls.length).toBeLessThanOrEqual(2);
    // Where only the other node wrote since, the statistics and the fresh rows follow the same step: read once.
    expect((await otherTables.append('docs', rowsOf(3))).status).toBe(200);
    reads.mockClear();
    expect((await search()).length).toBe(referenceBm25(live, 'word3', false).size);
    expect(reads.mock.calls.length).toBe(1);
    layouts.mockRestore();
    reads.mockRestore();
  });
});

/**
 * Makes the reader's next step of following the table past what it reads row by row (a compaction of a table under
 * Lance's fragment target moves every row): its row changes are not to be had, once. Answers how many were skipped.
 */
async function skipNextStep(database: string): Promise<() => number> {
  let skipped = 0;
  await onTableHandle(reader, database, 'docs', async (handle) => {
    const rows = handle.rows as unknown as { changedRows: (...args: unknown[]) => Promise<unknown> };
    const original = rows.changedRows.bind(rows);
    rows.changedRows = async () => {
      rows.changedRows = original;
      skipped++;
      return undefined;
    };
  });
  return () => skipped;
}

async function searchRows(client: Client, database: string, table: string, query: string) {
  const reply = await client.request<{ data: { id: number; _bm25: number }[] }>(
    'POST',
    `/v1/hybrid_search/${database}`,
    { table_name: table, text_field: 'body', text_query: query, operator: 'or', k: 1000, projection: ['id'] },
    { accept: 'application/json' },
  );
  expect(reply.status, JSON.stringify(reply.json)).toBe(200);
  return reply.json.data;
}

/**
 * Arms one search's text leg on the reader: after its fresh rows were searched and before its index read, `between`
 * runs (another node's commit, and another search on this node that follows the table meanwhile).
 */
async function raceTextLeg(database: string, table: string, between: () => Promise<void>) {
  await onTableHandle(reader, database, table, async (handle) => {
    const fresh = handle.fresh as unknown as { searchText: (...args: unknown[]) => Promise<unknown> };
    const rows = handle.rows as unknown as { textLeg: (...args: unknown[]) => Promise<unknown> };
    const searchText = fresh.searchText.bind(fresh);
    const textLeg = rows.textLeg.bind(rows);
    let searched!: () => void;
    const freshSearched = new Promise<void>((resolve) => {
      searched = resolve;
    });
    fresh.searchText = async (...args: unknown[]) => {
      fresh.searchText = searchText;
      const out = await searchText(...args);
      searched();
      return out;
    };
    rows.textLeg = async (...args: unknown[]) => {
      rows.textLeg = textLeg;
      await freshSearched;
      await between();
      return textLeg(...args);
    };
  });
}

describe('a leg whose fresh rows another search brought forward during its index read', () => {
  test.each(['update'] as const)(
    "another node's %s of an indexed row, landing during the index read while a concurrent search follows",
    async (action) => {
      const database = `race_${action}`;
      const writes = await writer.as('acme');
      const searches = await reader.as('acme');
      const tables = await textTable(writes, database, 'docs');
      const live = new Map<number, string>();
      const rowsOf = (from: number, n: number) =>
        Array.from({ length: n }, (_, i) => {
          const id = from + i;
          const body = `word${id % 5} ${id % 3 === 0 ? 'kettle' : 'pot'}`;
          live.set(id, body);
          return { id, body };
        });
      expect((await tables.append('docs', rowsOf(0, 150))).status).toBe(200);
      await upkeepPass(writer, database);
      // A tail outside the index: the reader holds it beside the index.
      expect((await tables.append('docs', rowsOf(150, 30))).status).toBe(200);
      await searchRows(searches, database, 'docs', 'kettle');
      await onTableHandle(reader, database, 'docs', async (handle) => {
        expect(handle.fresh.follows).toBe(true);
        expect(handle.fresh.usable('text')).toBe(true);
        expect(handle.fresh.size).toBe(30);
      });

      // Row 3 is in the index. While the search reads its index, the other node replaces (or deletes) a tail row
      // and row 3, and another search on this node follows the table to that version.
      await raceTextLeg(database, 'docs', async () => {
        if (action === 'update') {
          expect((await tables.update('docs', 'id = 3', [{ id: 3, body: 'kettle kettle' }])).status).toBe(200);
        } else {
          expect((await tables.remove('docs', 'id IN (0, 153)')).status).toBe(200);
        }
        await searchRows(searches, database, 'docs', 'pot');
      });
      const got = await searchRows(searches, database, 'docs', 'kettle');
      const before = referenceBm25(live, 'kettle', false);
      if (action === 'update') live.set(3, 'kettle kettle');
      else {
        live.delete(0);
        live.delete(153);
      }
      const after = referenceBm25(live, 'kettle', false);
      const ids = got.map((r) => r.id).sort((a, b) => a - b);
      // Answered at the version before the commit or after it, never a mix.
      const wantBefore = [...before.keys()].sort((a, b) => a - b);
      const wantAfter = [...after.keys()].sort((a, b) => a - b);
      expect([wantBefore, wantAfter], `got ${ids.length} rows`).toContainEqual(ids);
    },
  );
});

describe('a follower under a random mix of writes and folds through the other node', () => {
  test.each([11, 23, 37, 51, 77])(
    'identical replaces, deletes of held rows, folds: every search answers the live rows (seed %i)',
    async (first) => {
      const database = `mix${first}`;
      const writes = await writer.as('acme');
      const searches = await reader.as('acme');
      const tables = await textTable(writes, database, 'docs');
      const words = ['red', 'kettle', 'blue', 'pot', 'tea', 'cup'];
      const { random, pick } = seeded(first);
      const body = () => Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(words)).join(' ');
      const live = new Map<number, string>();
      let next = 0;
      const append = async (n: number) => {
        const rows = Array.from({ length: n }, () => ({ id: next++, body: body() }));
        expect((await tables.append('docs', rows)).status).toBe(200);
        for (const r of rows) live.set(r.id, r.body);
      };
      const check = async (step: string) => {
        const query = `${pick(words)} ${pick(words)}`;
        const got = await searchRows(searches, database, 'docs', query);
        const want = [...referenceBm25(live, query, false)].sort((a, b) => b[1] - a[1] || a[0] - b[0]);
        expect(
          got.map((r) => r.id).sort((a, b) => a - b),
          `${step}: ${query}`,
        ).toEqual(want.map(([id]) => id).sort((a, b) => a - b));
        const byId = new Map(want);
        for (const r of got) {
          const w = byId.get(r.id) ?? Number.NaN;
          expect(Math.abs(r._bm25 - w) / w, `${step}: ${query} row ${r.id}`).toBeLessThan(1e-6);
        }
      };
      await append(100);
      await upkeepPass(writer, database);
      await append(10);
      await check('start');
      for (let step = 0; step < 25; step++) {
        const action = pick(['append', 'same', 'deleteRecent', 'update', 'fold', 'fold'] as const);
        const ids = [...live.keys()];
        if (action === 'append') await append(1 + Math.floor(random() * 10));
        if (action === 'same') {
          // Replaces rows with exactly what they held.
          const chosen = ids.filter(() => random() < 0.1);
          if (chosen.length > 0) {
            const rows = chosen.map((id) => ({ id, body: live.get(id) as string }));
            expect((await tables.update('docs', `id IN (${chosen.join(', ')})`, rows)).status).toBe(200);
          }
        }
        if (action === 'update') {
          const chosen = ids.filter(() => random() < 0.1);
          if (chosen.length > 0) {
            const rows = chosen.map((id) => ({ id, body: body() }));
            expect((await tables.update('docs', `id IN (${chosen.join(', ')})`, rows)).status).toBe(200);
            for (const r of rows) live.set(r.id, r.body);
          }
        }
        if (action === 'deleteRecent') {
          const chosen = ids.slice(-5).filter(() => random() < 0.6);
          if (chosen.length > 0) {
            expect((await tables.remove('docs', `id IN (${chosen.join(', ')})`)).status).toBe(200);
            for (const id of chosen) live.delete(id);
          }
        }
        if (action === 'fold') await upkeepPass(writer, database);
        if (random() < 0.7) await append(2);
        await check(`step ${step} (${action})`);
      }
    },
  );
});

describe('the rows outside the indexes read after a step too large to follow row by row', () => {
  test('a fragment whose first rows have no text is looked up by a row that has one', async () => {
    const tables = await textTable(await writer.as('acme'), 'nullfirst', 'docs');
    const searches: Client = await reader.as('acme');
    let id = 0;
    expect(
      (
        await tables.append(
          'docs',
          Array.from({ length: 50 }, () => ({ id: id++, body: 'oak ash' })),
        )
      ).status,
    ).toBe(200);
    await upkeepPass(writer, 'nullfirst');
    // One append, one fragment: its first row has no text.
    const zebras = [{ id: id++, body: null }, ...Array.from({ length: 5 }, () => ({ id: id++, body: 'zebra' }))];
    expect((await tables.append('docs', zebras)).status).toBe(200);
    const want = zebras.filter((r) => r.body !== null).map((r) => r.id);
    const found = async () =>
      (await searchRows(searches, 'nullfirst', 'docs', 'zebra')).map((r) => r.id).sort((a, b) => a - b);
    expect(await found()).toEqual(want);
    expect((await tables.append('docs', [{ id: id++, body: 'elm' }])).status).toBe(200);
    const skipped = await skipNextStep('nullfirst');
    expect(await found()).toEqual(want);
    expect(skipped()).toBe(1);
  });
});

describe('a search over several columns beside the fresh rows', () => {
  test("a candidate held in the fresh rows gets every column's score, read for it by key", async () => {
    const writes = await writer.as('acme');
    await activeLocalDatabase(writes, 'fields');
    const tables = tablesOf(writes, 'fields');
    const created = await tables.create({
      table_name: 't',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'title', type: 'utf8' },
        { name: 'body', type: 'utf8' },
      ],
      indexes: { fts: ['title', 'body'] },
    });
    expect(created.status).toBe(200);
    const live = new Map<number, { title: string; body: string }>();
    const append = async (rows: { id: number; title: string; body: string }[]) => {
      expect((await tables.append('t', rows)).status).toBe(200);
      for (const { id, title, body } of rows) live.set(id, { title, body });
    };
    await append(
      Array.from({ length: 30 }, (_, id) => ({ id, title: `base ${id % 3 ? 'elm' : 'oak'}`, body: 'filler' })),
    );
    await upkeepPass(writer, 'fields');
    // Fresh rows: ten that win on the body, and one that wins on its title and matches its body weakly, which the
    // body's own best three leave out: its body score is read for it by key.
    await append(
      Array.from({ length: 10 }, (_, i) => ({ id: 100 + i, title: 'nothing', body: 'kettle kettle kettle' })),
    );
    await append([{ id: 200, title: 'kettle', body: `kettle ${'filler '.repeat(6)}` }]);
    const titles = referenceBm25(new Map([...live].map(([id, r]) => [id, r.title] as const)), 'kettle', false);
    const bodies = referenceBm25(new Map([...live].map(([id, r]) => [id, r.body] as const)), 'kettle', false);
    const want = (titles.get(200) ?? 0) + (bodies.get(200) ?? 0);
    for (const node of [writer, reader]) {
      const reply = await (await node.as('acme')).request<{ data: { id: number; _bm25: number }[] }>(
        'POST',
        '/v1/hybrid_search/fields',
        {
          table_name: 't',
          text_fields: [{ field: 'title' }, { field: 'body' }],
          text_query: 'kettle',
          k: 3,
          window: 3,
        },
        { accept: 'application/json' },
      );
      expect(reply.status).toBe(200);
      const got = reply.json.data.find((row) => row.id === 200)?._bm25 ?? 0;
      expect(Math.abs(got - want) / want).toBeLessThan(1e-6);
    }
  });
});
