import { join } from 'node:path';
import type { Schema } from 'apache-arrow';
import { DurableFolder } from '../../storage/durable.js';
import { setAsideInterruptedCommits } from '../../storage/interrupted.js';
import { asidePrefix, type LanceLocation } from '../../storage/lance.js';
import type { IndexSpec, TableIndexes } from '../indexes/registry.js';
import type { EngineLog } from '../log.js';
import type { AsideObject, RowSource, RowStore, Snapshot } from '../rows/source.js';
import { ROW_KEY } from '../tables/schema.js';
import { annColumns, lanceIndex, warmIndexes } from './indexes.js';
import { type Connection, connect, isMissingDataset } from './lance.js';
import { closeHandle, LanceRows, LanceSnapshot } from './rows.js';
import type { UpkeepProcess } from './upkeep-process.js';

/** Tries at deleting a dropped table's dataset before the drop fails. */
const DELETE_TRIES = 3;

/** A database's tables as Lance datasets, `<table_id>.lance` in its location. */
export class LanceStore implements RowStore {
  /** Each local dataset's folder, from its creation on, so that no file is synced twice. */
  private readonly folders = new Map<string, DurableFolder>();

  private constructor(
    private readonly connection: Connection,
    private readonly location: LanceLocation,
    private readonly jobs: UpkeepProcess,
    private readonly log: EngineLog,
  ) {}

  static async open(location: LanceLocation, jobs: UpkeepProcess, log: EngineLog): Promise<LanceStore> {
    // readConsistencyInterval 0: every read sees the latest commit, whoever made it (docs/architecture.md).
    const connection = await connect(location.uri, {
      storageOptions: location.storageOptions,
      readConsistencyInterval: 0,
    });
    return new LanceStore(connection, location, jobs, log);
  }

  async create(tableId: string, schema: Schema, indexes: readonly IndexSpec[]): Promise<void> {
    const lance = await this.connection.createEmptyTable(tableId, schema);
    await lance.createIndex(ROW_KEY, { config: lanceIndex({ type: 'scalar', column: ROW_KEY, index: 'btree' }) });
    for (const index of indexes) {
      // Trained indexes need rows: upkeep builds them (`IndexUpkeep`).
      if (index.type !== 'ann') await lance.createIndex(index.column, { config: lanceIndex(index) });
    }
    await lance.setUnenforcedPrimaryKey(ROW_KEY);
    closeHandle(lance);
    await this.durableFolder(tableId)?.sync();
  }

  /**
   * Opens a table's dataset. A local one first loses the commits a power cut interrupted (never answered),
   * which Lance could not read: it opens at the newest version whose files are whole.
   */
  async open(tableId: string, indexes: TableIndexes): Promise<RowSource> {
    const folder = this.durableFolder(tableId);
    const aside = folder === undefined ? undefined : await setAsideInterruptedCommits(folder.root);
    if (aside !== undefined) {
      this.log.warn(
        { table: tableId, ...aside },
        'set aside commits a power cut interrupted before they were answered',
      );
    }
    const lance = await this.connection.openTable(tableId);
    // In the background: a failed warm-up only leaves queries to load the indexes as they go.
    warmIndexes(lance).catch(() => undefined);
    const ann = annColumns(await lance.listIndices());
    return new LanceRows(lance, tableId, indexes, ann, {
      connection: this.connection,
      location: this.location,
      jobs: this.jobs,
      folder,
    });
  }

  /** A handle of its own on one version of a table, for reads that must see exactly that version; close it after. */
  async snapshot(tableId: string, version: number): Promise<Snapshot> {
    const lance = await this.connection.openTable(tableId);
    await lance.checkout(version);
    return new LanceSnapshot(lance);
  }

  aside(tableId: string, name: string, maxBytes: number): AsideObject {
    const { objects } = this.location;
    const key = `${asidePrefix(tableId)}${name}`;
    return {
      // None, a torn one, one too large or a store error alike: the reader does without.
      read: () => objects.get(key, maxBytes).catch(() => undefined),
      write: (bytes) => objects.put(key, bytes),
    };
  }

  /**
   * Deletes a dropped table's dataset. A write that was under way when the deletion began (upkeep on another node)
   * can make a folder the deletion had emptied non-empty again: the deletion is tried again before it fails.
   */
  async drop(tableId: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.connection.dropTable(tableId).catch((err: unknown) => {
          // Gone already (an earlier try dropped it): what is kept beside it still goes.
          if (!isMissingDataset(err)) throw err;
        });
        await this.location.objects.deletePrefix(asidePrefix(tableId));
        return;
      } catch (err) {
        if (attempt >= DELETE_TRIES) throw err;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  }

  locationOf(tableId: string): string {
    return `${this.location.publicUri}/${tableId}.lance`;
  }

  release(source: RowSource): void {
    if (source instanceof LanceRows) closeHandle(source.handle);
  }

  forget(tableId: string): void {
    this.folders.delete(tableId);
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
}
