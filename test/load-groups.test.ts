import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { openFile } from '../src/cli/files.js';

/**
 * The requests `strata load` makes of a file are the same bytes every time it reads it, in one process as in
 * another: DuckDB reads row groups in parallel and leaves whatever its memory held under null values, and a run
 * again must send what the first run sent for its keys to match (issue 26, item 3). No server: the groups alone.
 */

const ROWS = 60_000;
const dir = mkdtempSync(join(tmpdir(), 'strata-load-groups-'));
const path = join(dir, 'groups.parquet');

beforeAll(async () => {
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  await connection.run(`COPY (SELECT i::BIGINT AS id, CASE WHEN i % 7 = 3 THEN NULL ELSE 'w' || (i * 7919 % 1000) END AS body,
      CASE WHEN i % 11 = 3 THEN NULL ELSE (i * 1.5)::DOUBLE END AS price,
      CASE WHEN i % 5 = 3 THEN NULL ELSE i % 2 = 0 END AS flag,
      CASE WHEN i % 13 = 5 THEN NULL ELSE [i % 17, 1, 2]::FLOAT[] END AS emb FROM range(${ROWS}) t(i))
    TO '${path}' (FORMAT PARQUET, ROW_GROUP_SIZE 8192)`);
  connection.closeSync();
  instance.closeSync();
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Each group's digest and first row, for one read of the file. */
async function read(): Promise<string[]> {
  const file = await openFile(path, 'parquet', new Map([['emb', 3]]));
  try {
    const groups: string[] = [];
    for await (const group of file.groups(2_000)) {
      groups.push(`${group.start}:${group.rows}:${createHash('sha256').update(group.ipc).digest('hex')}`);
    }
    return groups;
  } finally {
    file.close();
  }
}

test('a file of many row groups with nulls, read 5 times, gives the same groups, byte for byte', async () => {
  const first = await read();
  expect(first).toHaveLength(ROWS / 2_000);
  for (let run = 2; run <= 5; run++) expect(await read(), `read ${run}`).toEqual(first);
});

test('the groups hold the rows in file order, with their nulls', async () => {
  const file = await openFile(path, 'parquet', new Map([['emb', 3]]));
  try {
    let next = 0;
    for await (const group of file.groups(2_000)) {
      const rows = arrow.tableFromIPC(group.ipc);
      expect(group.start).toBe(next);
      const ids = rows.getChild('id')?.toArray() as BigInt64Array;
      expect(Array.from(ids, Number)).toEqual(Array.from({ length: group.rows }, (_, k) => next + k));
      for (let k = 0; k < group.rows; k++) {
        const i = next + k;
        expect(rows.getChild('price')?.get(k)).toBe(i % 11 === 3 ? null : i * 1.5);
        expect(rows.getChild('flag')?.get(k)).toBe(i % 5 === 3 ? null : i % 2 === 0);
        const emb = rows.getChild('emb')?.get(k) as { toArray(): Float32Array } | null;
        expect(emb === null ? null : Array.from(emb.toArray())).toEqual(i % 13 === 5 ? null : [i % 17, 1, 2]);
      }
      next += group.rows;
    }
    expect(next).toBe(ROWS);
  } finally {
    file.close();
  }
});
