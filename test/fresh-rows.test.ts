import type { RecordBatch, Table } from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, test, vi } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { FreshBudget } from '../src/engine/fresh/budget.js';
import { FreshPostings } from '../src/engine/fresh/postings.js';
import { FreshRows, type FreshWrite } from '../src/engine/fresh/rows.js';
import type { Metric } from '../src/engine/indexes/registry.js';
import type { RowId } from '../src/engine/rows/source.js';
import { bm25Scorer, highestGain } from '../src/engine/text/bm25.js';
import { RowTokens } from '../src/engine/text/row-tokens.js';

// The fresh rows a sole-writer node searches beside its indexes, without Lance: a stub tokenizer splits on
// spaces, and the statistics are fixed (scores only order the rows here).

const stats = { docs: 10, tokens: 100, docsWith: () => 1 };
const fts = [{ column: 'body', analyzer: 'ascii_lower' as const }];
const vector = (metric: Metric = 'l2sq') => [{ column: 'emb', metric, dim: 2 }];
const indexes = { fts, vector: vector() };
const split = async (texts: readonly (string | null)[]) => texts.map((t) => (t ?? '').split(' ').filter(Boolean));
const texts = (...bodies: string[]): FreshWrite => ({
  texts: new Map([['body', bodies]]),
  vectors: new Map(),
  rows: [],
});
const vectors = (...rows: (number[] | null)[]): FreshWrite => ({
  texts: new Map([['body', rows.map(() => null)]]),
  vectors: new Map([['emb', rows.map((v) => (v === null ? null : Float32Array.from(v)))]]),
  rows: [],
});

const found = async (fresh: FreshRows, query: string) => {
  const read = fresh.begin('text');
  if (read === undefined) throw new Error('not usable');
  try {
    return (await fresh.searchText(read, 'body', query.split(' '), 'OR', stats, 100)).keys;
  } finally {
    fresh.end(read);
  }
};

const nearest = async (fresh: FreshRows, query: number[], limit = 100) => {
  const read = fresh.begin('vector');
  if (read === undefined) throw new Error('not usable');
  try {
    return await fresh.searchVector(read, 'emb', Float32Array.from(query), limit);
  } finally {
    fresh.end(read);
  }
};

describe('fresh rows beside the full-text index', () => {
  test('a fold while a search reads the index does not take away the rows that index misses', async () => {
    const fresh = new FreshRows(indexes, true, split);
    fresh.folded(10);
    fresh.committed(11, [], [1n], texts('apple pie'));
    fresh.committed(12, [], [2n], texts('apple tart'));
    const read = fresh.begin('text');
    if (read === undefined) throw new Error('not usable');
    // The index this search read was the fold at 10; upkeep then folds up to 12.
    fresh.folded(12);
    const during = await fresh.searchText(read, 'body', ['apple'], 'OR', stats, 100);
    expect(during.keys.sort()).toEqual([1n, 2n]);
    fresh.end(read);
    // Once no search reads them, they go, without waiting for a write or a fold.
    expect(fresh.size).toBe(0);
    // A search that starts after the fold reads both from the index: here, they are gone.
    expect(await found(fresh, 'apple')).toEqual([]);
    expect(fresh.size).toBe(0);
    expect(fresh.bytes).toBe(0);
  });

  test('a replaced row answers by its new text, a deleted one not at all', async () => {
    const fresh = new FreshRows(indexes, true, split);
    fresh.folded(1);
    fresh.committed(2, [], [1n, 2n], texts('red kettle', 'blue pot'));
    fresh.committed(3, [1n], [1n], texts('green kettle'));
    fresh.committed(4, [2n], [], texts());
    expect(await found(fresh, 'red')).toEqual([]);
    expect(await found(fresh, 'green')).toEqual([1n]);
    expect(await found(fresh, 'kettle')).toEqual([1n]);
    expect(await found(fresh, 'pot')).toEqual([]);
  });

  test('a commit it could not follow, or a text it could not tokenize, sends searches the index-and-tail way until a fold', async () => {
    let fail = false;
    const fresh = new FreshRows(indexes, true, async (t) => {
      if (fail) throw new Error('no tokens');
      return split(t);
    });
    fresh.folded(1);
    expect(fresh.usable('text')).toBe(true);
    expect(fresh.usable('vector')).toBe(true);
    fresh.unsettled();
    expect(fresh.usable('text')).toBe(false);
    expect(fresh.usable('vector')).toBe(false);
    // Usable again from a fold at or past the next commit's version.
    fresh.committed(2, [], [6n], texts('seed'));
    fresh.folded(2);
    expect(fresh.usable('text')).toBe(true);
    fail = true;
    fresh.committed(3, [], [7n], texts('plum'));
    await expect(found(fresh, 'plum')).rejects.toThrow('no tokens');
    // The commit stays queued, whole: once tokens come again, it is counted in.
    fail = false;
    expect(await found(fresh, 'plum')).toEqual([7n]);
  });

  test('nothing is kept for a table without a search index, or where other nodes write', () => {
    const none = new FreshRows({ fts: [], vector: [] }, true, split);
    const shared = new FreshRows(indexes, false, split);
    for (const fresh of [none, shared]) {
      fresh.folded(1);
      fresh.committed(2, [], [1n], texts('x'));
      expect(fresh.usable('text')).toBe(false);
      expect(fresh.size).toBe(0);
    }
  });
});

