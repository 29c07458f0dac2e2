import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { connect, type LanceTable } from '../src/engine/lance/lance.js';
import { versionsOf } from '../src/engine/lance/rows.js';
import { TableChanges } from '../src/engine/tables/changes.js';

// What upkeep records of its own commits decides whether SQL reloads a table: a version another node committed
// between upkeep's versions must never be recorded as leaving the rows as they were (a stale SQL count, once in
// ~180 reads on the upkeep node during a load through other nodes).

const dir = mkdtempSync(join(tmpdir(), 'strata-changes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function table(name: string): Promise<{ mine: LanceTable; other: LanceTable }> {
  const db = await connect(dir, { readConsistencyInterval: 0 });
  const rows = Array.from({ length: 20 }, (_, i) => ({ id: i, v: `r${i}` }));
  const mine = await db.createTable(name, rows.slice(0, 10));
  await mine.add(rows.slice(10));
  // Another node: its own connection to the same dataset.
  const other = await (await connect(dir, { readConsistencyInterval: 0 })).openTable(name);
  return { mine, other };
}

/** Upkeep's commit (compaction and index folding) run through `maintain`, with `meanwhile` committed amid it. */
async function maintained(t: LanceTable, meanwhile?: () => Promise<unknown>) {
  const changes = new TableChanges();
  const before = await t.version();
  await changes.maintain(
    () => t.version(),
    async () => {
      await meanwhile?.();
      await t.optimize();
    },
    () => versionsOf(t),
  );
  return changes.between(before, await t.version());
}

describe('upkeep records only versions that kept the rows', () => {
  test('compaction alone is recorded as no change', async () => {
    const { mine } = await table('alone');
    expect(await maintained(mine)).toBe('none');
  });

  test.each([
    ['an append', (other: LanceTable) => other.add([{ id: 100, v: 'new' }])],
    ['a delete', (other: LanceTable) => other.delete('id = 3')],
    [
      'a replace',
      (other: LanceTable) =>
        other
          .mergeInsert('id')
          .whenMatchedUpdateAll()
          .execute([{ id: 4, v: 'replaced' }]),
    ],
  ])('%s another node commits amid it is not', async (_, commit) => {
    const { mine, other } = await table(`amid-${_.replaceAll(' ', '-')}`);
    expect(await maintained(mine, () => commit(other))).toBe('rewrite');
  });
});

/** Versions told by hand, with the row counts their manifests would keep: each kept the rows but those in `changed`. */
const countedVersions = (last: number, changed: readonly number[]) =>
  Array.from({ length: last + 1 }, (_, v) => {
    const grown = changed.filter((c) => c <= v).length;
    return { version: v, timestamp: new Date(0), rows: 10 + grown, storedRows: 10 + grown, deletedRows: 0 };
  });

describe("upkeep's versions amid this worker's own writes", () => {
  test('a write that committed amid upkeep keeps its kind; the versions no write claims are upkeep’s', async () => {
    const changes = new TableChanges();
    let version = 1;
    const write = changes.beginWrite('append');
    await changes.maintain(
      async () => version,
      async () => {
        version = 4; // upkeep's 2 and 4, and the write's 3, an append
      },
      async () => countedVersions(4, [3]),
    );
    // The write has not said its version yet: nothing is recorded until it does.
    expect(changes.between(1, 2)).toBe('rewrite');
    write({ version: 3, kind: 'append' });
    expect(changes.between(1, 4)).toBe('append');
    expect(changes.between(3, 4)).toBe('none');
  });

  test('a write that ended without knowing its version leaves the versions waiting for it unaccounted for', async () => {
    const changes = new TableChanges();
    let version = 1;
    const write = changes.beginWrite('rewrite');
    await changes.maintain(
      async () => version,
      async () => {
        version = 3;
      },
      async () => countedVersions(3, []),
    );
    write();
    expect(changes.between(1, 3)).toBe('rewrite');
    // A later upkeep commit, with no write under way, is recorded at once.
    await changes.maintain(
      async () => version,
      async () => {
        version = 4;
      },
      async () => countedVersions(4, []),
    );
    expect(changes.between(3, 4)).toBe('none');
  });
});

describe('versions explained by a sole writer', () => {
  test('upkeep’s versions not recorded yet count as no change once the writes under way said theirs', async () => {
    const changes = new TableChanges();
    const write = changes.beginWrite('append');
    // Versions 2 (upkeep's, its step not ended yet) and 3 (the write's append, not said yet).
    const explained = changes.explained(1, 3, async () => countedVersions(3, [3]));
    let answered = false;
    void explained.then(() => {
      answered = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(answered).toBe(false);
    write({ version: 3, kind: 'append' });
    expect(await explained).toBe('append');
    expect(await changes.explained(1, 2, async () => countedVersions(3, [3]))).toBe('none');
    // A version whose counts changed is never taken for upkeep's.
    expect(await changes.explained(1, 3, async () => countedVersions(3, [2, 3]))).toBe('rewrite');
    // The plain record still says nothing of version 2.
    expect(changes.between(1, 2)).toBe('rewrite');
  });
});

describe('rewrites a read raced', () => {
  test('a rewrite under way at the mark or begun since is seen; appends are not', async () => {
    const changes = new TableChanges();
    const quiet = changes.rewrites;
    const append = changes.beginWrite('append');
    expect(changes.rewroteSince(quiet)).toBe(false);
    const rewrite = changes.beginWrite('rewrite');
    expect(changes.rewroteSince(quiet)).toBe(true);
    const during = changes.rewrites;
    expect(during.underWay).toBe(true);
    rewrite({ version: 2, kind: 'rewrite' });
    // It was under way at the mark: it may have committed after.
    expect(changes.rewroteSince(during)).toBe(true);
    const after = changes.rewrites;
    expect(changes.rewroteSince(after)).toBe(false);
    // Writes under way end the wait, or the time limit does.
    expect(await changes.writesEnded(10)).toBe(false);
    append({ version: 3, kind: 'append' });
    expect(await changes.writesEnded(10)).toBe(true);
  });
});

describe('listing versions while a prune deletes them', () => {
  // Lance lists the manifests, then reads each: one a prune deleted in between failed the listing ("Not found"),
  // and a hybrid search that asked for the versions answered 500 (bench, 1M rows under ingest).
  test('the listing is taken again, where Lance alone can fail', { timeout: 120_000 }, async () => {
    const db = await connect(dir, { readConsistencyInterval: 0 });
    let ours = 0;
    let listings = 0;
    for (let round = 0; round < 3; round++) {
      const t = await db.createTable(`pruned${round}`, [{ id: 0 }]);
      for (let i = 1; i < 200; i++) await t.add([{ id: i }]);
      const lister = await db.openTable(`pruned${round}`);
      let pruning = true;
      const listing = (async () => {
        while (pruning) {
          listings++;
          await versionsOf(lister).catch(() => ours++);
        }
      })();
      await new Promise((resolve) => setTimeout(resolve, 20));
      await t.optimize({ cleanupOlderThan: new Date(Date.now() + 60_000) });
      pruning = false;
      await listing;
      expect((await versionsOf(lister)).map((v) => v.version)).toEqual([await t.version()]);
    }
    expect(listings).toBeGreaterThan(0);
    // No listing of ours failed. Lance's own listing failed in 124 of 162 listings during such a prune on a quiet
    // machine; under load the two may not overlap, so that is not asserted here.
    expect(ours).toBe(0);
  });
});
