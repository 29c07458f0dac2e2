import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Connection, connect, Index, type Table as LanceTable } from '@lancedb/lancedb';
import type { Table } from 'apache-arrow';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { DatasetCommits, fragmentsOf, manifestPath, operationOf } from '../src/engine/lance/commits.js';
import { RowChanges, type RowsBetween } from '../src/engine/lance/row-changes.js';
import type { TextChanges } from '../src/engine/rows/source.js';
import { ROW_KEY } from '../src/engine/tables/schema.js';

let dir: string;
let connection: Connection;
let tables = 0;

const schema = new arrow.Schema([
  new arrow.Field(ROW_KEY, new arrow.Int64(), false),
  new arrow.Field('s', new arrow.Utf8(), true),
]);

function rows(entries: readonly (readonly [bigint, string | null])[]) {
  return new arrow.Table({
    [ROW_KEY]: arrow.makeVector(BigInt64Array.from(entries.map(([key]) => key))),
    s: arrow.vectorFromArray(
      entries.map(([, text]) => text),
      new arrow.Utf8(),
    ),
  });
}

/** A dataset's commits as the service reads them, from its folder. */
const commitsOf = (name: string) => new DatasetCommits((path) => readFile(join(dir, `${name}.lance`, path)));

/**
 * A table of its own, and a follower that reads it the way another node would (by version, through its own handles);
 * told which versions compacted when `compactions`.
 */
async function table(compactions = false): Promise<{ lance: LanceTable; changes: RowChanges; name: string }> {
  const name = `t${tables++}`;
  const lance = await connection.createEmptyTable(name, schema);
  return { lance, changes: follower(name, compactions), name };
}

function follower(name: string, compactions: boolean): RowChanges {
  return new RowChanges(
    async (version) => {
      const reader = await connection.openTable(name);
      try {
        await reader.checkout(version);
        return reader;
      } catch {
        reader.close();
        return undefined;
      }
    },
    (reader) => reader.close(),
    compactions ? commitsOf(name) : undefined,
  );
}

/** The texts of the live rows, as a multiset. */
function counted(texts: Iterable<string | null>): Map<string, number> {
  const out = new Map<string, number>();
  for (const text of texts) out.set(String(text), (out.get(String(text)) ?? 0) + 1);
  return out;
}

/** `before` with the changes' removed texts counted out and added ones in; undefined if it removes a text not there. */
function applied(before: Map<string, number>, changes: TextChanges): Map<string, number> | undefined {
  const out = new Map(before);
  for (const text of changes.removed.get('s') ?? []) {
    const n = (out.get(String(text)) ?? 0) - 1;
    if (n < 0) return undefined;
    if (n === 0) out.delete(String(text));
    else out.set(String(text), n);
  }
  for (const text of changes.added.get('s') ?? []) out.set(String(text), (out.get(String(text)) ?? 0) + 1);
  return out;
}

/** `before` (texts by row key) less the rows gone, with the rows come. */
function appliedByKey(before: Map<bigint, string | null>, between: RowsBetween): Map<bigint, string | null> {
  const out = new Map(before);
  const each = (rows: Table | undefined, f: (key: bigint, text: string | null) => void) => {
    const keys = rows?.getChild(ROW_KEY)?.toArray() as BigInt64Array | undefined;
    for (const [i, key] of (keys ?? []).entries()) f(key, (rows?.getChild('s')?.get(i) as string | null) ?? null);
  };
  each(between.gone, (key) => {
    expect(out.has(key)).toBe(true);
    out.delete(key);
  });
  each(between.come, (key, text) => {
    expect(out.has(key)).toBe(false);
    out.set(key, text);
  });
  return out;
}
const sortedRows = (m: Map<bigint, string | null>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1));