describe('fresh rows found by review', () => {
  test('under AND a term no held row holds any more matches nothing, and its id goes back', async () => {
    const fresh = new FreshRows(indexes, true, split);
    fresh.folded(0);
    fresh.committed(1, [], [1n], texts('apple'));
    fresh.committed(2, [1n], [], texts());
    fresh.committed(3, [], [2n], texts('banana'));
    const read = fresh.begin('text');
    if (read === undefined) throw new Error('not usable');
    expect((await fresh.searchText(read, 'body', ['apple', 'banana'], 'AND', stats, 10)).keys).toEqual([]);
    expect((await fresh.searchText(read, 'body', ['apple', 'banana'], 'OR', stats, 10)).keys).toEqual([2n]);
    fresh.end(read);
  });

  test('a fold that began before a write that may have landed unseen does not make the rows usable again', () => {
    const fresh = new FreshRows(indexes, true, split);
    fresh.folded(1);
    fresh.committed(2, [], [1n], texts('x'));
    fresh.unsettled(); // the write after 2 failed; it may have landed as 3
    fresh.folded(2);
    expect(fresh.usable('text')).toBe(false);
    fresh.committed(4, [], [2n], texts('y'));
    fresh.folded(3);
    expect(fresh.usable('text')).toBe(false);
    fresh.folded(4);
    expect(fresh.usable('text')).toBe(true);
  });

  test('disposed while a commit is tokenized, nothing is counted in and the budget returns to 0', async () => {
    const budget = new FreshBudget(1_000_000);
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const fresh = new FreshRows(
      indexes,
      true,
      async (t) => {
        await gate;
        return split(t);
      },
      budget,
    );
    fresh.folded(1);
    fresh.committed(2, [], [1n], texts('slow'));
    fresh.dispose();
    release();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(fresh.size).toBe(0);
    expect(budget.bytes).toBe(0);
  });
});

describe('the batches the rows came in', () => {
  test('stay charged while any of their rows is held, and the budget returns to 0 once none is', async () => {
    const budget = new FreshBudget(1_000_000);
    const fresh = new FreshRows(indexes, true, split, budget);
    fresh.folded(0);
    const batch = arrow.tableFromArrays({ body: ['a b', 'c d'] }).batches[0] as RecordBatch;
    fresh.committed(1, [], [1n, 2n], { ...texts('a b', 'c d'), rows: [batch] });
    expect(await found(fresh, 'c')).toEqual([2n]);
    expect(fresh.rowsOf([2n]).map((b) => b.numRows)).toEqual([1]);
    const held = budget.bytes;
    fresh.committed(2, [1n], [], texts());
    await found(fresh, 'x');
    // One row left: its batch is still held, and still charged.
    expect(budget.bytes).toBeGreaterThanOrEqual(batch.data.byteLength);
    expect(budget.bytes).toBeLessThan(held);
    fresh.committed(3, [2n], [], texts());
    await found(fresh, 'x');
    expect(budget.bytes).toBe(0);
    expect(fresh.bytes).toBe(0);
  });
});

