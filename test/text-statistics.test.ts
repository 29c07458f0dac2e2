import { describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import type { AsideObject, PositionedToken, Snapshot, TextChanges } from '../src/engine/rows/source.js';
import type { Difference } from '../src/engine/tables/changes.js';
import { type ChangedTexts, TextStatistics } from '../src/engine/text/statistics.js';
import { TimeSlice } from '../src/engine/time-slice.js';

/**
 * BM25's statistics of the live rows (engine/text/statistics.ts) against a table held here (texts per version), with
 * the reads of the rows that differ between versions (`changedTexts`) and Lance's tokenizer doubles that fail the
 * way a Lance call can.
 */

type Versions = Map<number, (string | null)[]>;

function multisetDiff(a: (string | null)[], b: (string | null)[]): TextChanges {
  const left = [...a];
  const added: (string | null)[] = [];
  for (const t of b) {
    const i = left.indexOf(t);
    if (i >= 0) left.splice(i, 1);
    else added.push(t);
  }
  return { removed: new Map([['s', left]]), added: new Map([['s', added]]) };
}

function statistics(
  versions: Versions,
  changed: ChangedTexts,
  analyzer: 'standard' | 'english' = 'standard',
  lanceTokens: (text: string) => Promise<PositionedToken[]> = async (text) =>
    text
      .split(/\s+/)
      .filter(Boolean)
      .map((t, position) => ({ text: t, position })),
  place?: AsideObject,
) {
  const snapshot = async (version: number): Promise<Snapshot> => ({
    checkout: async () => undefined,
    async *scan() {
      const texts = versions.get(version) ?? [];
      yield new arrow.RecordBatch({ s: arrow.vectorFromArray(texts, new arrow.Utf8()).data[0] as never });
    },
    close: () => undefined,
  });
  const difference = async (from: number, to: number): Promise<Difference> => (from === to ? 'none' : 'rewrite');
  return new TextStatistics(
    [{ column: 's', analyzer }],
    difference,
    changed,
    snapshot,
    (text) => lanceTokens(text),
    place,
  );
}

describe('statistics following a commit they did not see, when a read fails', () => {
  test('a store error reading the rows that differ builds them from every row instead', async () => {
    const versions: Versions = new Map([
      [1, ['red kettle', 'blue pot']],
      [2, ['red kettle', 'blue pot', 'green tea']],
    ]);
    const stats = statistics(versions, async () => {
      throw new Error('lance error: LanceError(IO): Generic LocalFileSystem error: Unable to open file');
    });
    expect((await stats.at(1, 's'))?.docs).toBe(2);
    // Another node appended a row (version 2): building from every row of version 2 would answer.
    expect((await stats.at(2, 's'))?.docs).toBe(3);
  });

  test('a tokenizer failure half way through leaves the counts as they were, and the next reader counts it once', async () => {
    const versions: Versions = new Map([
      [1, ['red kettle', 'blue pot']],
      [2, ['red kettle', 'green tea']],
    ]);
    let failOnce = true;
    const stats = statistics(
      versions,
      async (from, to) => multisetDiff(versions.get(from) ?? [], versions.get(to) ?? []),
      'english',
      async (text) => {
        // Lance's tokenize failing once (a closed handle, a transient error) on the added row's text.
        if (text.includes('green') && failOnce) {
          failOnce = false;
          throw new Error('Table is closed');
        }
        return text
          .split(/\s+/)
          .filter(Boolean)
          .map((t, position) => ({ text: t, position }));
      },
    );
    expect((await stats.at(1, 's'))?.docs).toBe(2);
    await stats.at(2, 's').catch(() => undefined);
    // Tried again, the live rows of version 2 are two rows of two tokens each.
    const again = await stats.at(2, 's');
    expect({ docs: again?.docs, tokens: again?.tokens, pot: again?.docsWith('pot') }).toEqual({
      docs: 2,
      tokens: 4,
      pot: 0,
    });
  });
});

describe('a build from every row shares the event loop', () => {
  test('other work runs while 60k rows are tokenized and counted, and the counts are those of every row', async () => {
    const texts = Array.from({ length: 60_000 }, (_, i) => `red kettle number ${i % 997} ${i % 2 === 0 ? 'blue' : ''}`);
    const stats = statistics(new Map([[1, texts]]), async () => undefined);
    let building = true;
    let turns = 0;
    const spin = (): void => {
      if (!building) return;
      turns++;
      setImmediate(spin);
    };
    setImmediate(spin);
    const built = await stats.at(1, 's');
    building = false;
    expect(built?.docs).toBe(60_000);
    expect(built?.docsWith('blue')).toBe(30_000);
    expect(built?.docsWith('kettle')).toBe(60_000);
    // One task for the whole build would leave a single turn (the one before it began).
    expect(turns).toBeGreaterThan(5);
  });
});

describe('TimeSlice', () => {
  test('hands the event loop back once its slice is spent, and not before', async () => {
    let ran = false;
    setImmediate(() => {
      ran = true;
    });
    await new TimeSlice(60_000).pause();
    expect(ran).toBe(false);
    await new TimeSlice(0).pause();
    expect(ran).toBe(true);
  });
});

describe('statistics kept beside the table', () => {
  /** An object kept in memory, as the bucket would keep it. */
  function keptPlace() {
    const place = {
      bytes: undefined as Uint8Array | undefined,
      writes: 0,
      read: async () => place.bytes,
      write: async (bytes: Uint8Array) => {
        place.writes++;
        place.bytes = bytes;
      },
    };
    return place;
  }
  const diff =
    (versions: Versions): ChangedTexts =>
    async (from, to) =>
      multisetDiff(versions.get(from) ?? [], versions.get(to) ?? []);
  const until = async (done: () => boolean) => {
    for (let i = 0; i < 100 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  };
  const counts = async (stats: TextStatistics, version: number) => {
    const at = await stats.at(version, 's');
    return { docs: at?.docs, tokens: at?.tokens, red: at?.docsWith('red'), tea: at?.docsWith('tea') };
  };

  test('a node that did not build them starts from them and follows the table from their version', async () => {
    const versions: Versions = new Map([
      [1, ['red kettle', 'blue pot', null, 'red red tea']],
      [2, ['red kettle', 'green tea', null, 'red red tea', 'tea tea']],
    ]);
    const place = keptPlace();
    const first = statistics(versions, diff(versions), 'standard', undefined, place);
    await counts(first, 1);
    await until(() => place.writes > 0);
    expect(first.builds).toBe(1);
    expect(place.writes).toBe(1);

    const second = statistics(versions, diff(versions), 'standard', undefined, place);
    const built = statistics(versions, diff(versions));
    expect(await counts(second, 2)).toEqual(await counts(built, 2));
    expect(second.builds).toBe(0);
    expect(second.loads).toBe(1);
  });

  test('kept statistics it cannot follow, or of a later version, or of another analyzer, are built from every row', async () => {
    const versions: Versions = new Map([
      [1, ['red kettle', 'blue pot']],
      [2, ['red kettle', 'blue pot', 'tea']],
      [3, ['red tea']],
    ]);
    const place = keptPlace();
    const writer = statistics(versions, diff(versions), 'standard', undefined, place);
    await counts(writer, 2);
    await until(() => place.writes > 0);
    const built = (version: number) => counts(statistics(versions, diff(versions)), version);

    // Of version 2, asked at version 1.
    const earlier = statistics(versions, diff(versions), 'standard', undefined, place);
    expect(await counts(earlier, 1)).toEqual(await built(1));
    expect([earlier.loads, earlier.builds]).toEqual([0, 1]);
    // Version 2 pruned since: the rows that differ cannot be read.
    const pruned = statistics(
      versions,
      async () => {
        throw new Error('version 2 not found');
      },
      'standard',
      undefined,
      place,
    );
    expect(await counts(pruned, 3)).toEqual(await built(3));
    expect([pruned.loads, pruned.builds]).toEqual([0, 1]);
    // The column's analyzer changed since they were kept.
    const english = statistics(versions, diff(versions), 'english', undefined, place);
    await english.at(2, 's');
    expect([english.loads, english.builds]).toEqual([0, 1]);
  });
});
