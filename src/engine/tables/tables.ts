import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { Schema } from 'apache-arrow';
import type { Static } from 'typebox';
import type { CreateTableBody } from '../../contract/tables.js';
import { BadRequest, Conflict, LimitExceeded, NotFound } from '../../errors.js';
import { DurableFolder } from '../../storage/durable.js';
import { setAsideInterruptedCommits } from '../../storage/interrupted.js';
import type { LanceLocation } from '../../storage/lance.js';
import { annColumns, ftsIndex, warmIndexes } from '../indexes.js';
import { type Connection, Index, isMissingDataset, type LanceTable } from '../lance.js';
import type { EngineLog } from '../log.js';
import { RowKeys } from '../writes/row-keys.js';
import type { CatalogStore, TableRecord } from './catalog.js';
import { TableChanges } from './changes.js';
import {
  type ColumnDescriptor,
  describeIndexedSchema,
  ROW_KEY,
  resolveIndexes,
  schemaFromFields,
  schemaFromIpc,
  schemaToIpc,
  storedSchema,
  type TableIndexes,
} from './schema.js';
import { Serial } from './serial.js';

/** A create_table body (the contract's type). */
/** Tries at deleting a dropped table's dataset before the drop fails. */
const DELETE_TRIES = 3;

export type CreateTableRequest = Static<typeof CreateTableBody>;

export interface TableDescription {
  table_name: string;
  schema: ColumnDescriptor[];
  indexes: TableIndexes;
}

/** An open table: its catalog entry, schemas, Lance handle, and the queue its writes go through. */
export interface TableHandle {
  record: TableRecord;
  /** The user's columns. */
  schema: Schema;
  indexes: TableIndexes;
  lance: LanceTable;
  writes: Serial;
  /** Vector columns whose ANN index exists: their searches set nprobes and refine. */
  ann: Set<string>;
  /** When `ann` was last read from the dataset, while some vector column has none (another node may build it). */
  annCheckedMs: number;
  /** What each version this worker saw committed did to the rows (SQL reloads only what changed). */
  changes: TableChanges;
  /** Row keys by Lance row id, for search legs that read only row ids. */
  rowKeys: RowKeys;
  /** The dataset's folder when it is local, whose new files each commit makes durable (S3's PUT already is). */
  folder: DurableFolder | undefined;
}

/**
 * A creation left `creating` for longer than this died half-way (its node crashed or was killed); younger, it may
 * still be running on another node. Creating the dataset and its row-key and FTS indexes takes well under a
 * second on a local folder and a few seconds on S3.
 */
const ABANDONED_CREATION_MS = 30_000;

/** How often a table missing an ANN index looks whether another node's upkeep built it since. */
const ANN_RECHECK_MS = 1000;

/** Tries to close a handle again this long after a read still borrowing it refused the close. */
const CLOSE_RETRY_MS = 1000;

/**
 * Closes a Lance handle that reads may still be using. LanceDB refuses to close a handle while another call
 * borrows it ("cannot be borrowed mutably while another borrow is active"); that read is allowed to finish
 * and the close is tried again later. Never throws: the handle is being let go either way.
 */
export function closeHandle(lance: LanceTable, retries = 5): void {
  try {
    lance.close();
  } catch {
    if (retries > 0) setTimeout(() => closeHandle(lance, retries - 1), CLOSE_RETRY_MS).unref();
  }
}

/**
 * The tables of one database: catalog changes (one at a time; another arriving meanwhile gets 409 +
 * Retry-After), and open handles on their Lance datasets.
 */
export class Tables {
  private changing = false;
  private readonly handles = new Map<string, Promise<TableHandle>>();
  /** Each local dataset's folder, from its creation on, so that no file is synced twice. */
  private readonly folders = new Map<string, DurableFolder>();

