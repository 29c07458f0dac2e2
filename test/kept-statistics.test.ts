import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Analyzer } from '../src/engine/indexes/registry.js';
import {
  type ColumnCounts,
  decodeKept,
  encodeKept,
  KEPT_STATISTICS,
  type KeptStatistics,
} from '../src/engine/text/kept-statistics.js';
import { asidePrefix } from '../src/storage/lance.js';
import { LocalObjects } from '../src/storage/local.js';
import { LiveTexts } from './support/bm25.js';
import { freshControlUrl } from './support/postgres.js';
import { eventually, onTableHandle, startStrata, type TestServer, upkeepPass } from './support/server.js';
import { textTable } from './support/tables.js';

/**
 * BM25's statistics kept in the bucket beside a table (engine/text/kept-statistics.ts): what is written reads back
 * the same, what is read back is checked like any input from the customer's bucket, and a node that never built
 * them starts from them and follows the table, scoring exactly.
 */

const ANALYZERS = new Map<string, Analyzer>([
  ['body', 'standard'],
  ['title', 'english'],
]);

const counts: fc.Arbitrary<ColumnCounts> = fc
  .uniqueArray(fc.tuple(fc.string({ maxLength: 12 }), fc.integer({ min: 1, max: 50 })), {
    selector: ([term]) => term,
    maxLength: 9000,
  })
  .chain((terms) => {
    const most = Math.max(1, ...terms.map(([, n]) => n));
    return fc
      .integer({ min: most, max: most + 100 })
      .chain((docs) =>
        fc.integer({ min: docs, max: docs * 20 }).map((tokens) => ({ docs, tokens, rowsWith: new Map(terms) })),
      );
  });
const kept: fc.Arbitrary<KeptStatistics> = fc
  .tuple(fc.nat({ max: 1_000_000 }), counts, counts)
  .map(([version, body, title]) => ({
    version,
    columns: new Map([
      ['body', body],
      ['title', title],
    ]),
  }));

