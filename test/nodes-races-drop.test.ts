import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Nodes, startNodes } from './support/nodes.js';
import { activeLocalDatabase, type Client } from './support/server.js';
import { tablesOf } from './support/tables.js';

/**
 * One table dropped through three nodes at once: one drop wins, the others answer as a single node answers a drop
 * of a table that is not there. Three `strata serve` processes on one PostgreSQL and one data folder, 25 rounds
 * (about 20 s): the race was lost in about half of the rounds, so a few rounds alone would prove little.
 */

const ROUNDS = 25;

describe('three nodes on one PostgreSQL', () => {
  let install: Nodes;
  let apis: Client[];
  let dataDir: string;
  beforeAll(async () => {
    install = await startNodes(3);
    ({ apis, dataDir } = install);
    await activeLocalDatabase(apis[0] as Client, 'shop');
  }, 60_000);
  afterAll(() => install?.stop());

  for (const purge of [false, true]) {
    test(`a table dropped${purge ? ' with purge' : ''} through every node at once: one 200, the others 404 unknown_table`, async () => {
      const tables = apis.map((api) => tablesOf(api, 'shop'));
      const [first] = tables;
      if (first === undefined) throw new Error('no node');
      const outcomes: string[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const name = `dropped_${purge ? 'p' : 'k'}${round}`;
        expect((await first.create({ table_name: name, schema: [{ name: 'id', type: 'i64' }] })).status).toBe(200);
        expect((await first.append(name, [{ id: round }])).status).toBe(200);

        const answers = await Promise.all(tables.map((t) => t.drop(name, purge)));

        outcomes.push(answers.map((a) => `${a.status} ${String(a.json.code ?? '')}`.trim()).join(', '));
        const won = answers.filter((a) => a.status === 200);
        expect(won, `round ${round}: ${outcomes.at(-1)}`).toHaveLength(1);
        expect(won[0]?.json.purged).toBe(purge);
        // The winner's purge ran (a loser's drop must not skip it), and without purge the files stay.
        const location = String(won[0]?.json.location).replace(/^local:\/\//, '');
        expect(existsSync(join(dataDir, 'buckets', location))).toBe(!purge);
        for (const lost of answers.filter((a) => a.status !== 200)) {
          expect(lost.status, `round ${round}: ${outcomes.at(-1)}`).toBe(404);
          expect(lost.json.code).toBe('unknown_table');
        }
        for (const t of tables) {
          expect((await t.list()).json.tables.map((table) => table.table_name)).not.toContain(name);
        }
      }
    }, 120_000);
  }
});