describe('fresh rows beside the vector index', () => {
  test('each kind has its own boundary: a full-text rebuild does not cover the vector index', async () => {
    const fresh = new FreshRows(indexes, true, split);
    fresh.folded(1, ['text']);
    expect(fresh.usable('text')).toBe(true);
    expect(fresh.usable('vector')).toBe(false);
    fresh.committed(2, [], [1n], { texts: texts('kettle').texts, vectors: vectors([1, 0]).vectors, rows: [] });
    expect(await found(fresh, 'kettle')).toEqual([1n]);
    fresh.folded(2, ['text']);
    // The text index covers the row, the vector index not yet: it stays for vector searches.
    expect(await found(fresh, 'kettle')).toEqual([]);
    expect(fresh.size).toBe(1);
    fresh.folded(1, ['vector']);
    expect((await nearest(fresh, [1, 0])).keys).toEqual([1n]);
    fresh.folded(2, ['vector']);
    expect(fresh.size).toBe(0);
  });

  test('nearest first under each metric, in the API form; null rows, and zero rows under cosine, never come back', async () => {
    const rows = [[3, 4], [1, 0], [0, 0], null, [-2, 1]];
    // Key by key, each metric's distance to [1, 0], nearest first.
    const want: Record<Metric, [bigint, number][]> = {
      l2sq: [
        [2n, 0],
        [3n, 1],
        [5n, 10],
        [1n, 20],
      ],
      cosine: [
        [2n, 0],
        [1n, 1 - 3 / 5],
        [5n, 1 + 2 / Math.sqrt(5)],
      ],
      negdot: [
        [1n, -3],
        [2n, -1],
        [3n, 0],
        [5n, 2],
      ],
    };
    for (const metric of ['l2sq', 'cosine', 'negdot'] as const) {
      const fresh = new FreshRows({ fts: [], vector: vector(metric) }, true, split);
      fresh.folded(0);
      fresh.committed(1, [], [1n, 2n, 3n, 4n, 5n], vectors(...rows));
      const hits = await nearest(fresh, [1, 0]);
      expect(hits.keys, metric).toEqual(want[metric].map(([key]) => key));
      want[metric].forEach(([, value], i) => {
        expect(hits.values[i], metric).toBeCloseTo(value, 5);
      });
    }
  });

  test('the best k and every row tied with the last, whatever rows left or were replaced', () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('add' as const),
        key: fc.integer({ min: 1, max: 40 }),
        x: fc.integer({ min: -3, max: 3 }),
      }),
      fc.record({ kind: fc.constant('remove' as const), key: fc.integer({ min: 1, max: 40 }) }),
    );
    return fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 120 }), fc.integer({ min: 1, max: 12 }), async (ops, k) => {
        const fresh = new FreshRows({ fts: [], vector: vector() }, true, split);
        fresh.folded(0);
        const model = new Map<bigint, number>();
        ops.forEach((o, i) => {
          const key = BigInt(o.key);
          if (o.kind === 'add') {
            fresh.committed(i + 1, [key], [key], vectors([o.x, 0]));
            model.set(key, o.x);
          } else {
            fresh.committed(i + 1, [key], [], vectors());
            model.delete(key);
          }
        });
        const hits = await nearest(fresh, [0, 0], k);
        const sorted = [...model]
          .map(([key, x]) => ({ key, d: x * x }))
          .sort((a, b) => a.d - b.d || (a.key < b.key ? -1 : 1));
        const edge = sorted[k - 1]?.d;
        const expected = sorted.filter((s) => edge === undefined || s.d <= edge);
        expect(hits.keys).toEqual(expected.map((s) => s.key));
        expect(hits.values).toEqual(expected.map((s) => s.d));
      }),
      { numRuns: 150 },
    );
  });
});

describe('the fresh tier budget', () => {
  test('past it, the largest table lets go of its rows until a fold after them; searches under way are told', async () => {
    const budget = new FreshBudget(10_000);
    const small = new FreshRows(indexes, true, split, budget);
    const large = new FreshRows(indexes, true, split, budget);
    small.folded(0);
    large.folded(0);
    small.committed(1, [], [1n], texts('tea'));
    large.committed(1, [], [1n, 2n, 3n], texts('coffee'.repeat(100), 'cake', 'pie'));
    const read = large.begin('text');
    if (read === undefined) throw new Error('not usable');
    // This one takes the budget past its limit: the largest table lets go, the small one keeps its rows.
    large.committed(2, [], [4n], texts('coffee'.repeat(200)));
    expect(large.overflowed).toBe(true);
    expect(large.usable('text')).toBe(false);
    expect(large.size).toBe(0);
    expect(budget.bytes).toBe(small.bytes);
    expect(budget.overflows).toBe(1);
    expect(await found(small, 'tea')).toEqual([1n]);
    await expect(large.searchText(read, 'body', ['cake'], 'OR', stats, 10)).rejects.toThrow('let go');
    // Commits go on uncounted; a fold that does not cover them all does not make the rows usable again.
    large.committed(3, [], [5n], texts('bun'));
    large.folded(2);
    expect(large.usable('text')).toBe(false);
    large.folded(3);
    expect(large.usable('text')).toBe(true);
    expect(large.overflowed).toBe(false);
    large.committed(4, [], [6n], texts('scone'));
    expect(await found(large, 'scone')).toEqual([6n]);
    large.dispose();
    small.dispose();
    expect(budget.bytes).toBe(0);
    expect(budget.rows).toBe(0);
  });
});

