import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { columnsRead } from '../src/sql/columns-read.js';
import { openLockedInstance } from '../src/sql/lockdown.js';

let instance: DuckDBInstance;
let connection: DuckDBConnection;
const COLUMNS = new Set(['id', 'x', 'cat', 'vec', 'label']);

beforeAll(async () => {
  ({ instance, loader: connection } = await openLockedInstance({ memoryMb: 256, threads: 1 }));
});
afterAll(() => {
  connection?.closeSync();
  instance?.closeSync();
});

const read = async (sql: string) => {
  const columns = await columnsRead(connection, sql, COLUMNS);
  return columns === 'all' ? 'all' : [...columns].sort();
};

describe('the columns a statement reads', () => {
  test('are the names its column references use, in any case and through aliases', async () => {
    expect(await read('SELECT cat, count(*) AS n FROM facts GROUP BY cat ORDER BY n')).toEqual(['cat', 'n']);
    expect(await read('SELECT f.X FROM facts f JOIN dims d ON f.id % 10 = d.id')).toEqual(['d', 'f', 'id', 'x']);
    expect(await read('SELECT array_distance(Vec, [1, 2]::FLOAT[2]) FROM facts')).toEqual(['vec']);
    expect(await read('WITH w AS (SELECT x AS q FROM facts) SELECT q FROM w')).toEqual(['q', 'x']);
    expect(await read('SELECT count(*) FROM facts')).toEqual([]);
  });

  test('are all of them when the statement may read columns it does not name', async () => {
    const unnamed = [
      'SELECT * FROM facts',
      'SELECT * EXCLUDE (vec) FROM facts',
      'FROM facts',
      'TABLE facts',
      "SELECT COLUMNS('v.*') FROM facts",
      'SELECT f FROM facts f',
      'SELECT facts FROM facts',
      'SELECT to_json(f) AS f FROM facts f',
      'SELECT #1 FROM facts',
      'SELECT 1 FROM facts NATURAL JOIN dims',
      'SELECT 1 FROM facts JOIN dims USING (id)',
      'SELECT b FROM facts f(a, b)',
      "SELECT 1 FROM facts PIVOT (sum(x) FOR cat IN ('a'))",
      'PIVOT facts ON cat USING sum(x)',
      'SELECT id FROM facts UNPIVOT (v FOR c IN (x, label))',
      'SELECT struct_pack(f) FROM facts f',
      'SELECT list_transform([1], e -> e + 1) FROM facts',
      'SELEC nonsense',
    ];
    for (const sql of unnamed) expect(await read(sql), sql).toBe('all');
  });
});
