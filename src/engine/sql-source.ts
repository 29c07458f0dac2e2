import type { RecordBatch, Schema } from 'apache-arrow';
import type { KeyedBatch, SqlDifference, SqlSource, SqlTable } from '../sql/source.js';
import type { Snapshot } from './rows/source.js';
import type { TableRecord } from './tables/catalog.js';
import { ROW_KEY, schemaFromIpc } from './tables/schema.js';
import type { Tables } from './tables/tables.js';

/** The largest row key of a batch read with the key column. */
function maxKeyOf(batch: RecordBatch): bigint {
  const keys = batch.getChild(ROW_KEY)?.data[0]?.values as BigInt64Array | undefined;
  let max = -1n;
  for (const key of keys ?? []) if (key > max) max = key;
  return max;
}

/** A database's tables as the SQL engine reads them, through their row sources: the user's columns, never the row key. */
export class TablesSqlSource implements SqlSource {
  /** The catalog entry and decoded schema of each table listed (a table's schema never changes). */
  private readonly known = new Map<string, { record: TableRecord; schema: Schema }>();
  /** Read views of the tables SQL has loaded, checked out at the version being loaded. */
  private readonly pinned = new Map<string, Promise<Snapshot>>();

  constructor(private readonly store: Tables) {}

  async tables(): Promise<SqlTable[]> {
    const records = await this.store.ready();
    const ids = new Set(records.map((r) => r.tableId));
    for (const id of this.known.keys()) if (!ids.has(id)) this.forget(id);
    return records.map((record) => {
      let entry = this.known.get(record.tableId);
      if (entry === undefined) {
        entry = { record, schema: schemaFromIpc(record.schemaIpc) };
        this.known.set(record.tableId, entry);
      }
      return { id: record.tableId, name: record.name, schema: entry.schema };
    });
  }

  private recordOf(table: SqlTable): TableRecord {
    const entry = this.known.get(table.id);
    if (entry === undefined) throw new Error(`table ${table.id} was not listed before it was read`);
    return entry.record;
  }

  private handle(table: SqlTable) {
    return this.store.handleOf(this.recordOf(table));
  }

  async version(table: SqlTable): Promise<number> {
    return (await this.handle(table)).rows.version();
  }

  async changed(table: SqlTable, from: number, to: number): Promise<SqlDifference> {
    return (await this.handle(table)).changes.between(from, to);
  }

  async *scan(
    table: SqlTable,
    version: number,
    afterKey: bigint | undefined,
    columns: readonly string[],
  ): AsyncIterable<KeyedBatch> {
    const record = this.recordOf(table);
    // One view per table, moved to each version loaded: it keeps its index caches between loads.
    let pinned = this.pinned.get(table.id);
    if (pinned === undefined) {
      pinned = this.store.snapshot(record, version);
      this.pinned.set(table.id, pinned);
      pinned.catch(() => this.pinned.delete(table.id));
    }
    const snapshot = await pinned;
    await snapshot.checkout(version);
    for await (const batch of snapshot.scan(columns, afterKey)) {
      if (batch.numRows === 0) continue;
      // By position, not `select(names)`: Arrow JS's select leaves holes when names skip a column.
      const at = columns.map((name) => batch.schema.fields.findIndex((f) => f.name === name));
      yield { batch: batch.selectAt(at), maxKey: maxKeyOf(batch) };
    }
  }

  close(): void {
    for (const id of [...this.known.keys()]) this.forget(id);
  }

  /** Lets go of a table SQL no longer reads (dropped, or the engine closing). */
  private forget(id: string): void {
    this.known.delete(id);
    const pinned = this.pinned.get(id);
    this.pinned.delete(id);
    void pinned?.then(
      (snapshot) => snapshot.close(),
      () => undefined,
    );
  }
}
