import type { Db, Queryable } from '../dialect/db.js';
import { sql } from '../dialect/sql.js';
import { type KeyRow, keyFromRow } from '../records.js';
import type { ApiKeyListing, ApiKeyRecord } from '../store.js';

/** Key of the lock under which nodes starting together on an empty store look for a first key one at a time. */
const BOOTSTRAP_LOCK = 0x5354_5243;

const insert = (db: Queryable, key: ApiKeyRecord) =>
  db.run(
    sql`INSERT INTO api_keys (id, account_id, hash, created_ms, revoked_ms)
          VALUES (${key.id}, ${key.accountId}, ${key.hash}, ${key.createdMs}, ${key.revokedMs})`,
  );

export const keys = (db: Db) => ({
  insert: async (key: ApiKeyRecord): Promise<void> => {
    await insert(db, key);
  },

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const row = await db.get<KeyRow>(sql`SELECT * FROM api_keys WHERE hash = ${hash}`);
    return row === undefined ? undefined : keyFromRow(row);
  },

  async list(): Promise<ApiKeyListing[]> {
    const rows = await db.all<KeyRow & { account_name: string }>(
      sql`SELECT k.*, a.name AS account_name FROM api_keys k JOIN accounts a ON a.id = k.account_id
            ORDER BY k.created_ms, k.id`,
    );
    return rows.map((row) => ({ ...keyFromRow(row), accountName: row.account_name }));
  },

  /** True when a live key was revoked now; every node hears of it when the revocation commits. */
  revoke: (id: string, nowMs: number): Promise<boolean> =>
    db.transaction(async (tx) => {
      const revoked = await tx.all<{ hash: string }>(
        sql`UPDATE api_keys SET revoked_ms = ${nowMs} WHERE id = ${id} AND revoked_ms IS NULL RETURNING hash`,
      );
      for (const { hash } of revoked) await tx.notify({ kind: 'key_revoked', hash });
      return revoked.length === 1;
    }),

  async count(): Promise<number> {
    const row = await db.get<{ n: number | string }>(sql`SELECT count(*) AS n FROM api_keys`);
    return Number(row?.n ?? 0);
  },

  /** Stores the key only while the store holds none: nodes starting together find no key one after another. */
  insertFirst: (key: ApiKeyRecord): Promise<boolean> =>
    db.transaction(async (tx) => {
      await tx.lock(BOOTSTRAP_LOCK);
      if ((await tx.get(sql`SELECT 1 AS one FROM api_keys LIMIT 1`)) !== undefined) return false;
      await insert(tx, key);
      return true;
    }),
});
