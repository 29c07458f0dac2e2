import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { LiveTexts } from './support/bm25.js';
import { freshControlUrl } from './support/postgres.js';
import { type Client, onTableHandle, startStrata, type TestServer, upkeepPass } from './support/server.js';
import { textTable } from './support/tables.js';

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
    const writes = await writer.as('acme');
    const searches: Client = await reader.as('acme');
    const tables = await textTable(writes, 'shared', 'docs');
    const words = ['red', 'kettle', 'blue', 'pot', 'tea', 'cup', 'green', 'steel'];
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)] as T;
    const body = () =>
      random() < 0.05 ? null : Array.from({ length: 1 + Math.floor(random() * 7) }, () => pick(words)).join(' ');
    const model = new LiveTexts(tables, 'docs', body, random);
    const check = (step: string) =>
      model.expectScores(searches, 'shared', `${pick(words)} ${pick(words)}`, false, step);

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