describe('kept statistics as written and read back', () => {
  test('read back the same counts', async () => {
    await fc.assert(
      fc.asyncProperty(kept, async (stats) => {
        expect(await decodeKept(await encodeKept(stats, ANALYZERS), ANALYZERS)).toEqual(stats);
      }),
      { numRuns: 30 },
    );
  });

  test('any byte changed, cut or added reads back as none or as counts that hold together, never a throw', async () => {
    await fc.assert(
      fc.asyncProperty(
        kept,
        fc.nat(),
        fc.integer({ min: 0, max: 255 }),
        fc.constantFrom('flip', 'cut', 'add'),
        async (stats, at, byte, how) => {
          const bytes = await encodeKept(stats, ANALYZERS);
          const i = at % bytes.length;
          const altered =
            how === 'flip'
              ? bytes.map((b, j) => (j === i ? byte : b))
              : how === 'cut'
                ? bytes.subarray(0, i)
                : new Uint8Array([...bytes.subarray(0, i), byte, ...bytes.subarray(i)]);
          const read = await decodeKept(altered, ANALYZERS);
          if (read === undefined) return;
          for (const column of read.columns.values()) {
            expect(column.docs).toBeLessThanOrEqual(column.tokens);
            for (const n of column.rowsWith.values()) expect(n >= 1 && n <= column.docs).toBe(true);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  test.each([
    ['another analyzer for a column', new Map<string, Analyzer>([...ANALYZERS, ['title', 'standard']])],
    ['a column fewer', new Map<string, Analyzer>([['body', 'standard']])],
    ['a column more', new Map<string, Analyzer>([...ANALYZERS, ['notes', 'standard']])],
  ])('are none for the table once it has %s', async (_, now) => {
    const stats: KeptStatistics = {
      version: 3,
      columns: new Map([
        ['body', { docs: 2, tokens: 5, rowsWith: new Map([['red', 2]]) }],
        ['title', { docs: 1, tokens: 1, rowsWith: new Map([['tea', 1]]) }],
      ]),
    };
    expect(await decodeKept(await encodeKept(stats, ANALYZERS), ANALYZERS)).toEqual(stats);
    expect(await decodeKept(await encodeKept(stats, ANALYZERS), now)).toBeUndefined();
  });

  test.each([
    ['a term in more rows than the column has', '["red",3]'],
    ['a term twice', '["red",1],["red",1]'],
    ['a count that is no whole number', '["red",1.5]'],
    ['a count of none', '["red",0]'],
  ])('are none when they hold %s', async (_, terms) => {
    const header = {
      strata_bm25_statistics: 1,
      version: 1,
      columns: [{ column: 'body', analyzer: 'standard', docs: 2, tokens: 4, terms: terms.split('],[').length }],
    };
    const bytes = new TextEncoder().encode(`${JSON.stringify(header)}\n[${terms}]\n`);
    expect(await decodeKept(bytes, new Map([['body', 'standard']]))).toBeUndefined();
  });
});

describe('kept statistics crafted to exhaust a node', () => {
  test('a file of newlines, one endless line, or more terms than are kept, reads as none', async () => {
    const analyzers = new Map<string, Analyzer>([['body', 'standard']]);
    const header = (terms: number) =>
      JSON.stringify({
        strata_bm25_statistics: 1,
        version: 1,
        columns: [{ column: 'body', analyzer: 'standard', docs: 1, tokens: 1, terms }],
      });
    const encode = (text: string) => new TextEncoder().encode(text);
    expect(await decodeKept(new Uint8Array(8 * 1024 * 1024).fill(10), analyzers)).toBeUndefined();
    expect(
      await decodeKept(encode(`${header(1)}\n[${'["a",1],'.repeat(600_000)}["b",1]]\n`), analyzers),
    ).toBeUndefined();
    expect(await decodeKept(encode(`${header(5_000_000)}\n[["a",1]]\n`), analyzers)).toBeUndefined();
  });
});

describe('a bucket folder read with a bound', () => {
  test('refuses an object past it before reading it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kept-bound-'));
    try {
      const objects = new LocalObjects(dir, { provider: 'local', bucket: 'b', prefix: 'p' });
      await objects.put('some/object', new Uint8Array(100).fill(7));
      expect(await objects.get('some/object', 100)).toEqual(new Uint8Array(100).fill(7));
      await expect(objects.get('some/object', 99)).rejects.toMatchObject({ code: 'TooLarge' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const HAND_RUN = { STRATA_UPKEEP_INTERVAL_MS: '3600000', STRATA_ANN_MIN_ROWS: '1000000' };
let first: TestServer;
let second: TestServer;

beforeAll(async () => {
  const controlUrl = await freshControlUrl();
  first = await startStrata({ ...HAND_RUN, STRATA_CONTROL_URL: controlUrl });
  second = await startStrata({ ...HAND_RUN, STRATA_CONTROL_URL: controlUrl, STRATA_DATA_DIR: first.dataDir });
});
afterAll(async () => {
  await second?.close();
  await first?.close();
});

describe('a node that never built the statistics', () => {
  /** Acme's table `docs` in `database`: 80 rows folded and a 20-row tail, scored on the first node. */
  async function scoredOnFirst(database: string) {
    const tables = await textTable(await first.as('acme'), database, 'docs');
    let state = 5;
    const random = () => {
      state = (state * 1103515245 + 12345) % 2 ** 31;
      return state / 2 ** 31;
    };
    const words = ['red', 'kettle', 'blue', 'pot', 'tea', 'cup'];
    const body = () =>
      Array.from({ length: 1 + Math.floor(random() * 6) }, () => words[Math.floor(random() * 6)]).join(' ');
    const model = new LiveTexts(tables, 'docs', body, random);
    await model.append(80);
    await upkeepPass(first, database);
    await model.append(20);
    await model.expectScores(await first.as('acme'), database, 'red tea', false, 'first node');
    let tableId = '';
    await onTableHandle(first, database, 'docs', async (handle) => {
      tableId = handle.record.tableId;
    });
    const path = join(first.dataDir, 'buckets', database, ...asidePrefix(tableId).split('/'), KEPT_STATISTICS);
    expect(
      await eventually(
        async () => existsSync(path),
        (written) => written,
      ),
    ).toBe(true);
    return { model, path };
  }

  const loadsAndBuilds = async (database: string) => {
    let seen: number[] = [];
    await onTableHandle(second, database, 'docs', async (handle) => {
      seen = [handle.text.loads, handle.text.builds];
    });
    return seen;
  };

  test('starts from those kept in the bucket and follows the table from their version, scoring exactly', async () => {
    const { model, path } = await scoredOnFirst('kept');
    expect(readFileSync(path, 'utf8').split('\n')[0]).toContain('"strata_bm25_statistics":1');
    await model.append(7);
    await model.change('update');
    await model.expectScores(await second.as('acme'), 'kept', 'red tea', false, 'second node');
    await model.expectScores(await second.as('acme'), 'kept', 'kettle', false, 'second node');
    expect(await loadsAndBuilds('kept')).toEqual([1, 0]);
  });

  test('builds them from every row when what is kept was altered, and scores exactly', async () => {
    const { model, path } = await scoredOnFirst('altered');
    writeFileSync(path, readFileSync(path, 'utf8').replace('"docs":', '"docs":"'));
    await model.append(3);
    await model.expectScores(await second.as('acme'), 'altered', 'red tea', false, 'second node');
    expect(await loadsAndBuilds('altered')).toEqual([0, 1]);
  });
});

describe('a node restarted on its own data', () => {
  test('follows what another process committed since the kept version by the rows, not by counts, and scores exactly', async () => {
    const one = await startStrata(HAND_RUN);
    let again: TestServer | undefined;
    try {
      const tables = await textTable(await one.as('acme'), 'restarted', 'docs');
      const model = new LiveTexts(
        tables,
        'docs',
        () => 'apple pie',
        () => 0.05,
      );
      await model.append(5);
      await model.expectScores(await one.as('acme'), 'restarted', 'apple', false, 'before the restart');
      let tableId = '';
      await onTableHandle(one, 'restarted', 'docs', async (handle) => {
        tableId = handle.record.tableId;
      });
      const path = join(one.dataDir, 'buckets', 'restarted', ...asidePrefix(tableId).split('/'), KEPT_STATISTICS);
      expect(
        await eventually(
          async () => existsSync(path),
          (written) => written,
        ),
      ).toBe(true);
      // Every row replaced (as many rows and fragments as before), then the process ends.
      const rows = [0, 1, 2, 3, 4].map((id) => ({ id, body: 'banana split' }));
      expect((await tables.update('docs', 'id >= 0', rows)).status).toBe(200);
      for (const row of rows) model.live.set(row.id, row.body);
      await one.app.close();
      again = await startStrata({ ...HAND_RUN, STRATA_DATA_DIR: one.dataDir });
      await model.expectScores(await again.as('acme'), 'restarted', 'banana', false, 'after the restart');
      await model.expectScores(await again.as('acme'), 'restarted', 'apple', false, 'after the restart');
    } finally {
      await again?.close();
      await one.close();
    }
  });
});
