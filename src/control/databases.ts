import { randomUUID } from 'node:crypto';
import type { Static } from 'typebox';
import type { DatabaseSummary as DatabaseSummaryBody, RegisterDatabaseBody } from '../contract/databases.js';
import { Conflict, NotFound, Unavailable, Unprocessable } from '../errors.js';
import { bindingFrom } from '../storage/binding.js';
import { asidePrefix, TABLES_PREFIX } from '../storage/lance.js';
import type { ObjectStore } from '../storage/objects.js';
import { openObjects, type StorageEnv } from '../storage/open.js';
import { type VerifyCheckResult, verifyObjects } from '../storage/verify.js';
import { type DatabaseLifecycle, DRAIN_MS, type ListedDatabase } from './lifecycle.js';
import { type ControlStore, type DatabaseRecord, isBeingDeleted } from './store.js';

/** The folder of a dataset the database created, relative to the binding prefix: all that purge deletes. */
const datasetPrefix = (tableId: string): string => `${TABLES_PREFIX}/${tableId}.lance/`;

/**
 * What a purge waits, from recording the deletion, before it deletes objects when other nodes share the store:
 * each of them drains its calls for up to `DRAIN_MS` once the deletion's notice reaches it, and a write that
 * reserved its row keys before the deletion was recorded may still be committing. Objects deleted sooner could
 * be written again under the purge (a folder left half deleted, a write acknowledged into it).
 */
const SETTLE_MS = DRAIN_MS + 2_000;

/**
 * How long a purge waits at most, past `SETTLE_MS`, for other nodes' upkeep on its tables to end: a pass under
 * way (an index build, a compaction) writes to the dataset until it ends, and renews its lease until then (the
 * deletion stops only new passes). A pass that outlasts the wait fails the purge, which the next DELETE resumes.
 */
const UPKEEP_WAIT_MS = 120_000;

/** Tries at deleting a dataset's objects before the purge gives up (and the next DELETE resumes it). */
const PURGE_TRIES = 3;

const listed = (db: DatabaseRecord): db is ListedDatabase => !isBeingDeleted(db.state);

const beingDeletedNamed = (name: string): Unavailable =>
  new Unavailable(`database "${name}" is being deleted`, { retryAfterS: 1, code: 'database_deleting' });

export type DatabaseSummary = Static<typeof DatabaseSummaryBody>;