const sorted = (m: Map<string, number> | undefined) => [...(m ?? new Map())].sort(([a], [b]) => a.localeCompare(b));

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'strata-rowchanges-'));
  connection = await connect(dir, { readConsistencyInterval: 0 });
});
afterAll(() => {
  connection?.close();
  rmSync(dir, { recursive: true, force: true });
});

type Op =
  | { kind: 'append'; texts: (string | null)[] }
  | { kind: 'delete'; pick: number[] }
  | { kind: 'update'; pick: number[]; text: string | null }
  | { kind: 'compact' }
  | { kind: 'skip' };

const text = fc.option(fc.constantFrom('a b', 'b c', 'c', 'a a d', ''), { nil: null });
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('append' as const), texts: fc.array(text, { minLength: 1, maxLength: 6 }) }),
  fc.record({ kind: fc.constant('delete' as const), pick: fc.array(fc.nat(50), { minLength: 1, maxLength: 3 }) }),
  fc.record({
    kind: fc.constant('update' as const),
    pick: fc.array(fc.nat(50), { minLength: 1, maxLength: 3 }),
    text,
  }),
  fc.constant({ kind: 'compact' as const }),
  fc.constant({ kind: 'skip' as const }),
);

describe('how the rows changed between two versions, whatever committed them', () => {
  test.each([
    ['as moved rows read on both sides', false],
    ['told which versions compacted', true],
  ])(
    'counting out the rows only the older version holds and in those only the newer holds gives the newer rows, %s',
    async (_, compactions) => {
      await fc.assert(
        fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 7 }), async (ops) => {
          const { lance, changes } = await table(compactions);
          const live = new Map<bigint, string | null>();
          let followedRows = new Map<bigint, string | null>();
          let nextKey = 0n;
          let followed = counted([]);
          let followedAt = await lance.version();
          for (const step of ops) {
            const keys = [...live.keys()];
            const picked = (pick: number[]) => [
              ...new Set(pick.flatMap((i) => (keys.length === 0 ? [] : [keys[i % keys.length] as bigint]))),
            ];
            if (step.kind === 'append') {
              const entries = step.texts.map((t) => [nextKey++, t] as const);
              await lance.add(rows(entries));
              for (const [key, t] of entries) live.set(key, t);
            } else if (step.kind === 'delete') {
              const gone = picked(step.pick);
              if (gone.length === 0) continue;
              await lance.delete(`${ROW_KEY} IN (${gone.join(', ')})`);
              for (const key of gone) live.delete(key);
            } else if (step.kind === 'update') {
              const changed = picked(step.pick);
              if (changed.length === 0) continue;
              const entries = changed.map((key) => [key, step.text] as const);
              await lance.mergeInsert(ROW_KEY).whenMatchedUpdateAll().execute(rows(entries));
              for (const [key, t] of entries) live.set(key, t);
            } else if (step.kind === 'compact') {
              await lance.optimize();
            } else {
              // A version followed later, together with the next step's.
              continue;
            }
            const version = await lance.version();
            const found = await changes.texts(followedAt, version, ['s'], Number.POSITIVE_INFINITY);
            expect(found).toBeDefined();
            const next = applied(followed, found as TextChanges);
            expect(sorted(next)).toEqual(sorted(counted(live.values())));
            // By row key too: the rows gone and come, applied to the rows followed, are the live rows with their values.
            const between = await changes.between(followedAt, version, ['s'], ['s'], Number.POSITIVE_INFINITY);
            expect(between).toBeDefined();
            followedRows = appliedByKey(followedRows, between as RowsBetween);
            expect(sortedRows(followedRows)).toEqual(sortedRows(live));
            followed = next as Map<string, number>;
            followedAt = version;
          }
        }),
        { numRuns: compactions ? 80 : 25 },
      );
    },
    120_000,
  );

  test('a compaction moves rows without changing them: nothing is counted out or in', async () => {
    const { lance, changes } = await table();
    await lance.add(
      rows([
        [0n, 'a b'],
        [1n, 'c'],
      ]),
    );
    await lance.add(
      rows([
        [2n, 'a'],
        [3n, null],
      ]),
    );
    await lance.delete(`${ROW_KEY} = 1`);
    const before = await lance.version();
    await lance.optimize();
    // The rows did move: two fragments became one.
    expect((await lance.stats()).fragmentStats.numFragments).toBe(1);
    const found = await changes.texts(before, await lance.version(), ['s'], Number.POSITIVE_INFINITY);
    expect(found?.removed.get('s')).toEqual([]);
    expect(found?.added.get('s')).toEqual([]);
  });

  test('told which versions compacted, a step across a compaction reads only the rows written on either side of it', async () => {
    const { lance, changes, name } = await table(true);
    await lance.add(
      rows([
        [0n, 'a'],
        [1n, 'b'],
      ]),
    );
    await lance.add(
      rows([
        [2n, 'c'],
        [3n, 'd'],
      ]),
    );
    await lance.delete(`${ROW_KEY} = 1`);
    const from = await lance.version();
    await lance.add(rows([[4n, 'e']]));
    await lance.optimize();
    expect((await lance.stats()).fragmentStats.numFragments).toBe(1);
    await lance.add(rows([[5n, 'f']]));
    await lance
      .mergeInsert(ROW_KEY)
      .whenMatchedUpdateAll()
      .execute(rows([[2n, 'C']]));
    await lance.delete(`${ROW_KEY} = 4`);
    const found = await changes.between(from, await lance.version(), ['s'], ['s'], Number.POSITIVE_INFINITY);
    // Rows 0, 2, 3 and 4 moved: none is read for that. 2 was replaced since, 4 added and deleted, 5 added.
    expect(found?.gone?.toArray().map((r) => [r[ROW_KEY], r.s])).toEqual([[2n, 'c']]);
    expect(found?.come?.toArray().map((r) => [r[ROW_KEY], r.s])).toEqual([
      [5n, 'f'],
      [2n, 'C'],
    ]);
    // Not told, the moved rows are read on both sides.
    const blind = await follower(name, false).between(from, await lance.version(), ['s'], ['s'], 100);
    expect(blind?.gone?.numRows).toBe(3);
    expect(blind?.come?.numRows).toBe(4);
  });

  test('a commit that changed nothing, then a compaction, then an append: read around the compaction as the rows they differ by', async () => {
    const { lance, changes, name } = await table(true);
    await lance.add(
      rows([
        [0n, 'a'],
        [1n, 'b'],
      ]),
    );
    await lance.add(rows([[2n, 'c']]));
    const from = await lance.version();
    // Matches no row, and still makes a version (two nodes deleting the same rows do this).
    await lance.delete(`${ROW_KEY} = 99`);
    await lance.optimize();
    await lance.add(rows([[3n, 'd']]));
    const to = await lance.version();
    expect(await commitsOf(name).compactions(from, to)).toHaveLength(1);
    const found = await changes.between(from, to, ['s'], ['s'], 100);
    expect(found?.gone).toBeUndefined();
    expect(found?.come?.toArray().map((r) => [r[ROW_KEY], r.s])).toEqual([[3n, 'd']]);
  });

  test('rows added before a compaction in the same step come with their row ids after it', async () => {
    const { lance, changes } = await table(true);
    await lance.add(rows([[0n, 'a']]));
    const from = await lance.version();
    await lance.add(rows([[1n, 'b']]));
    await lance.add(rows([[2n, 'c']]));
    await lance.optimize();
    await lance.add(rows([[3n, 'd']]));
    const to = await lance.version();
    const found = await changes.between(from, to, ['s'], ['s'], 100);
    const ids = await lance.query().select([ROW_KEY]).withRowId().toArray();
    const idAt = new Map(ids.map((r) => [r[ROW_KEY] as bigint, r._rowid as bigint]));
    const come = found?.come?.toArray().map((r) => [r[ROW_KEY], r._rowid]);
    expect(come?.map(([key]) => key).sort()).toEqual([1n, 2n, 3n]);
    for (const [key, id] of come ?? []) expect(id).toBe(idAt.get(key as bigint));
  });

  test('an append read from the version followed last is only the rows it added', async () => {
    const { lance, changes } = await table();
    await lance.add(
      rows([
        [0n, 'a'],
        [1n, 'b'],
      ]),
    );
    const first = await lance.version();
    await lance.add(rows([[2n, 'c']]));
    const second = await lance.version();
    expect((await changes.texts(first, second, ['s'], 10))?.added.get('s')).toEqual(['c']);
    await lance.add(
      rows([
        [3n, 'd'],
        [4n, null],
      ]),
    );
    const third = await lance.version();
    expect(await changes.texts(second, third, ['s'], 10)).toEqual({
      removed: new Map([['s', []]]),
      added: new Map([['s', ['d', null]]]),
    });
  });

  test('told what each version was, appends are read by address: no count of the rows followed, no filter', async () => {
    const { lance, name } = await table();
    await lance.add(
      rows([
        [0n, 'a'],
        [1n, 'b'],
      ]),
    );
    const first = await lance.version();
    await lance.createIndex('s', { config: Index.fts() });
    await lance.add(rows([[2n, 'c']]));
    await lance.add(
      rows([
        [3n, 'd'],
        [4n, null],
      ]),
    );
    const third = await lance.version();
    const scans: string[] = [];
    const changes = new RowChanges(
      async (version) => {
        const reader = await connection.openTable(name);
        await reader.checkout(version);
        const countRows = reader.countRows.bind(reader);
        reader.countRows = (filter?: string) => {
          scans.push(`count ${filter}`);
          return countRows(filter);
        };
        return reader;
      },
      (reader) => reader.close(),
      commitsOf(name),
    );
    // The first step reads the older version's row ids (nothing followed yet); the rest reads only the new rows.
    const found = await changes.between(first, third, ['s'], ['s'], 10);
    expect(found?.gone).toBeUndefined();
    expect(found?.come?.toArray().map((r) => [r[ROW_KEY], r.s])).toEqual([
      [2n, 'c'],
      [3n, 'd'],
      [4n, null],
    ]);
    expect(scans).toEqual([]);
    // More rows than asked for tells nothing, as it does read the other way.
    expect(await changes.between(first, third, ['s'], ['s'], 2)).toBeUndefined();
    await lance.add(rows([[5n, 'e']]));
    const fourth = await lance.version();
    expect((await changes.texts(third, fourth, ['s'], 10))?.added.get('s')).toEqual(['e']);
    expect(scans).toEqual([]);
  });

  test('more rows changed than asked for, or a version no longer kept, tells nothing', async () => {
    const { lance, changes } = await table();
    await lance.add(
      rows([
        [0n, 'a'],
        [1n, 'b'],
        [2n, 'c'],
      ]),
    );
    const first = await lance.version();
    await lance.delete(`${ROW_KEY} <= 1`);
    const second = await lance.version();
    expect(await changes.texts(first, second, ['s'], 1)).toBeUndefined();
    expect((await changes.texts(first, second, ['s'], 2))?.removed.get('s')?.slice().sort()).toEqual(['a', 'b']);
    await lance.optimize({ cleanupOlderThan: new Date(Date.now() + 60_000), deleteUnverified: true });
    expect(await changes.texts(first, await lance.version(), ['s'], 10)).toBeUndefined();
  });
});

