import { type RecordBatch, Table, tableToIPC } from 'apache-arrow';

/**
 * Rows already encoded as one Arrow IPC stream, sent as one request as they are: for callers that build Arrow
 * with another Arrow instance than this package's, or that choose each request's rows themselves.
 */
export interface EncodedRows {
  ipc: Uint8Array;
  rows: number;
}

/** What `append` takes: an Arrow table, record batches (also streamed), encoded streams, or plain row objects. */
export type RowsSource =
  | Table
  | readonly RecordBatch[]
  | Iterable<RecordBatch>
  | AsyncIterable<RecordBatch>
  | AsyncIterable<EncodedRows>
  | readonly Record<string, unknown>[];

/** One request's worth of rows: an Arrow IPC stream, or a JSON `{data}` body. */
export type Chunk =
  | { kind: 'arrow'; bytes: Uint8Array; rows: number }
  | { kind: 'json'; data: Record<string, unknown>[]; rows: number };

export interface ChunkLimits {
  /** Bytes of Arrow data (or JSON text, roughly) per request. */
  maxBytes: number;
  /** Rows per request. */
  maxRows: number;
}

const isRecordBatch = (value: unknown): value is RecordBatch =>
  typeof value === 'object' && value !== null && 'schema' in value && 'numRows' in value && 'data' in value;

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

const isEncoded = (value: RecordBatch | EncodedRows): value is EncodedRows => 'ipc' in value;

/** The source's record batches (or encoded streams) as they come. */
async function* batchesOf(source: RowsSource): AsyncGenerator<RecordBatch | EncodedRows> {
  if (source instanceof Table) {
    yield* source.batches;
    return;
  }
  if (isAsyncIterable(source)) {
    for await (const batch of source as AsyncIterable<RecordBatch | EncodedRows>) yield batch;
    return;
  }
  yield* source as Iterable<RecordBatch>;
}

const isRows = (source: RowsSource): source is readonly Record<string, unknown>[] =>
  Array.isArray(source) && source.length > 0 && !isRecordBatch(source[0]);

/**
 * Splits a source into requests of at most `maxRows` rows and about `maxBytes` bytes each, in order, reading a
 * streamed source only as far as the requests being sent need.
 */
export async function* chunksOf(source: RowsSource, limits: ChunkLimits): AsyncGenerator<Chunk> {
  if (isRows(source)) {
    let start = 0;
    while (start < source.length) {
      let bytes = 0;
      let end = start;
      while (end < source.length && end - start < limits.maxRows && bytes < limits.maxBytes) {
        bytes += JSON.stringify(source[end]).length;
        end++;
      }
      yield { kind: 'json', data: source.slice(start, end), rows: end - start };
      start = end;
    }
    return;
  }
  let pending: RecordBatch[] = [];
  let rows = 0;
  let bytes = 0;
  const flush = (): Chunk => {
    const chunk: Chunk = { kind: 'arrow', bytes: tableToIPC(new Table(pending), 'stream'), rows };
    pending = [];
    rows = 0;
    bytes = 0;
    return chunk;
  };
  for await (const whole of batchesOf(source)) {
    if (isEncoded(whole)) {
      if (rows > 0) yield flush();
      yield { kind: 'arrow', bytes: whole.ipc, rows: whole.rows };
      continue;
    }
    let batch = whole;
    while (batch.numRows > 0) {
      const perRow = batch.data.byteLength / batch.numRows;
      const room = Math.max(
        1,
        Math.min(limits.maxRows - rows, Math.floor((limits.maxBytes - bytes) / Math.max(perRow, 1))),
      );
      const take = Math.min(batch.numRows, room);
      const part = take === batch.numRows ? batch : batch.slice(0, take);
      pending.push(part);
      rows += take;
      bytes += take * perRow;
      batch = take === batch.numRows ? batch.slice(0, 0) : batch.slice(take);
      if (rows >= limits.maxRows || bytes >= limits.maxBytes) yield flush();
    }
  }
  if (rows > 0) yield flush();
}