export const summary = (db: ListedDatabase, externalId: string): DatabaseSummary => ({
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
    private readonly lifecycle: DatabaseLifecycle,
    private readonly maxPerAccount: number,
  ) {}

  /** The external id the account's role trust policies name (docs/api.md). */
  async externalId(accountId: string): Promise<string> {
    const account = await this.store.findAccount(accountId);
    if (account === undefined) throw new NotFound('account', { code: 'unknown_account' });
    return account.externalId;
  }

  /** Registers a database; answers it with the account's external id, which its binding was made with. */
  async register(accountId: string, body: RegisterDatabaseBody): Promise<{ db: ListedDatabase; externalId: string }> {
    const externalId = await this.externalId(accountId);
    const binding = await bindingFrom(body.storage, this.storage.policy, externalId);
    const db: ListedDatabase = {
      id: `db_${randomUUID()}`,
      accountId,
      name: body.name,
      createdMs: Date.now(),
      state: 'unverified',
      binding,
      lastError: null,
    };
    await this.lifecycle.registered(db, this.maxPerAccount);
    return { db, externalId };
  }

  /** The account's databases, but those whose deletion began: they answer 503 until they are gone. */
  async list(accountId: string): Promise<ListedDatabase[]> {
    return (await this.store.listDatabases(accountId)).filter(listed);
  }

  /** The account's database of that name; another account's is exactly as absent as a missing one. */
  async get(accountId: string, name: string): Promise<DatabaseRecord> {
    const db = await this.store.findDatabase(accountId, name);
    if (db === undefined) throw new NotFound(`database "${name}"`, { code: 'unknown_database' });
    return db;
  }

  async verify(accountId: string, name: string): Promise<{ db: ListedDatabase; checks: VerifyCheckResult[] }> {
    const db = await this.get(accountId, name);
    if (!listed(db)) throw beingDeletedNamed(name);
    // Claimed in the control store: one verification at a time on every node.
    if (!(await this.store.claimVerification(db.id, VERIFY_CLAIM_MS))) {
      throw new Conflict(`a verification of database "${name}" is already running`, { code: 'verification_running' });
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
        await this.lifecycle.verificationFailed(db, error);
        throw new Unprocessable(error, {
          code: 'verification_failed',
          details: {
            name,
            state: 'verify_failed',
            step: outcome.step,
            provider_code: outcome.code,
            checks: outcome.checks,
          },
        });
      }
      return { db: await this.lifecycle.verified(db), checks: outcome.checks };
    } finally {
      await this.store.releaseVerification(db.id).catch(() => undefined);
    }
  }

  /**
   * Deletes a database: first records that its deletion began (from then every node refuses its calls and its
   * writes, and lets its worker go), then, for a purge, waits until no node can still be writing and deletes its
   * datasets, then deletes its record. A deletion that fails part-way leaves the database refused (503
   * `database_deleting`) until a DELETE resumes it; a purge once begun is always finished as a purge.
   */
  async delete(accountId: string, name: string, purge: boolean): Promise<{ name: string; purged: boolean }> {
    const db = await this.get(accountId, name);
    // The bucket is reached before the deletion is recorded: one that cannot be (or a binding no longer allowed)
    // refuses the purge with the database as it was, still serving, rather than leave it refused.
    const objects = purge || db.state === 'purging' ? await this.reachable(db) : undefined;
    const marked = Date.now();
    const begun = await this.lifecycle.deletionBegun(db, purge);
    if (begun === undefined) throw new NotFound(`database "${name}"`, { code: 'unknown_database' });
    const purging = begun.state === 'purging';
    const settled = purging && this.store.shared ? pause(marked + SETTLE_MS - Date.now()) : Promise.resolve();
    const [end] = await Promise.all([begun.end, settled]);
    let deleted = false;
    try {
      if (purging) {
        if (!(await this.upkeepEnded(db))) {
          throw new Unavailable(
            `database "${db.name}" is being deleted; upkeep of its tables is still under way, so its objects are ` +
              'not deleted yet. Send the DELETE again to finish the purge',
            { retryAfterS: Math.ceil(UPKEEP_WAIT_MS / 1000), code: 'database_deleting' },
          );
        }
        await this.purge(db, objects ?? (await this.objects(db)));
      }
      await this.lifecycle.deleted(db);
      deleted = true;
    } finally {
      end(deleted);
    }
    return { name: db.name, purged: purging };
  }

  /** Whether no node's upkeep holds a lease on the database's tables, waiting up to `UPKEEP_WAIT_MS` for it. */
  private async upkeepEnded(db: DatabaseRecord): Promise<boolean> {
    for (const until = Date.now() + UPKEEP_WAIT_MS; Date.now() < until; ) {
      if ((await this.store.upkeepLeasesHeld(db.id)) === 0) return true;
      await pause(200);
    }
    return (await this.store.upkeepLeasesHeld(db.id)) === 0;
  }

  /** The database's objects, once a first dataset of it could be listed. */
  private async reachable(db: DatabaseRecord): Promise<ObjectStore> {
    const objects = await this.objects(db);
    const [first] = await this.store.writtenTables(db.id);
    if (first !== undefined) await objects.list(datasetPrefix(first));
    return objects;
  }

  /** Deletes the datasets the database created: never a listing of the prefix, which may hold anything. */
  private async purge(db: DatabaseRecord, objects: ObjectStore): Promise<void> {
    for (const tableId of await this.store.writtenTables(db.id)) {
      for (let attempt = 1; ; attempt++) {
        try {
          await objects.deletePrefix(datasetPrefix(tableId));
          await objects.deletePrefix(asidePrefix(tableId));
          break;
        } catch (err) {
          // A folder another process was still closing can refuse its removal once (ENOTEMPTY); what fails
          // again is left to the next DELETE, with the database still refused meanwhile.
          if (attempt >= PURGE_TRIES) throw err;
          await pause(100 * attempt);
        }
      }
    }
  }

  private objects(db: DatabaseRecord): Promise<ObjectStore> {
    return openObjects(db.binding, this.storage, `strata-${db.id}`.slice(0, 64));
  }
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