describe('followed rows past the budget', () => {
  const rows = (...bodies: [bigint, string][]) =>
    arrow.tableFromArrays({
      _rowkey: BigInt64Array.from(bodies.map(([key]) => key)),
      body: bodies.map(([, body]) => body),
    });
  const none = rows();

  test('once upkeep records a fold after the budget let go, the rows outside the indexes are read and held again', async () => {
    const budget = new FreshBudget(4_000);
    let folds: { text?: number } = { text: 1 };
    let outsideReads = 0;
    const step = new Map<number, Table>([
      [2, rows([1n, 'tea'])],
      [3, rows([2n, 'coffee '.repeat(100)], [3n, 'cake'])],
      [4, rows([4n, 'pie'])],
    ]);
    const fresh = new FreshRows({ fts, vector: [] }, false, split, budget, undefined, {
      changes: async (_from, to) => ({ removed: none, added: step.get(to) ?? none }),
      removedNone: async () => false,
      outside: async () => {
        outsideReads++;
        return rows([3n, 'cake'], [4n, 'pie']);
      },
      folds: async () => folds,
    });
    await fresh.follow(1);
    await fresh.follow(2);
    expect(await found(fresh, 'tea')).toEqual([1n]);
    // Past the budget: every row goes, and no fold recorded before counts.
    await fresh.follow(3);
    expect(fresh.overflowed).toBe(true);
    expect(fresh.usable('text')).toBe(false);
    await fresh.follow(4);
    expect(fresh.usable('text')).toBe(false);
    expect(outsideReads).toBe(0);
    // A fold recorded since (of the rows up to 3): the rows outside the indexes at 5 are read and held.
    folds = { text: 3 };
    await fresh.follow(5);
    expect(outsideReads).toBe(1);
    expect(fresh.overflowed).toBe(false);
    expect(await found(fresh, 'pie cake tea')).toEqual([3n, 4n]);
    fresh.dispose();
    expect(budget.bytes).toBe(0);
  });
});

describe('following waited for at most so long', () => {
  test('a search waits what is left of the wait since the step under way began, and the step goes on', async () => {
    const rows = (...bodies: [bigint, string][]) =>
      arrow.tableFromArrays({
        _rowkey: BigInt64Array.from(bodies.map(([key]) => key)),
        body: bodies.map(([, body]) => body),
      });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const fresh = new FreshRows({ fts, vector: [] }, false, split, new FreshBudget(1_000_000), undefined, {
      changes: async (_from, to) => {
        if (to === 2) await released;
        return { removed: rows(), added: to === 2 ? rows([1n, 'tea']) : rows([2n, 'cake']) };
      },
      removedNone: async (from, to) => {
        asked.push([from, to]);
        return to !== 5;
      },
      outside: async () => undefined,
      folds: async () => ({ text: 1 }),
    });
    const asked: [number, number][] = [];
    // Not followed yet: nothing is known of what following would do.
    expect(await fresh.removesNoneTo(1)).toBe(false);
    expect(asked).toEqual([]);
    expect(await fresh.followWithin(1, 1000)).toBe(true);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const first = fresh.followWithin(2, 30);
      await vi.advanceTimersByTimeAsync(50);
      expect(await first).toBe(false);
      // The stalled step began 50 ms ago: a search that would wait 60 ms waits the 10 left.
      let answered: boolean | undefined;
      fresh.followWithin(3, 60).then((done) => {
        answered = done;
      });
      await vi.advanceTimersByTimeAsync(10);
      expect(answered).toBe(false);
    } finally {
      vi.useRealTimers();
    }
    // While the step to 2 is under way, whether following to 4 would remove rows is asked from the version followed
    // last (1): the step under way is one of those commits.
    expect(await fresh.removesNoneTo(4)).toBe(true);
    expect(await fresh.removesNoneTo(5)).toBe(false);
    expect(asked).toEqual([
      [1, 4],
      [1, 5],
    ]);
    release();
    expect(await fresh.followWithin(3, 5_000)).toBe(true);
    expect(await found(fresh, 'tea cake')).toEqual([1n, 2n]);
    // Up to the version followed, nothing is asked.
    expect(await fresh.removesNoneTo(3)).toBe(true);
    expect(asked).toHaveLength(2);
    fresh.dispose();
  });
});