/**
 * A compaction reserves its fragments' ids when it starts and commits after appends that landed meanwhile with higher
 * ids: its fragments then lie below the top fragment of the version before.
 */
let nextKey = 0;
const raceLive = new Map<bigint, string>();
function raceBatch(n: number) {
  const keys = Array.from({ length: n }, () => BigInt(nextKey++));
  const texts = keys.map((k) => `word${k % 13n} common`);
  for (const [i, k] of keys.entries()) raceLive.set(k, texts[i] as string);
  return new arrow.Table({
    [ROW_KEY]: arrow.makeVector(BigInt64Array.from(keys)),
    s: arrow.vectorFromArray(texts, new arrow.Utf8()),
  });
}

function countedTexts(texts: Iterable<string | null>): Map<string, number> {
  const out = new Map<string, number>();
  for (const text of texts) out.set(String(text), (out.get(String(text)) ?? 0) + 1);
  return out;
}
function appliedTexts(before: Map<string, number>, changes: TextChanges): Map<string, number> {
  const out = new Map(before);
  for (const text of changes.removed.get('s') ?? []) out.set(String(text), (out.get(String(text)) ?? 0) - 1);
  for (const text of changes.added.get('s') ?? []) out.set(String(text), (out.get(String(text)) ?? 0) + 1);
  for (const [k, n] of out) if (n === 0) out.delete(k);
  return out;
}
const sortedTexts = (m: Map<string, number>) => [...m].sort(([a], [b]) => a.localeCompare(b));