  constructor(
    private readonly connection: Connection,
    private readonly catalog: CatalogStore,
    private readonly databaseId: string,
    readonly location: LanceLocation,
    private readonly log: EngineLog,
    /** Tables this database may hold (`STRATA_MAX_TABLES_PER_DATABASE`). */
    private readonly maxTables: number,
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
    const hasSchema = req.schema !== undefined && req.schema !== null;
    const hasIpc = req.schema_ipc !== undefined && req.schema_ipc !== null;
    if (hasSchema === hasIpc) throw new BadRequest('send exactly one of schema and schema_ipc');
    const schema = hasSchema ? schemaFromFields(req.schema ?? []) : schemaFromIpc(req.schema_ipc ?? '');
    const indexes = resolveIndexes(schema, req.indexes);

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
        indexes: JSON.stringify(indexes),
        createdMs: Date.now(),
        state: 'creating',
      };
      await this.catalog.insertTable(record);
      try {
        const lance = await this.connection.createEmptyTable(record.tableId, storedSchema(schema));
        await lance.createIndex(ROW_KEY, { config: Index.btree() });
        for (const fts of indexes.fts) await lance.createIndex(fts.column, { config: ftsIndex(fts.analyzer) });
        await lance.setUnenforcedPrimaryKey(ROW_KEY);
        closeHandle(lance);
        await this.durableFolder(record.tableId)?.sync();
        await this.catalog.setTableState(record.tableId, 'ready');
      } catch (err) {
        await this.forget(record, true).catch(() => undefined);
        throw err;
      }
      return { table_name: record.name, schema: describeIndexedSchema(schema, indexes), indexes };
    });
  }

  /**
   * Drops a table: it leaves the catalog, then (with `purge`) its files go, once `settle` has let this node's
   * upkeep of it end.
   */
  async drop(
    name: string,
    purge: boolean,
    settle: (tableId: string) => Promise<void> = async () => undefined,
  ): Promise<{ table_name: string; purged: boolean; location: string }> {
    const record = await this.catalog.findTable(this.databaseId, name);
    if (record === undefined) throw new NotFound(`table "${name}"`, { code: 'unknown_table' });
    return this.exclusively(`dropping table "${name}"`, async () => {
      const open = this.handles.get(record.tableId);
      // Writes already queued on the table finish first; none can start after it left the catalog.
      if (open !== undefined) await (await open.catch(() => undefined))?.writes.run(async () => undefined);
      // Another node may have dropped it since it was found: only the drop that removed the entry answers 200.
      if (!(await this.forget(record, purge, settle))) throw new NotFound(`table "${name}"`, { code: 'unknown_table' });
      return { table_name: name, purged: purge, location: `${this.location.publicUri}/${record.tableId}.lance` };
    });
  }

  /**
   * Removes a table from the catalog (first, so the name is free at once) and, with `purge`, its files. False when
   * another node removed the entry first: that node's drop deletes the files, if asked to.
   */
  private async forget(
    record: TableRecord,
    purge: boolean,
    settle: (tableId: string) => Promise<void> = async () => undefined,
  ): Promise<boolean> {
    const removed = await this.catalog.deleteTable(record.tableId);
    const open = this.handles.get(record.tableId);
    this.handles.delete(record.tableId);
    this.folders.delete(record.tableId);
    const handle = await open?.catch(() => undefined);
    if (handle !== undefined) closeHandle(handle.lance);
    if (purge && removed) {
      await settle(record.tableId);
      await this.deleteDataset(record.tableId);
    }
    return removed;
  }

  /**
   * Deletes a dropped table's dataset. A write that was under way when the deletion began (upkeep on another node)
   * can make a folder the deletion had emptied non-empty again: the deletion is tried again before it fails.
   */
  private async deleteDataset(tableId: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.connection.dropTable(tableId);
        return;
      } catch (err) {
        if (isMissingDataset(err)) return;
        if (attempt >= DELETE_TRIES) throw err;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  }

  /** What `/v1/schema` answers: the columns with their indexes beside them, and the Arrow schema. */
  async describe(name: string): Promise<TableDescription & { arrowSchema: Schema }> {
    const handle = await this.get(name);
    return {
      table_name: name,
      schema: describeIndexedSchema(handle.schema, handle.indexes),
      indexes: handle.indexes,
      arrowSchema: handle.schema,
    };
  }

  async list(): Promise<{ table_name: string; num_rows: number }[]> {
    const records = await this.ready();
    return Promise.all(
      records.map(async (record) => ({
        table_name: record.name,
        num_rows: await (await this.open(record)).lance.countRows(),
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
  async snapshot(record: TableRecord, version: number): Promise<LanceTable> {
    const lance = await this.connection.openTable(record.tableId);
    await lance.checkout(version);
    return lance;
  }

  /** The open table of that name; 404 when the catalog has no finished table of that name. */
  async get(name: string): Promise<TableHandle> {
    const record = await this.catalog.findTable(this.databaseId, name);
    if (record === undefined || record.state !== 'ready')
      throw new NotFound(`table "${name}"`, { code: 'unknown_table' });
    const handle = await this.open(record);
    if (handle.ann.size < handle.indexes.vector.length && Date.now() - handle.annCheckedMs > ANN_RECHECK_MS) {
      handle.annCheckedMs = Date.now();
      for (const column of annColumns(await handle.lance.listIndices())) handle.ann.add(column);
    }
    return handle;
  }

  /**
   * Opens a table's dataset. A local one first loses the commits a power cut interrupted (never answered),
   * which Lance could not read: it opens at the newest version whose files are whole.
   */
  private async openLance(tableId: string): Promise<LanceTable> {
    const folder = this.durableFolder(tableId);
    const aside = folder === undefined ? undefined : await setAsideInterruptedCommits(folder.root);
    if (aside !== undefined) {
      this.log.warn(
        { table: tableId, ...aside },
        'set aside commits a power cut interrupted before they were answered',
      );
    }
    return this.connection.openTable(tableId);
  }

  /** The folder of a table's dataset when it is local (S3 makes writes durable itself). */
  private durableFolder(tableId: string): DurableFolder | undefined {
    if (!this.location.local) return undefined;
    let folder = this.folders.get(tableId);
    if (folder === undefined) {
      folder = new DurableFolder(join(this.location.uri, `${tableId}.lance`));
      this.folders.set(tableId, folder);
    }
    return folder;
  }

  private open(record: TableRecord): Promise<TableHandle> {
    let handle = this.handles.get(record.tableId);
    if (handle === undefined) {
      handle = (async () => {
        const lance = await this.openLance(record.tableId);
        // In the background: a failed warm-up only leaves queries to load the indexes as they go.
        warmIndexes(lance).catch(() => undefined);
        return {
          record,
          schema: schemaFromIpc(record.schemaIpc),
          indexes: JSON.parse(record.indexes) as TableIndexes,
          lance,
          writes: new Serial(),
          ann: annColumns(await lance.listIndices()),
          annCheckedMs: Date.now(),
          changes: new TableChanges(),
          rowKeys: new RowKeys(lance),
          folder: this.durableFolder(record.tableId),
        };
      })();
      handle.catch(() => this.handles.delete(record.tableId));
      this.handles.set(record.tableId, handle);
    }
    return handle;
  }

  /** The tables opened so far (upkeep looks after these). */
  openHandles(): Promise<TableHandle>[] {
    return [...this.handles.values()];
  }

  async close(): Promise<void> {
    const all = [...this.handles.values()];
    this.handles.clear();
    for (const pending of all) {
      const handle = await pending.catch(() => undefined);
      if (handle !== undefined) closeHandle(handle.lance);
    }
  }
}