describe("the fresh rows' postings", () => {
  test('score each row to the bit as bm25Scorer does, and answer the best k with their ties, through removals and packs', () => {
    const word = fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f');
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('add' as const),
        key: fc.integer({ min: 0, max: 400 }),
        rows: fc.integer({ min: 1, max: 900 }),
        version: fc.integer({ min: 1, max: 5 }),
        words: fc.array(word, { minLength: 1, maxLength: 6 }),
      }),
      fc.record({ kind: fc.constant('remove' as const), from: fc.nat(), span: fc.integer({ min: 1, max: 1500 }) }),
      fc.record({
        kind: fc.constant('search' as const),
        query: fc.array(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'zz'), { minLength: 1, maxLength: 4 }),
        and: fc.boolean(),
        limit: fc.integer({ min: 1, max: 40 }),
        since: fc.integer({ min: 0, max: 5 }),
      }),
    );
    return fc.assert(
      fc.property(fc.array(op, { minLength: 5, maxLength: 30 }), (ops) => {
        const postings = new FreshPostings();
        const model = new Map<bigint, { tokens: string[]; version: number }>();
        for (const o of ops) {
          if (o.kind === 'add') {
            for (let i = 0; i < o.rows; i++) {
              const key = BigInt(o.key * 1000 + i);
              if (model.has(key)) continue;
              // Each row's words repeat and rotate, so rows differ in length and term counts, and many tie.
              const tokens = o.words.flatMap((w, j) => Array.from({ length: 1 + ((i + j) % 3) }, () => w));
              model.set(key, { tokens, version: o.version });
              postings.add(key, tokens, o.version);
            }
          } else if (o.kind === 'remove') {
            const held = [...model.keys()];
            const start = o.from % (held.length + 1);
            for (const key of held.slice(start, start + o.span)) {
              model.delete(key);
              postings.remove(key);
            }
          } else {
            const docs = [...model.values()];
            const stats = {
              docs: docs.length,
              tokens: docs.reduce((n, d) => n + d.tokens.length, 0),
              docsWith: (term: string) => docs.filter((d) => d.tokens.includes(term)).length,
            };
            const score = bm25Scorer<string>(o.query, stats, (t) => t);
            const want = [...model]
              .filter(([, d]) => d.version > o.since)
              .filter(([, d]) =>
                o.and ? o.query.every((t) => d.tokens.includes(t)) : o.query.some((t) => d.tokens.includes(t)),
              )
              .map(([key, d]) => ({ key, value: score(d.tokens) }))
              .sort((x, y) => y.value - x.value || (x.key < y.key ? -1 : 1));
            const edge = want[o.limit - 1]?.value;
            const kept = edge === undefined ? want : want.filter((w) => w.value >= edge);
            const got = postings.search(o.query, o.and ? 'AND' : 'OR', stats, o.limit, o.since);
            expect(got.keys).toEqual(kept.map((w) => w.key));
            expect(got.values).toEqual(kept.map((w) => w.value));
            // The statistics of the rows after `since`: what an index covering all the others lacks.
            const after = docs.filter((d) => d.version > o.since);
            const tail = postings.statisticsAfter(o.since, o.query);
            expect([tail.docs, tail.tokens]).toEqual([after.length, after.reduce((n, d) => n + d.tokens.length, 0)]);
            for (const term of o.query) {
              expect(tail.docsWith(term)).toBe(after.filter((d) => d.tokens.includes(term)).length);
            }
          }
        }
      }),
      { numRuns: 40 },
    );
  });
});

