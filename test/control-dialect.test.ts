import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { now, raw, render, rowLock, sql } from '../src/control/dialect/sql.js';
import { SqliteConnection, SqliteDb } from '../src/control/dialect/sqlite.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('a statement written once', () => {
  const states = raw("('deleting', 'purging')");
  const owner = (id: string) => sql`database_id = ${id}`;
  const statement = sql`SELECT * FROM t WHERE ${owner('db_1')} AND state NOT IN ${states} AND n > ${2}
    AND until_ms < ${now} ${rowLock('FOR UPDATE')}`;

  test('is rendered for SQLite with ? placeholders and the clock of this process as a parameter', () => {
    const before = Date.now();
    const { text, params } = render(statement, 'sqlite');
    expect(text).toBe(`SELECT * FROM t WHERE database_id = ? AND state NOT IN ('deleting', 'purging') AND n > ?
    AND until_ms < ? `);
    expect(params.slice(0, 2)).toEqual(['db_1', 2]);
    expect(params[2]).toBeGreaterThanOrEqual(before);
  });

  test("is rendered for PostgreSQL with numbered placeholders, the database's clock and its row locks", () => {
    const { text, params } = render(statement, 'postgres');
    expect(text).toBe(`SELECT * FROM t WHERE database_id = $1 AND state NOT IN ('deleting', 'purging') AND n > $2
    AND until_ms < (extract(epoch from clock_timestamp()) * 1000)::bigint FOR UPDATE`);
    expect(params).toEqual(['db_1', 2]);
  });

  test('never puts a value in the text, whatever it holds', () => {
    const hostile = "x'; DROP TABLE t; --";
    expect(render(sql`SELECT ${hostile}`, 'sqlite')).toEqual({ text: 'SELECT ?', params: [hostile] });
    expect(render(sql`SELECT ${hostile}`, 'postgres')).toEqual({ text: 'SELECT $1', params: [hostile] });
  });
});

describe('the SQLite transport', () => {
  const fresh = () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-dialect-'));
    dirs.push(dir);
    return join(dir, 'c.sqlite');
  };

  test("a transaction's awaits let no other statement into it: one that rolls back takes only its own writes", async () => {
    const connection = new SqliteConnection(fresh());
    const db = new SqliteDb(connection, { publish: () => undefined });
    await db.run(sql`CREATE TABLE t (n INTEGER)`);
    const ticks = async () => {
      for (let i = 0; i < 5; i++) await Promise.resolve();
    };

    const failed = db
      .transaction(async (tx) => {
        await tx.run(sql`INSERT INTO t (n) VALUES (${1})`);
        await ticks();
        await tx.run(sql`INSERT INTO t (n) VALUES (${2})`);
        throw new Error('given up');
      })
      .catch((err: unknown) => err);
    const outside = db.run(sql`INSERT INTO t (n) VALUES (${3})`);

    expect(String(await failed)).toMatch(/given up/);
    await outside;
    expect(await db.all(sql`SELECT n FROM t`)).toEqual([{ n: 3 }]);
    connection.close();
  });

  test('two connections of one process to one file take turns instead of blocking the event loop', async () => {
    const path = fresh();
    const [first, second] = [new SqliteConnection(path), new SqliteConnection(path)];
    const [a, b] = [first, second].map((c) => new SqliteDb(c, { publish: () => undefined })) as [SqliteDb, SqliteDb];
    await a.run(sql`CREATE TABLE t (n INTEGER)`);

    const started = Date.now();
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 === 0 ? a : b).transaction(async (tx) => {
          const row = await tx.get<{ n: number }>(sql`SELECT count(*) AS n FROM t`);
          await tx.run(sql`INSERT INTO t (n) VALUES (${row?.n ?? 0})`);
        }),
      ),
    );

    // Each counted what the ones before it wrote: no two ran at once, and none waited for SQLite's busy timeout.
    expect((await b.all<{ n: number }>(sql`SELECT n FROM t ORDER BY n`)).map((r) => r.n)).toEqual(
      Array.from({ length: 20 }, (_, i) => i),
    );
    expect(Date.now() - started).toBeLessThan(2000);
    first.close();
    second.close();
  });

  test('announces what a transaction told only once it committed', async () => {
    const heard: unknown[] = [];
    const connection = new SqliteConnection(fresh());
    const db = new SqliteDb(connection, { publish: (event) => heard.push(event) });

    await db
      .transaction(async (tx) => {
        await tx.notify({ kind: 'database_gone', databaseId: 'rolled_back' });
        throw new Error('given up');
      })
      .catch(() => undefined);
    await db.transaction(async (tx) => {
      await tx.notify({ kind: 'database_gone', databaseId: 'committed' });
      expect(heard).toEqual([]);
    });

    expect(heard).toEqual([{ kind: 'database_gone', databaseId: 'committed' }]);
    connection.close();
  });
});
