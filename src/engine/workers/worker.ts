import type { Schema } from 'apache-arrow';
import { StrataError, Throttled } from '../../errors.js';
import { SqlDatabase, type SqlLimits, type SqlResult } from '../../sql/database.js';
import type { InstanceOptions } from '../../sql/lockdown.js';
import type { Binding } from '../../storage/binding.js';
import { lanceLocation } from '../../storage/lance.js';
import type { StorageEnv } from '../../storage/open.js';
import type { FreshBudget } from '../fresh/budget.js';
import type { VectorScanThread } from '../fresh/vector-scans.js';
import { LanceStore, storageFailure, type UpkeepProcess } from '../lance/index.js';
import type { EngineLog } from '../log.js';
import { hybridSearch } from '../search/hybrid.js';
import { countMatches, exactMatch, tokenMatch } from '../search/match.js';
import type { ExactRequest, HybridRequest, MatchRequest, Receipt, RowsResult } from '../search/request.js';
import { TablesSqlSource } from '../sql-source.js';
import type { CatalogStore } from '../tables/catalog.js';
import {
  type CreateTableRequest,
  type TableDescription,
  type TableHandle,
  Tables,
  unknownTable,
} from '../tables/tables.js';
import type { RowTokens } from '../text/row-tokens.js';
import { Upkeep, type UpkeepLeases, type UpkeepObserver, type UpkeepOptions } from '../upkeep/upkeep.js';
import type { WriteCommand, WriteOptions, WriteOutcome } from '../writes/command.js';
import { findCommit, type VersionReader } from '../writes/intent.js';
import type { JsonThread } from '../writes/json-rows.js';
import { batchesFromArrow, type ParsedRows, type RowsBody } from '../writes/rows.js';
import type { WritePath, WriteTarget } from '../writes/service.js';
import { append, remove, replace, upsert } from '../writes/writes.js';

/** What a worker needs to know about the database it serves. */
export interface DatabaseRef {
  id: string;
  /** The owning account: one account's databases may hold only a share of the node's workers. */
  accountId: string;
  name: string;
  binding: Binding;
}

/** What every worker shares: the catalog and how to reach buckets. */
export interface WorkerDeps {
  catalog: CatalogStore;
  storage: StorageEnv;
  upkeep: UpkeepOptions;
  upkeepObserver: UpkeepObserver;
  /** Whose turn it is to look after each table, across the nodes sharing the control store. */
  upkeepLeases: UpkeepLeases;
  sql: InstanceOptions & SqlLimits;
  log: EngineLog;
  /** Tables one database may hold. */
  maxTables: number;
  /** Bytes a row reply may take (`STRATA_MAX_RESULT_BYTES`). */
  maxResultBytes: number;
  /** Rows a table's indexes may miss before writes that add rows are refused (`STRATA_MAX_UNINDEXED_ROWS`). */
  maxUnindexedRows: number;
  /** How writes run under idempotency keys. */
  writes: WritePath;
  /** The memory the tables' fresh rows may take on this node (`STRATA_FRESH_TIER_MB`). */
  freshBudget: FreshBudget;
  /** Where nodes share a store, whether the fresh tier follows the tables (`STRATA_FRESH_FOLLOW`). */
  freshFollow: boolean;
  /** The tokens of indexed rows text legs scored, shared by the node's tables. */
  scoredTokens: RowTokens;
}

/** What the workers of a node share beyond `WorkerDeps`: where heavy work runs off the event loop. */
interface NodeShared {
  upkeepProcess: UpkeepProcess;
  json: JsonThread;
  vectorScans: VectorScanThread;
}

/** The wait a write refused as `index_behind` is asked for: a fold of a capped tail takes seconds. */
const BEHIND_RETRY_S = 2;
/** The same while upkeep is paused on the node, when nothing will fold until it runs again. */
const PAUSED_RETRY_S = 30;

/** Credentials this close to expiry make the worker reconnect before its next request. */
const RENEW_BEFORE_MS = 5 * 60_000;

/**
 * The per-database worker, placed once verification has passed. It owns the database's engines: the Lance
 * connection and table handles, its DuckDB, and its index upkeep.
 */
export class DatabaseWorker {
  private inFlight = 0;
  private lastUsedMs = Date.now();
  /** The database's DuckDB, opened on its first SQL query. */
  private sqlEngine: Promise<SqlDatabase> | undefined;