describe('how far a score can move with the statistics', () => {
  test("no row scores more over the live rows than highestGain times its score over an index's", () => {
    const word = fc.constantFrom('a', 'b', 'c', 'd', 'e');
    const doc = fc.array(word, { minLength: 1, maxLength: 12 });
    const statsOf = (docs: string[][]) => ({
      docs: docs.length,
      tokens: docs.reduce((n, d) => n + d.length, 0),
      docsWith: (term: string) => docs.filter((d) => d.includes(term)).length,
    });
    fc.assert(
      fc.property(
        fc.array(doc, { minLength: 1, maxLength: 40 }),
        fc.array(doc, { maxLength: 40 }),
        fc.array(word, { minLength: 1, maxLength: 4 }),
        (indexed, outside, query) => {
          const index = statsOf(indexed);
          const live = statsOf([...indexed, ...outside]);
          const gain = highestGain(query, live, index);
          const overIndex = bm25Scorer<string>(query, index, (t) => t);
          const overLive = bm25Scorer<string>(query, live, (t) => t);
          for (const row of indexed) expect(overLive(row)).toBeLessThanOrEqual(gain * overIndex(row) * (1 + 1e-12));
          // And no less than the inverse of the most the other way round.
          const shrink = 1 / highestGain(query, index, live);
          for (const row of indexed) {
            expect(overLive(row)).toBeGreaterThanOrEqual(shrink * overIndex(row) * (1 - 1e-12));
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  test('is 1 when nothing moved, and Infinity over an index of no document or counts no two sets of rows give', () => {
    const stats = { docs: 10, tokens: 40, docsWith: (t: string) => (t === 'a' ? 3 : 0) };
    expect(highestGain(['a', 'b'], stats, stats)).toBe(1);
    expect(highestGain(['a'], stats, { docs: 0, tokens: 0, docsWith: () => 0 })).toBe(Number.POSITIVE_INFINITY);
    // Live statistics that lag the tier's (a commit counted in one and not yet the other): a term in -1 rows.
    const postings = new FreshPostings();
    postings.add(1n, ['alpha', 'zebra'], 5);
    const tier = postings.statisticsAfter(0, ['alpha', 'zebra']);
    const live = { docs: 100, tokens: 300, docsWith: (t: string) => (t === 'alpha' ? 50 : 0) };
    const index = {
      docs: live.docs - tier.docs,
      tokens: live.tokens - tier.tokens,
      docsWith: (t: string) => live.docsWith(t) - tier.docsWith(t),
    };
    expect(highestGain(['alpha', 'zebra'], live, index)).toBe(Number.POSITIVE_INFINITY);
    expect(highestGain(['a'], stats, { docs: 2, tokens: 8, docsWith: () => 3 })).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('the tokens of rows a text leg scored', () => {
  test('are held by table, column and row id, the least recently used going first past the budget', () => {
    const id = (n: number) => BigInt(n) as RowId;
    // Each entry below costs 2 × 9 (its key: table, column and id, two separators) + 96 + 2 × (5 + 24) = 172.
    const held = new RowTokens(3 * 172);
    held.set('t1', 'body', id(1), ['alpha', 'bravo']);
    held.set('t1', 'body', id(2), ['delta', 'hotel']);
    held.set('t2', 'body', id(1), ['kilos', 'limas']);
    expect(held.get('t1', 'body', id(1))).toEqual(['alpha', 'bravo']);
    expect(held.get('t1', 'note', id(1))).toBeUndefined();
    expect(held.get('t2', 'body', id(1))).toEqual(['kilos', 'limas']);
    // 1 and t2's 1 were used since 2 was: 2 goes.
    held.set('t1', 'body', id(3), ['mikes', 'oscar']);
    expect(held.size).toBe(3);
    expect(held.get('t1', 'body', id(2))).toBeUndefined();
    expect(held.get('t1', 'body', id(1))).toEqual(['alpha', 'bravo']);
    expect(held.get('t1', 'body', id(3))).toEqual(['mikes', 'oscar']);
    // A row with no tokens is held as such; one larger than the whole budget is not held.
    held.set('t1', 'body', id(4), []);
    expect(held.get('t1', 'body', id(4))).toEqual([]);
    held.set(
      't1',
      'body',
      id(5),
      Array.from({ length: 100 }, () => 'x'),
    );
    expect(held.get('t1', 'body', id(5))).toBeUndefined();
    expect(held.size).toBeLessThanOrEqual(3);
  });
});