async function fragmentsAt(lance: LanceTable): Promise<Set<number>> {
  const ids = (await lance.query().select([]).withRowId().toArrow()).getChild('_rowid')?.toArray() as BigUint64Array;
  return new Set(Array.from(ids, (id) => Number(id >> 32n)));
}

describe('a compaction that commits after another node appended', () => {
  test('is followed version by version, then a delete: the texts followed are the live rows (its fragments lie below those of the appends)', async () => {
    const lance = await connection.createEmptyTable('race', schema);
    await lance.createIndex(ROW_KEY, { config: Index.btree() });
    await lance.createIndex('s', { config: Index.fts() });
    for (let i = 0; i < 80; i++) await lance.add(raceBatch(50));
    const opened = async (version: number) => {
      const reader = await connection.openTable('race');
      await reader.checkout(version);
      return reader;
    };
    const changes = new RowChanges(opened, (reader) => reader.close());
    let followedAt = await lance.version();
    let followed = countedTexts(raceLive.values());

    // Upkeep on one node folds the table while another node appends.
    const other = await (await connect(dir, { readConsistencyInterval: 0 })).openTable('race');
    let lowered = false;
    for (let attempt = 0; attempt < 4 && !lowered; attempt++) {
      let stop = false;
      const appending = (async () => {
        // Bounded: on a busy machine a slow compaction would otherwise leave versions to follow without end.
        for (let n = 0; !stop && n < 100; n++) await other.add(raceBatch(5));
      })();
      const compacted = lance.optimize().catch(() => undefined);
      await compacted;
      stop = true;
      await appending;
      // Follow every version since, one by one, as a reader that searches after each commit does.
      const latest = await lance.version();
      let top = Math.max(...(await fragmentsAt(await opened(followedAt))));
      for (let v = followedAt + 1; v <= latest; v++) {
        const fragments = await fragmentsAt(await opened(v));
        const before = await fragmentsAt(await opened(v - 1));
        if ([...fragments].some((f) => !before.has(f) && f <= top)) lowered = true;
        top = Math.max(top, ...fragments);
        const found = await changes.texts(v - 1, v, ['s'], Number.POSITIVE_INFINITY);
        expect(found).toBeDefined();
        followed = appliedTexts(followed, found as TextChanges);
        followedAt = v;
      }
      expect(sortedTexts(followed)).toEqual(sortedTexts(countedTexts(raceLive.values())));
      for (let i = 0; i < 20; i++) await lance.add(raceBatch(50));
    }
    // The race this is about happened: a version added a fragment below the top fragment of the one before.
    expect(lowered).toBe(true);

    // Another node deletes some rows (a version that is no append).
    await lance.delete(`${ROW_KEY} % 10 = 3`);
    for (const key of [...raceLive.keys()]) if (key % 10n === 3n) raceLive.delete(key);
    const found = await changes.texts(followedAt, await lance.version(), ['s'], Number.POSITIVE_INFINITY);
    expect(found).toBeDefined();
    followed = appliedTexts(followed, found as TextChanges);
    expect(sortedTexts(followed)).toEqual(sortedTexts(countedTexts(raceLive.values())));
  }, 120_000);
});

