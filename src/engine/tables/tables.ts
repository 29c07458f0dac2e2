import { randomUUID } from 'node:crypto';
import type { Field, Schema } from 'apache-arrow';
import type { Static } from 'typebox';
import type { CreateTableBody } from '../../contract/tables.js';
import { BadRequest, Conflict, LimitExceeded, NotFound } from '../../errors.js';
import type { FreshBudget } from '../fresh/budget.js';
import { FRESH_KINDS, FreshRows } from '../fresh/rows.js';
import type { MatrixMaker } from '../fresh/vectors.js';
import {
  builtAtCreation,
  describeIndexedSchema,
  resolveIndexes,
  storedIndexes,
  type TableIndexes,
} from '../indexes/registry.js';
import type { RowSource, RowStore, Snapshot } from '../rows/source.js';
import { KEPT_STATISTICS, MAX_KEPT_BYTES } from '../text/kept-statistics.js';
import { RowTokens, SCORED_TOKENS_BYTES } from '../text/row-tokens.js';
import { TextStatistics } from '../text/statistics.js';
import { TableUpkeep } from '../upkeep/table-upkeep.js';
import type { CatalogStore, FoldedKind, TableRecord } from './catalog.js';
import { TableChanges } from './changes.js';
import { keyIndexOf, primaryKeyOf, withPrimaryKey } from './primary-key.js';
import { type ColumnDescriptor, schemaFromFields, schemaFromIpc, schemaToIpc, storedSchema } from './schema.js';
import { Serial } from './serial.js';
import { UnindexedRows } from './unindexed.js';

/** A create_table body (the contract's type). */
export type CreateTableRequest = Static<typeof CreateTableBody>;

export interface TableDescription {
  table_name: string;
  schema: ColumnDescriptor[];
  indexes: TableIndexes;
  primary_key: string | null;
}

/** The columns with their indexes beside them, and the primary key marked (docs/api.md, `/v1/schema`). */
function describeTable(schema: Schema, indexes: TableIndexes, primaryKey: string | undefined): ColumnDescriptor[] {
  return describeIndexedSchema(schema, indexes).map((column) =>
    column.name === primaryKey ? { ...column, primary_key: true } : column,
  );
}

/**
 * A create_table body's schema, index declarations and primary key, checked: the key column made non-null and
 * given a scalar index unless one is declared on it.
 */
function declarationsOf(req: CreateTableRequest): { schema: Schema; indexes: TableIndexes; primaryKey?: string } {
  const hasSchema = req.schema !== undefined && req.schema !== null;
  const hasIpc = req.schema_ipc !== undefined && req.schema_ipc !== null;
  if (hasSchema === hasIpc) throw new BadRequest('send exactly one of schema and schema_ipc');
  let schema = hasSchema ? schemaFromFields(req.schema ?? []) : schemaFromIpc(req.schema_ipc ?? '');
  const primaryKey = req.primary_key ?? undefined;
  if (primaryKey !== undefined) {
    const declared = req.schema?.find((f) => f.name === primaryKey)?.nullable ?? undefined;
    schema = withPrimaryKey(schema, primaryKey, declared);
  }
  const indexes = resolveIndexes(schema, req.indexes);
  const keyField = schema.fields.find((f) => f.name === primaryKey);
  if (keyField !== undefined && !indexes.scalar.some((d) => d.column === keyField.name)) {
    indexes.scalar.push(keyIndexOf(keyField));
  }
  return { schema, indexes, primaryKey };
}

/**
 * How a node keeps the rows outside the indexes beside them (`FreshRows`), within the node's budget: the rows it
 * writes, as the one writer of its tables (a store no other node shares); else the rows it follows from the table.
 */
export interface FreshTier {
  soleWriter: boolean;
  /** Where others write too, whether the tier follows the table (`FreshRows.follow`). */
  follow?: boolean;
  budget?: FreshBudget;
  /** Where fresh vectors are kept and scanned; here when absent. */
  matrices?: MatrixMaker;
  /** The node's tokens of indexed rows a text leg scored; the table's own when absent. */
  scoredTokens?: RowTokens;
}

/** The answer for a table that is not there (never created, or dropped meanwhile). */
export const unknownTable = (name: string): NotFound => new NotFound(`table "${name}"`, { code: 'unknown_table' });

/**
 * An open table: its catalog entry, schemas, stored rows, the queue its writes go through, and what this worker
 * keeps of it between requests. Closed by `dispose()`, which lets go of all of it.
 */
