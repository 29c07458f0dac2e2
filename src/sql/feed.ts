import { randomBytes } from 'node:crypto';
import {
  type DuckDBConnection,
  type DuckDBDataChunk,
  DuckDBTableFunction,
  type DuckDBTableFunctionBindInfo,
  type DuckDBTableFunctionInfo,
  type DuckDBType,
  VARCHAR,
} from '@duckdb/node-api';
import type { RecordBatch } from 'apache-arrow';
import { quoteIdent } from './types.js';
import { CHUNK_ROWS, fillChunk } from './vector-writers.js';

// The feed: whole row groups of Lance batches handed to DuckDB's load threads through a table function.

/**
 * Rows per DuckDB row group. A load thread that fills whole row groups hands them to the table as they are;
 * a partly filled one is re-appended row by row, which measured 3–4× slower for a 384-d float array column.
 */
export const ROW_GROUP_ROWS = 122_880;

/** A run of rows of the batches being loaded that one DuckDB thread turns into one row group. */
interface Lane {
  batch: number;
  offset: number;
  left: number;
}

interface Load {
  token: string;
  names: string[];
  types: DuckDBType[];
  batches: readonly RecordBatch[];
  lanes: Lane[];
  claimed: number;
}

/** Cuts batches into lanes of `ROW_GROUP_ROWS` rows (the last one shorter). */
function lanesOf(batches: readonly RecordBatch[]): Lane[] {
  const lanes: Lane[] = [];
  let batch = 0;
  let offset = 0;
  let left = batches.reduce((n, b) => n + b.numRows, 0);
  while (left > 0) {
    const rows = Math.min(ROW_GROUP_ROWS, left);
    lanes.push({ batch, offset, left: rows });
    left -= rows;
    let skip = rows;
    while (skip > 0) {
      const room = (batches[batch]?.numRows ?? 0) - offset;
      if (room > skip) {
        offset += skip;
        skip = 0;
      } else {
        skip -= room;
        batch++;
        offset = 0;
      }
    }
  }
  return lanes;
}

/**
 * Inserts Arrow batches into DuckDB tables with one `INSERT … SELECT` from a table function that DuckDB
 * scans on several threads at once (the appender runs on one thread and re-appends every row: 90–140k
 * rows/s against 370k here for 384-d vectors). Each scanning thread takes whole lanes, so it fills whole row
 * groups. The function is in the catalog where user SQL could name it, so it serves rows only to a statement
 * carrying the current load's random token.
 */
export class RowGroupFeed {
  static readonly FUNCTION = '__strata_feed';
  private load: Load | undefined;
  private busy = false;

  private constructor(
    private readonly connection: DuckDBConnection,
    private readonly threads: number,
  ) {}

  /**
   * Registers the feed on a connection whose session does not preserve insertion order (with it, DuckDB
   * inserts from one thread; a table's row order is not part of SQL anyway).
   */
  static register(connection: DuckDBConnection, threads: number): RowGroupFeed {
    const feed = new RowGroupFeed(connection, threads);
    connection.registerTableFunction(
      DuckDBTableFunction.create({
        name: RowGroupFeed.FUNCTION,
        parameterTypes: [VARCHAR],
        bindFunction: (info) => feed.bind(info),
        initFunction: (info) => info.setMaxThreads(feed.threads),
        localInitFunction: (info) => info.setInitData({ lane: feed.claim() }),
        mainFunction: (info, chunk) => feed.fill(info, chunk),
      }),
    );
    return feed;
  }

  /** Inserts the batches (the table's columns, in order) into `table` in one statement. */
  async insert(table: string, batches: readonly RecordBatch[]): Promise<void> {
    if (batches.length === 0) return;
    // The token and lanes are the feed's one current load (a database's loads run one at a time).
    if (this.busy) throw new Error('RowGroupFeed.insert: another insert is running');
    this.busy = true;
    try {
      const shape = await this.connection.prepare(`SELECT * FROM ${quoteIdent(table)}`);
      const names = Array.from({ length: shape.columnCount }, (_, c) => shape.columnName(c));
      const types = Array.from({ length: shape.columnCount }, (_, c) => shape.columnType(c));
      shape.destroySync();
      const token = randomBytes(16).toString('hex');
      this.load = { token, names, types, batches, lanes: lanesOf(batches), claimed: 0 };
      await this.connection.run(`INSERT INTO ${quoteIdent(table)} SELECT * FROM ${RowGroupFeed.FUNCTION}('${token}')`);
    } finally {
      this.load = undefined;
      this.busy = false;
    }
  }

  private bind(info: DuckDBTableFunctionBindInfo): void {
    const load = this.load;
    if (load === undefined || info.getParameter(0) !== load.token) {
      info.setError(`${RowGroupFeed.FUNCTION} is internal to the service`);
      return;
    }
    load.names.forEach((name, c) => {
      info.addResultColumn(name, load.types[c] as DuckDBType);
    });
  }

  private claim(): Lane | undefined {
    const load = this.load;
    return load === undefined ? undefined : load.lanes[load.claimed++];
  }

  /** The next chunk of the calling thread's lane; a thread whose lane is done takes the next lane. */
  private fill(info: DuckDBTableFunctionInfo, chunk: DuckDBDataChunk): void {
    const state = info.localInitData as { lane: Lane | undefined };
    try {
      while (state.lane !== undefined && state.lane.left === 0) state.lane = this.claim();
      const lane = state.lane;
      const batches = this.load?.batches;
      if (lane === undefined || batches === undefined) {
        chunk.rowCount = 0;
        return;
      }
      while (lane.offset >= (batches[lane.batch]?.numRows ?? 0)) {
        lane.batch++;
        lane.offset = 0;
      }
      const batch = batches[lane.batch] as RecordBatch;
      const n = Math.min(CHUNK_ROWS, batch.numRows - lane.offset, lane.left);
      fillChunk(chunk, batch, lane.offset, n);
      lane.offset += n;
      lane.left -= n;
    } catch (err) {
      info.setError(err instanceof Error ? err.message : String(err));
      chunk.rowCount = 0;
    }
  }
}
