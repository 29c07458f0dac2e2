import { randomBytes, randomUUID } from 'node:crypto';
import type { Db } from '../dialect/db.js';
import { sql } from '../dialect/sql.js';
import type { Account } from '../store.js';

const newExternalId = (): string => `ext_${randomBytes(16).toString('hex')}`;

const SELECT_ACCOUNT = sql`SELECT id, name, external_id AS "externalId" FROM accounts`;

export const accounts = (db: Db) => ({
  /** The account of that name, created when missing; of accounts created at once on several nodes, one is kept. */
  async ensure(name: string): Promise<Account> {
    await db.run(
      sql`INSERT INTO accounts (id, name, created_ms, external_id)
            VALUES (${`acct_${randomUUID()}`}, ${name}, ${Date.now()}, ${newExternalId()})
            ON CONFLICT (name) DO NOTHING`,
    );
    const account = await db.get<Account>(sql`${SELECT_ACCOUNT} WHERE name = ${name}`);
    if (account === undefined) throw new Error(`account "${name}" vanished as it was created`);
    return account;
  },

  find: (id: string): Promise<Account | undefined> => db.get<Account>(sql`${SELECT_ACCOUNT} WHERE id = ${id}`),
});