export class TableHandle {
  readonly writes = new Serial();
  /** What each version this worker saw committed did to the rows (SQL reloads only what changed). */
  readonly changes = new TableChanges();
  /** What upkeep keeps of the table between its passes. */
  readonly upkeep = new TableUpkeep();
  /** How far its rows run ahead of its indexes (searches' receipts, backpressure, `strata_unindexed_rows`). */
  readonly unindexed: UnindexedRows;
  /** BM25's statistics of its full-text columns over the live rows, once a search needed them. */
  readonly text: TextStatistics;
  /** The rows this node wrote that its last fold did not cover, searched beside the indexes. */
  readonly fresh: FreshRows;
  /** The column whose values name one row each (docs/api.md, Primary keys), when the table has one. */
  readonly primaryKey: Field | undefined;
  /** The tokens of indexed rows a text leg scored over the live rows, by row id (`search/text-scoring.ts`). */
  readonly scoredTokens: RowTokens;
  private disposed = false;

  constructor(
    readonly record: TableRecord,
    /** The user's columns. */
    readonly schema: Schema,
    readonly indexes: TableIndexes,
    readonly rows: RowSource,
    private readonly store: Pick<RowStore, 'release' | 'snapshot' | 'aside'>,
    fresh: FreshTier = { soleWriter: false },
    /**
     * Where folds, deletes and full-text rebuilds are recorded for every node (`folded`, `UnindexedRows`), and read
     * back.
     */
    private readonly records?: Pick<CatalogStore, 'foldsOf' | 'recordFold' | 'recordTextIndex' | 'textIndexStateOf'>,
  ) {
    this.primaryKey = primaryKeyOf(record.indexes, schema);
    this.scoredTokens = fresh.scoredTokens ?? new RowTokens(SCORED_TOKENS_BYTES);
    this.unindexed = new UnindexedRows(
      rows,
      indexes,
      this.primaryKey?.name,
      (from, to) => this.changes.between(from, to),
      !fresh.soleWriter,
      records === undefined
        ? undefined
        : {
            record: (event, version) => {
              records.recordTextIndex(record.tableId, event, version).catch(() => undefined);
            },
            state: () => records.textIndexStateOf(record.tableId),
          },
    );
    // Only a node that writes its tables alone can tell upkeep's versions from the rest by their row counts.
    const explains = fresh.soleWriter;
    this.text = new TextStatistics(
      indexes.fts,
      async (from, to, explain) =>
        explain && explains ? this.changes.explained(from, to, () => rows.versions()) : this.changes.between(from, to),
      (from, to, maxRows) =>
        rows.changedTexts(
          from,
          to,
          indexes.fts.map((f) => f.column),
          maxRows,
        ),
      (version) => store.snapshot(record.tableId, version),
      (text, column) => rows.tokenize(text, column),
      store.aside(record.tableId, KEPT_STATISTICS, MAX_KEPT_BYTES),
    );
    // A following tier holds whole rows: a search's winners are read from them.
    const stored = schema.fields.map((f) => f.name);
    this.fresh = new FreshRows(
      { ...indexes, keyed: this.primaryKey !== undefined },
      fresh.soleWriter,
      (texts, column) => this.text.tokensOf(texts, column),
      fresh.budget,
      fresh.matrices,
      fresh.soleWriter || fresh.follow !== true || records === undefined
        ? undefined
        : {
            changes: (from, to, maxRows) => rows.changedRows(from, to, stored, maxRows),
            removedNone: (from, to) => rows.removedNone(from, to),
            outside: (version, maxRows) => rows.rowsOutsideIndexes(version, stored, maxRows),
            folds: () => records.foldsOf(record.tableId),
          },
    );
    // Every row the indexes of a kind cover at a version is one the fresh rows need not hold: as good as a fold.
    this.unindexed.onCovered = (version, kinds) => this.fresh.folded(version, kinds);
  }

  /**
   * Upkeep folded every row committed up to `version` into the indexes of `kinds` (all by default): the fresh rows
   * let go of those, and the fold is recorded for the nodes that follow the table (`FreshRows.follow`).
   */
  folded(version: number, kinds?: readonly FoldedKind[]): void {
    this.fresh.folded(version, kinds ?? FRESH_KINDS);
    this.records?.recordFold(this.record.tableId, kinds ?? ['text', 'vector'], version).catch(() => undefined);
  }