describe('how many rows may differ', () => {
  test('an append of more rows than asked for tells nothing, as any other change does', async () => {
    const { lance, changes } = await table();
    await lance.add(rows([[0n, 'a']]));
    const from = await lance.version();
    await lance.add(rows(Array.from({ length: 500 }, (_, i) => [BigInt(i + 1), 'b'] as const)));
    expect(await changes.texts(from, await lance.version(), ['s'], 10)).toBeUndefined();
    expect((await changes.texts(from, await lance.version(), ['s'], 500))?.added.get('s')?.length).toBe(500);
  });
});

describe('the rows read between two versions, kept for the next reader of the same step', () => {
  test('serve that reader once, without the vectors: a reader asking for them reads again', async () => {
    const withVectors = new arrow.Schema([
      ...schema.fields,
      new arrow.Field('v', new arrow.FixedSizeList(2, new arrow.Field('item', new arrow.Float32(), true)), true),
    ]);
    const batch = (from: number, n: number) =>
      new arrow.Table({
        [ROW_KEY]: arrow.makeVector(BigInt64Array.from({ length: n }, (_, i) => BigInt(from + i))),
        s: arrow.vectorFromArray(
          Array.from({ length: n }, (_, i) => `text ${from + i}`),
          new arrow.Utf8(),
        ),
        v: arrow.vectorFromArray(
          Array.from({ length: n }, (_, i) => [from + i, 1]),
          withVectors.fields[2]?.type,
        ),
      });
    const lance = await connection.createEmptyTable('shared', withVectors);
    await lance.add(batch(0, 5));
    const from = await lance.version();
    await lance.add(batch(5, 3));
    const to = await lance.version();
    const changes = new RowChanges(
      async (version) => {
        const reader = await connection.openTable('shared');
        await reader.checkout(version);
        return reader;
      },
      (reader) => reader.close(),
    );
    const reads = vi.spyOn(RowChanges.prototype as never, 'read');
    try {
      // The fresh rows read first, vectors included; the statistics then ask for the texts of the same step.
      const first = await changes.between(from, to, ['s'], ['s', 'v'], 100);
      expect(first?.come?.getChild('v')?.length).toBe(3);
      const second = await changes.between(from, to, ['s'], ['s'], 100);
      expect(reads.mock.calls.length).toBe(1);
      expect(second?.come?.getChild('s')?.toArray()).toEqual(['text 5', 'text 6', 'text 7']);
      // Kept for one reader only: the next one reads again.
      await changes.between(from, to, ['s'], ['s'], 100);
      expect(reads.mock.calls.length).toBe(2);
      // What was kept has no vectors: a reader that asks for them reads them.
      const third = await changes.between(from, to, ['s'], ['s', 'v'], 100);
      expect(reads.mock.calls.length).toBe(3);
      expect(third?.come?.getChild('v')?.get(0)?.toArray()).toEqual(new Float32Array([5, 1]));
    } finally {
      reads.mockRestore();
    }
  });
});