  private constructor(
    readonly ref: DatabaseRef,
    readonly catalog: CatalogStore,
    readonly tables: Tables,
    readonly upkeep: Upkeep,
    private readonly sqlOptions: InstanceOptions & SqlLimits,
    private readonly expiresAtMs: number | undefined,
    private readonly json: JsonThread,
    private readonly limits: Pick<WorkerDeps, 'maxResultBytes' | 'maxUnindexedRows'>,
    private readonly writes: WritePath,
  ) {}

  static async open(ref: DatabaseRef, deps: WorkerDeps, node: NodeShared): Promise<DatabaseWorker> {
    const location = await lanceLocation(ref.binding, deps.storage, `strata-${ref.id}`.slice(0, 64));
    const store = await LanceStore.open(location, node.upkeepProcess, deps.log);
    const tables = new Tables(store, deps.catalog, ref.id, deps.maxTables, {
      soleWriter: !deps.upkeep.othersWrite,
      budget: deps.freshBudget,
      scoredTokens: deps.scoredTokens,
      follow: deps.freshFollow,
      matrices: (dim, kind, lost) => node.vectorScans.matrix(dim, kind, lost),
    });
    const upkeep = new Upkeep(tables, deps.upkeep, deps.log, deps.upkeepObserver, deps.upkeepLeases);
    upkeep.start();
    return new DatabaseWorker(
      ref,
      deps.catalog,
      tables,
      upkeep,
      deps.sql,
      location.expiresAtMs,
      node.json,
      deps,
      deps.writes,
    );
  }

  createTable(req: CreateTableRequest): Promise<TableDescription> {
    return this.tables.create(req);
  }

  dropTable(name: string, purge: boolean): Promise<{ table_name: string; purged: boolean; location: string }> {
    return this.tables.drop(name, purge, (tableId) => this.upkeep.leave(tableId));
  }

  describeTable(name: string): Promise<TableDescription & { arrowSchema: Schema }> {
    return this.tables.describe(name);
  }

  listTables(): Promise<{ table_name: string; num_rows: number; last_upkeep_ms: number | null }[]> {
    return this.tables.list();
  }

  /**
   * Runs a write (docs/api.md, Writes), under its idempotency key if it has one: the one entry point of every
   * append, update and delete, which says whether it wrote or repeated an earlier request's answer.
   */
  write(command: WriteCommand, options: WriteOptions): Promise<WriteOutcome> {
    return this.onTable(command.table, (handle) =>
      this.writes.write(this.ref.id, command, options, this.targetOf(handle, command)),
    );
  }

  /** The worker's side of one write on one table: running it, finding it after a crash, its rows as stored. */
  private targetOf(handle: TableHandle, command: WriteCommand): WriteTarget {
    const body = command.kind === 'delete' ? undefined : command.rows;
    // The body is parsed once, whichever of run, recover and stored asks first.
    let parsed: Promise<ParsedRows> | undefined;
    const rows = (b: RowsBody) => {
      parsed ??= this.rowsOf(handle, b);
      return parsed;
    };
    return {
      run: async (hooks) => {
        const batches = body === undefined ? undefined : await rows(body);
        if ((await hooks?.beforeWrite(handle.record.tableId, batches?.batches)) === 'stop') return undefined;
        // After the key is claimed, so that a repeat of a write that landed is answered as such; a refusal lets
        // the key go again, as any failure before the commit does.
        if (batches?.batches.some((b) => b.numRows > 0)) await this.admit(handle);
        const beforeCommit = hooks?.beforeCommit;
        switch (command.kind) {
          case 'append':
            return this.adding(handle, append(this.catalog, handle, batches as ParsedRows, beforeCommit));
          case 'update':
            return this.adding(
              handle,
              replace(this.catalog, handle, command.predicate, batches as ParsedRows, beforeCommit),
            );
          case 'upsert':
            return this.adding(handle, upsert(this.catalog, handle, batches as ParsedRows, beforeCommit));
          case 'delete':
            return remove(this.catalog, handle, command.predicate, beforeCommit);
        }
      },
      recover: async (intent) => {
        if (handle.record.tableId !== intent.tableId) return undefined;
        const batches = body === undefined ? [] : (await rows(body)).batches;
        const reader = this.versionReader(handle);
        try {
          return await findCommit(handle, intent, batches, reader);
        } finally {
          reader.close();
        }
      },
      stored: async () => {
        const { batches, stream } = await rows(body as RowsBody);
        return { rows: batches, stream, schema: handle.schema };
      },
    };
  }