  /** Whether it was let go of (its table dropped, or this node let it go): a write queued on it must not start. */
  get closed(): boolean {
    return this.disposed;
  }

  /** Closes the table: the store lets go of its rows once reads still using them end. Once is enough. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.store.release(this.rows);
    this.upkeep.clear();
    this.fresh.dispose();
    this.text.close().catch(() => undefined);
  }
}

/**
 * A creation left `creating` for longer than this died half-way (its node crashed or was killed); younger, it may
 * still be running on another node. Creating the dataset and its row-key and FTS indexes takes well under a
 * second on a local folder and a few seconds on S3.
 */
const ABANDONED_CREATION_MS = 30_000;

/**
 * The tables of one database: catalog changes (one at a time; another arriving meanwhile gets 409 +
 * Retry-After), and open handles on their stored rows.
 */
export class Tables {
  private changing = false;
  /** Open tables by id, with the handle itself once it has opened (`opened`). */
  private readonly handles = new Map<string, { pending: Promise<TableHandle>; open?: TableHandle }>();

  constructor(
    private readonly store: RowStore,
    private readonly catalog: CatalogStore,
    private readonly databaseId: string,
    /** Tables this database may hold (`STRATA_MAX_TABLES_PER_DATABASE`). */
    private readonly maxTables: number,
    private readonly fresh: FreshTier = { soleWriter: false },
  ) {}

  private async exclusively<T>(what: string, change: () => Promise<T>): Promise<T> {
    if (this.changing) {
      throw new Conflict(`${what} was not applied: another catalog change of this database was in flight; retry`, {
        retryAfterS: 1,
        code: 'catalog_change_in_flight',
      });
    }
    this.changing = true;
    try {
      return await change();
    } finally {
      this.changing = false;
    }
  }

  async create(req: CreateTableRequest): Promise<TableDescription> {
    const { schema, indexes, primaryKey } = declarationsOf(req);

    return this.exclusively(`creating table "${req.table_name}"`, async () => {
      const existing = await this.catalog.findTable(this.databaseId, req.table_name);
      if (existing?.state === 'ready') {
        throw new Conflict(`table "${req.table_name}" already exists`, { code: 'table_exists' });
      }
      if (existing !== undefined) {
        // Another node may be creating it now: that one finishes, and this request is told to retry.
        if (Date.now() - existing.createdMs < ABANDONED_CREATION_MS) {
          throw new Conflict(
            `creating table "${req.table_name}" was not applied: another creation of it was in flight; retry`,
            { retryAfterS: 1, code: 'catalog_change_in_flight' },
          );
        }
        // A creation that died half-way left its name in the catalog: clear it and start afresh.
        await this.forget(existing, true);
      }
      const held = (await this.catalog.listTables(this.databaseId)).length;
      if (held >= this.maxTables) {
        throw new LimitExceeded(
          `database already holds ${held} tables, the most one database may (STRATA_MAX_TABLES_PER_DATABASE); drop one first`,
        );
      }

      const record: TableRecord = {
        databaseId: this.databaseId,
        name: req.table_name,
        tableId: `t_${randomUUID().replaceAll('-', '')}`,
        schemaIpc: schemaToIpc(schema),
        // Beside the index declarations, so that the catalog's tables need no new column for it.
        indexes: JSON.stringify(primaryKey === undefined ? indexes : { ...indexes, primary_key: primaryKey }),
        createdMs: Date.now(),
        state: 'creating',
      };
      await this.catalog.insertTable(record);
      try {
        await this.store.create(record.tableId, storedSchema(schema), builtAtCreation(indexes));
        await this.catalog.setTableState(record.tableId, 'ready');
      } catch (err) {
        await this.forget(record, true).catch(() => undefined);
        throw err;
      }
      return {
        table_name: record.name,
        schema: describeTable(schema, indexes, primaryKey),
        indexes,
        primary_key: primaryKey ?? null,
      };
    });
  }

  /**
   * Drops a table: it leaves the catalog, `leaving` is told (this node's upkeep starts nothing more on it), then
   * with `purge` its files go.
   */
  async drop(
    name: string,
    purge: boolean,
    leaving: (tableId: string) => void = () => undefined,
  ): Promise<{ table_name: string; purged: boolean; location: string }> {
    const record = await this.catalog.findTable(this.databaseId, name);
    if (record === undefined) throw unknownTable(name);
    return this.exclusively(`dropping table "${name}"`, async () => {
      const open = this.handles.get(record.tableId)?.pending;
      // Writes already queued on the table finish first; none can start after it left the catalog.
      if (open !== undefined) await (await open.catch(() => undefined))?.writes.run(async () => undefined);
      // Another node may have dropped it since it was found: only the drop that removed the entry answers 200.
      if (!(await this.forget(record, purge, leaving))) throw unknownTable(name);
      return { table_name: name, purged: purge, location: this.store.locationOf(record.tableId) };
    });
  }