describe('which versions a compaction made, read from their manifests', () => {
  test('only a compaction is one; a manifest missing or not whole tells nothing', async () => {
    const { lance, name } = await table();
    await lance.add(
      rows([
        [0n, 'a'],
        [1n, 'b'],
        [2n, 'c'],
      ]),
    );
    await lance.add(rows([[3n, 'd']]));
    await lance
      .mergeInsert(ROW_KEY)
      .whenMatchedUpdateAll()
      .execute(rows([[0n, 'A']]));
    await lance.delete(`${ROW_KEY} = 3`);
    const before = await lance.version();
    await lance.optimize();
    const commits = commitsOf(name);
    const compactions = await commits.compactions(0, await lance.version());
    expect(compactions).toHaveLength(1);
    expect(compactions?.[0]).toBeGreaterThan(before);
    expect(await commits.compacted(before)).toBe(false);
    expect(await commits.compacted(1000)).toBeUndefined();
    expect(await commits.compactions(before, 1000)).toBeUndefined();

    // Any part of a manifest, or a byte of it changed: an answer or none, never a throw.
    const manifest = await readFile(join(dir, `${name}.lance`, manifestPath(compactions?.[0] as number)));
    expect(operationOf(manifest)).toBe(104);
    // The compaction left one fragment of the three live rows.
    expect(fragmentsOf(manifest)?.map((f) => [f.rows, f.deletions])).toEqual([[3, false]]);
    for (let cut = 0; cut < manifest.length; cut += 7) expect(() => operationOf(manifest.subarray(cut))).not.toThrow();
    fc.assert(
      fc.property(fc.nat(manifest.length - 1), fc.nat(255), (at, byte) => {
        const changed = Uint8Array.from(manifest);
        changed[at] = byte;
        const operation = operationOf(changed);
        expect(operation === undefined || Number.isInteger(operation)).toBe(true);
        expect(() => fragmentsOf(changed)).not.toThrow();
      }),
      { numRuns: 500 },
    );
  });

  test('which steps removed no row: appends, index commits and compactions did not; deletes and replaces did', async () => {
    const { lance, name } = await table();
    const commits = commitsOf(name);
    await lance.add(
      rows([
        [0n, 'a'],
        [1n, 'b'],
      ]),
    );
    const first = await lance.version();
    await lance.add(rows([[2n, 'c']]));
    await lance.createIndex('s', { config: Index.fts() });
    await lance.optimize();
    const folded = await lance.version();
    expect(await commits.compactions(first, folded)).toHaveLength(1);
    expect(await commits.removedNone(first, folded)).toBe(true);
    await lance
      .mergeInsert(ROW_KEY)
      .whenMatchedUpdateAll()
      .execute(rows([[0n, 'A']]));
    const replaced = await lance.version();
    expect(await commits.removedNone(folded, replaced)).toBe(false);
    expect(await commits.removedNone(first, replaced)).toBe(false);
    await lance.delete(`${ROW_KEY} = 1`);
    expect(await commits.removedNone(replaced, await lance.version())).toBe(false);
    expect(await commits.removedNone(replaced, replaced)).toBe(true);
    // A version with no manifest (not committed yet) tells nothing.
    expect(await commits.removedNone(replaced, replaced + 5)).toBe(false);
  });

  test('a manifest that does not come in time, or a step of too many versions, tells nothing', async () => {
    let reads = 0;
    const stalled = new DatasetCommits(() => {
      reads++;
      return new Promise<Uint8Array>(() => undefined);
    });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const asked = stalled.compactions(1, 3);
      await vi.advanceTimersByTimeAsync(2_000);
      expect(await asked).toBeUndefined();
      expect(reads).toBeGreaterThan(0);
    } finally {
      vi.useRealTimers();
    }
    reads = 0;
    expect(await stalled.compactions(1, 1000)).toBeUndefined();
    expect(await stalled.removedNone(1, 1000)).toBe(false);
    expect(reads).toBe(0);
  });

  test('the manifest parser answers or refuses any bytes, never throws', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.boolean(), (bytes, magic) => {
        const file = magic ? Uint8Array.from([...bytes, ...new TextEncoder().encode('LANC')]) : bytes;
        const operation = operationOf(file);
        expect(operation === undefined || Number.isInteger(operation)).toBe(true);
        const fragments = fragmentsOf(file);
        expect(fragments === undefined || Array.isArray(fragments)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
});