  /**
   * Refuses a write that adds rows to a table whose indexes already miss `maxUnindexedRows` at its latest version
   * (docs/api.md, Backpressure): every search would scan them outside the indexes. Upkeep is asked to fold them at
   * once.
   */
  private async admit(handle: TableHandle): Promise<void> {
    const { behind } = await handle.unindexed.at(await handle.rows.version());
    const cap = this.limits.maxUnindexedRows;
    if (behind < cap) return;
    this.upkeep.nudge('fold');
    const paused = this.upkeep.paused;
    throw new Throttled(
      `table "${handle.record.name}" has ${behind} rows its indexes do not cover yet, at or past STRATA_MAX_UNINDEXED_ROWS (${cap}); ${paused ? 'upkeep is paused on this node (STRATA_UPKEEP_PAUSED), so they stay so until it runs again' : 'upkeep is folding them in'}: retry after Retry-After`,
      { retryAfterS: paused ? PAUSED_RETRY_S : BEHIND_RETRY_S, code: 'index_behind' },
    );
  }

  /** A write that adds rows: once it committed, upkeep starts folding if it left the table's tail at a quarter of the cap or more. */
  private async adding<T>(handle: TableHandle, write: Promise<T>): Promise<T> {
    const written = await write;
    if ((handle.unindexed.last?.behind ?? 0) * 4 >= this.limits.maxUnindexedRows) this.upkeep.nudge('fold');
    return written;
  }

  /** A body's rows as the table's columns (JSON converted off the event loop: `JsonThread`). */
  private rowsOf(handle: TableHandle, body: RowsBody): Promise<ParsedRows> {
    if (body.kind === 'json') return this.json.parse(handle.schema, handle.record.schemaIpc, body.bytes);
    return Promise.resolve(batchesFromArrow(handle.schema, body.bytes));
  }

  /** One handle of its own, checked out at each version asked for: the shared handle always reads the latest. */
  private versionReader(handle: TableHandle): VersionReader {
    return handle.rows.history();
  }

  search(table: string, req: HybridRequest): Promise<RowsResult> {
    return this.onTable(table, (handle) => hybridSearch(handle, req));
  }

  count(table: string, req: MatchRequest): Promise<{ count: number; receipt: Receipt }> {
    return this.onTable(table, (handle) => countMatches(handle, req));
  }

  tokenMatch(table: string, req: MatchRequest): Promise<RowsResult> {
    return this.onTable(table, (handle) => tokenMatch(handle, req, this.limits.maxResultBytes));
  }

  exactMatch(table: string, req: ExactRequest): Promise<RowsResult> {
    return this.onTable(table, (handle) => exactMatch(handle, req, this.limits.maxResultBytes));
  }

  /**
   * Runs `work` on the named table. A table dropped while the work ran (its handle closed under it) is
   * answered as the drop would be answered a moment later: 404, not an engine error.
   */
  private async onTable<T>(name: string, work: (handle: TableHandle) => Promise<T>): Promise<T> {
    const handle = await this.tables.get(name).catch((err: unknown) => {
      throw storageFailure(err) ?? err;
    });
    try {
      return await work(handle);
    } catch (err) {
      if (err instanceof StrataError) throw err;
      const now = await this.catalog.findTable(this.ref.id, name);
      if (now?.tableId !== handle.record.tableId) throw unknownTable(name);
      throw storageFailure(err) ?? err;
    }
  }

  /** Runs one read-only SQL statement over the database's tables, each at its latest version. */
  async querySql(sql: string): Promise<SqlResult> {
    if (this.sqlEngine === undefined) {
      const opening = SqlDatabase.open(new TablesSqlSource(this.tables), this.sqlOptions);
      opening.catch(() => (this.sqlEngine = undefined));
      this.sqlEngine = opening;
    }
    try {
      return await (await this.sqlEngine).query(sql, this.sqlOptions);
    } catch (err) {
      throw (err instanceof StrataError ? undefined : storageFailure(err)) ?? err;
    }
  }

  /** True when its bucket credentials are about to expire. */
  get stale(): boolean {
    return this.expiresAtMs !== undefined && this.expiresAtMs - Date.now() < RENEW_BEFORE_MS;
  }

  get busy(): boolean {
    return this.inFlight > 0;
  }

  get idleSinceMs(): number {
    return this.lastUsedMs;
  }

  /** Marks the worker in use until the returned function is called (once). */
  enter(): () => void {
    this.inFlight++;
    this.lastUsedMs = Date.now();
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.inFlight--;
      this.lastUsedMs = Date.now();
    };
  }

  async close(): Promise<void> {
    await this.upkeep.stop();
    await (await this.sqlEngine?.catch(() => undefined))?.close();
    await this.tables.close();
  }
}

/** A worker held for one call; `release` lets it go (once). */
export interface Lease {
  worker: DatabaseWorker;
  release(): void;
}