  /**
   * Removes a table from the catalog (first, so the name is free at once) and, with `purge`, its files. False when
   * another node removed the entry first: that node's drop deletes the files, if asked to.
   */
  private async forget(
    record: TableRecord,
    purge: boolean,
    leaving: (tableId: string) => void = () => undefined,
  ): Promise<boolean> {
    const removed = await this.catalog.deleteTable(record.tableId);
    if (removed) leaving(record.tableId);
    const open = await this.handles.get(record.tableId)?.pending.catch(() => undefined);
    this.handles.delete(record.tableId);
    this.store.forget(record.tableId);
    open?.dispose();
    // A write that started before the table left the catalog writes into its folder until it ends; those queued
    // behind it refuse now that the handle is closed. Deleting the files under it failed the drop with a 500. So
    // does a write of its statistics, which would be left behind.
    await open?.writes.run(async () => undefined);
    await open?.text.close();
    if (purge && removed) await this.store.drop(record.tableId);
    return removed;
  }

  /** What `/v1/schema` answers: the columns with their indexes beside them, and the Arrow schema. */
  async describe(name: string): Promise<TableDescription & { arrowSchema: Schema }> {
    const handle = await this.get(name);
    const primaryKey = handle.primaryKey?.name;
    return {
      table_name: name,
      schema: describeTable(handle.schema, handle.indexes, primaryKey),
      indexes: handle.indexes,
      primary_key: primaryKey ?? null,
      arrowSchema: handle.schema,
    };
  }

  async list(): Promise<{ table_name: string; num_rows: number; last_upkeep_ms: number | null }[]> {
    const records = await this.ready();
    return Promise.all(
      records.map(async (record) => ({
        table_name: record.name,
        num_rows: await (await this.open(record)).rows.count(),
        last_upkeep_ms: record.upkeepMs ?? null,
      })),
    );
  }

  /** The catalog entries of the database's finished tables. */
  async ready(): Promise<TableRecord[]> {
    return (await this.catalog.listTables(this.databaseId)).filter((r) => r.state === 'ready');
  }

  /** The open table of a catalog entry. */
  handleOf(record: TableRecord): Promise<TableHandle> {
    return this.open(record);
  }

  /** A handle of its own on one version of a table, for reads that must see exactly that version; close it after. */
  snapshot(record: TableRecord, version: number): Promise<Snapshot> {
    return this.store.snapshot(record.tableId, version);
  }

  /** The open table of that name; 404 when the catalog has no finished table of that name. */
  async get(name: string): Promise<TableHandle> {
    const record = await this.catalog.findTable(this.databaseId, name);
    if (record === undefined || record.state !== 'ready') throw unknownTable(name);
    return this.open(record);
  }

  private open(record: TableRecord): Promise<TableHandle> {
    let entry = this.handles.get(record.tableId);
    if (entry === undefined) {
      const pending = (async () => {
        const indexes = storedIndexes(record.indexes);
        const rows = await this.store.open(record.tableId, indexes);
        const schema = schemaFromIpc(record.schemaIpc);
        return new TableHandle(record, schema, indexes, rows, this.store, this.fresh, this.catalog);
      })();
      const opening: { pending: Promise<TableHandle>; open?: TableHandle } = { pending };
      pending.then(
        (handle) => (opening.open = handle),
        () => this.handles.delete(record.tableId),
      );
      this.handles.set(record.tableId, opening);
      entry = opening;
    }
    return entry.pending;
  }

  /** The tables opened so far, some perhaps still opening (upkeep looks after these). */
  openHandles(): Promise<TableHandle>[] {
    return [...this.handles.values()].map((entry) => entry.pending);
  }

  /** The tables open now, those still opening left out. */
  opened(): TableHandle[] {
    return [...this.handles.values()].flatMap((entry) => entry.open ?? []);
  }

  async close(): Promise<void> {
    const all = [...this.handles.values()];
    this.handles.clear();
    for (const { pending } of all) (await pending.catch(() => undefined))?.dispose();
  }
}
