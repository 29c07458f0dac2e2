import { randomUUID } from 'node:crypto';
import type { Static } from 'typebox';
import type { DatabaseSummary as DatabaseSummaryBody, RegisterDatabaseBody } from '../contract/databases.js';
import { Conflict, NotFound, Unprocessable } from '../errors.js';
import { bindingFrom } from '../storage/binding.js';
import { TABLES_PREFIX } from '../storage/lance.js';
import type { ObjectStore } from '../storage/objects.js';
import { openObjects, type StorageEnv } from '../storage/open.js';
import { type VerifyCheckResult, verifyObjects } from '../storage/verify.js';
import type { ControlStore, DatabaseRecord } from './store.js';

/** The folder of a dataset the database created, relative to the binding prefix: all that purge deletes. */
const datasetPrefix = (tableId: string): string => `${TABLES_PREFIX}/${tableId}.lance/`;

/** What the databases service asks of whoever runs the workers. */
export interface WorkerPlacement {
  activate(db: DatabaseRecord): void;
  release(id: string): Promise<void>;
  /** Takes the database out of service before it is deleted; `end` says whether it was. */
  retire(id: string, drainMs: number): Promise<(deleted: boolean) => void>;
}

/** How long calls on a database being deleted get to finish before its worker closes under them. */
const DRAIN_MS = 10_000;

export type DatabaseSummary = Static<typeof DatabaseSummaryBody>;

export const summary = (db: DatabaseRecord, externalId: string): DatabaseSummary => ({
  name: db.name,
  created_ms: db.createdMs,
  state: db.state,
  external_id: externalId,
});

/**
 * How long a verification's claim holds at most: a node that died verifying blocks the next verification no
 * longer than this. A verification's three checks take seconds even against a slow bucket.
 */
const VERIFY_CLAIM_MS = 120_000;

/** Registration, listing, verification and deletion of an account's databases (docs/api.md). */
export class Databases {
  constructor(
    private readonly store: ControlStore,
    private readonly storage: StorageEnv,
    private readonly workers: WorkerPlacement,
    private readonly maxPerAccount: number,
  ) {}

  /** The external id the account's role trust policies name (docs/api.md). */
  async externalId(accountId: string): Promise<string> {
    const account = await this.store.findAccount(accountId);
    if (account === undefined) throw new NotFound('account', 'unknown_account');
    return account.externalId;
  }

  /** Registers a database; answers it with the account's external id, which its binding was made with. */
  async register(accountId: string, body: RegisterDatabaseBody): Promise<{ db: DatabaseRecord; externalId: string }> {
    const externalId = await this.externalId(accountId);
    const binding = await bindingFrom(body.storage, this.storage.policy, externalId);
    const db: DatabaseRecord = {
      id: `db_${randomUUID()}`,
      accountId,
      name: body.name,
      createdMs: Date.now(),
      state: 'unverified',
      binding,
      lastError: null,
    };
    await this.store.insertDatabase(db, this.maxPerAccount);
    return { db, externalId };
  }

  async list(accountId: string): Promise<DatabaseRecord[]> {
    return this.store.listDatabases(accountId);
  }

  /** The account's database of that name; another account's is exactly as absent as a missing one. */
  async get(accountId: string, name: string): Promise<DatabaseRecord> {
    const db = await this.store.findDatabase(accountId, name);
    if (db === undefined) throw new NotFound(`database "${name}"`, 'unknown_database');
    return db;
  }

  async verify(accountId: string, name: string): Promise<{ db: DatabaseRecord; checks: VerifyCheckResult[] }> {
    const db = await this.get(accountId, name);
    // Claimed in the control store: one verification at a time on every node.
    if (!(await this.store.claimVerification(db.id, VERIFY_CLAIM_MS))) {
      throw new Conflict(`a verification of database "${name}" is already running`, undefined, 'verification_running');
    }
    try {
      const outcome = await this.objects(db).then(verifyObjects, (err: unknown) => {
        // The endpoint may resolve elsewhere now than at registration, or the server identity be switched off
        // since: either fails the first step.
        if (!(err instanceof Unprocessable)) throw err;
        const checks = [{ step: 'credentials' as const, ok: false, ms: 0, note: err.message }];
        return {
          ok: false as const,
          checks,
          step: 'credentials' as const,
          code: 'BindingRefused',
          message: err.message,
        };
      });
      if (!outcome.ok) {
        const error = `storage verification failed at ${outcome.step}: ${outcome.code}: ${outcome.message}`;
        await this.store.setDatabaseState(db.id, 'verify_failed', error);
        await this.workers.release(db.id);
        throw new Unprocessable(error, 'verification_failed', {
          name,
          state: 'verify_failed',
          step: outcome.step,
          provider_code: outcome.code,
          checks: outcome.checks,
        });
      }
      // A database that already runs keeps its worker; any other one waits for placement.
      const state = db.state === 'active' ? 'active' : 'activating';
      await this.store.setDatabaseState(db.id, state, null);
      const verified = { ...db, state, lastError: null } satisfies DatabaseRecord;
      if (state === 'activating') this.workers.activate(verified);
      return { db: verified, checks: outcome.checks };
    } finally {
      await this.store.releaseVerification(db.id).catch(() => undefined);
    }
  }

  async delete(accountId: string, name: string, purge: boolean): Promise<{ name: string; purged: boolean }> {
    const db = await this.get(accountId, name);
    const end = await this.workers.retire(db.id, DRAIN_MS);
    let deleted = false;
    try {
      if (purge) {
        // Only the datasets this database created: never a listing of the prefix, which may hold anything.
        const objects = await this.objects(db);
        for (const tableId of await this.store.writtenTables(db.id)) {
          await objects.deletePrefix(datasetPrefix(tableId));
        }
      }
      await this.store.deleteDatabase(db.id);
      deleted = true;
    } finally {
      end(deleted);
    }
    return { name: db.name, purged: purge };
  }

  private objects(db: DatabaseRecord): Promise<ObjectStore> {
    return openObjects(db.binding, this.storage, `strata-${db.id}`.slice(0, 64));
  }
}
