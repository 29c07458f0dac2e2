import { describe, expect, test } from 'vitest';
import { FreshText } from '../src/engine/text/fresh.js';

// The fresh rows a sole-writer node searches beside the full-text index, without Lance: a stub tokenizer splits
// on spaces, and the statistics are fixed (scores only order the rows here).

const stats = { docs: 10, tokens: 100, docsWith: () => 1 };
const fts = [{ column: 'body', analyzer: 'ascii_lower' as const }];
const split = async (texts: readonly (string | null)[]) => texts.map((t) => (t ?? '').split(' ').filter(Boolean));
const texts = (...bodies: string[]) => new Map([['body', bodies]]);
const found = async (fresh: FreshText, query: string) => {
  const read = fresh.begin();
  if (read === undefined) throw new Error('not usable');
  try {
    return (await fresh.search(read, 'body', query.split(' '), 'OR', stats, 100)).keys;
  } finally {
    fresh.end(read);
  }
};

describe('fresh rows beside the full-text index', () => {
  test('a fold while a search reads the index does not take away the rows that index misses', async () => {
    const fresh = new FreshText(fts, true, split);
    fresh.folded(10);
    fresh.committed(11, [], [1n], texts('apple pie'));
    fresh.committed(12, [], [2n], texts('apple tart'));
    const read = fresh.begin();
    if (read === undefined) throw new Error('not usable');
    // The index this search read was the fold at 10; upkeep then folds up to 12.
    fresh.folded(12);
    const during = await fresh.search(read, 'body', ['apple'], 'OR', stats, 100);
    expect(during.keys.sort()).toEqual([1n, 2n]);
    fresh.end(read);
    // A search that starts after the fold reads both from the index: here, they are gone.
    expect(await found(fresh, 'apple')).toEqual([]);
    expect(fresh.size).toBe(0);
  });

  test('a replaced row answers by its new text, a deleted one not at all', async () => {
    const fresh = new FreshText(fts, true, split);
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
    const fresh = new FreshText(fts, true, async (t) => {
      if (fail) throw new Error('no tokens');
      return split(t);
    });
    fresh.folded(1);
    expect(fresh.usable).toBe(true);
    fresh.unsettled();
    expect(fresh.usable).toBe(false);
    fresh.folded(2);
    fail = true;
    fresh.committed(3, [], [7n], texts('plum'));
    await expect(found(fresh, 'plum')).rejects.toThrow('no tokens');
    // The commit stays queued, whole: once tokens come again, it is counted in.
    fail = false;
    expect(await found(fresh, 'plum')).toEqual([7n]);
  });

  test('nothing is kept for a table without a full-text index, or where other nodes write', () => {
    const none = new FreshText([], true, split);
    const shared = new FreshText(fts, false, split);
    for (const fresh of [none, shared]) {
      fresh.folded(1);
      fresh.committed(2, [], [1n], texts('x'));
      expect(fresh.usable).toBe(false);
      expect(fresh.size).toBe(0);
    }
  });
});
