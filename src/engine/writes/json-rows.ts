import { Worker } from 'node:worker_threads';
import type { RecordBatch, Schema } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { builtModule } from '../../built-module.js';
import { BadRequest, type ErrorCode, Unavailable } from '../../errors.js';
import { batchFromJson, checkConvertedSize, type ParsedRows } from './rows.js';

/** Moves a buffer when the view is all of it (large bodies and results); else the view is copied. */
export const movable = (bytes: Uint8Array): ArrayBuffer[] =>
  bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? [bytes.buffer as ArrayBuffer] : [];

type Work = { op: 'parse'; schemaIpc: string; bytes: Uint8Array } | { op: 'encode'; ipc: Uint8Array; maxChars: number };
/** What the JSON thread is asked: to parse a rows body for a table, or to encode rows (an IPC stream) as JSON. */
export type JsonJob = Work & { id: number };

/** What it answers: the bytes made (an IPC stream or JSON text), why a body is refused, or what failed. */
export type JsonReply =
  | { id: number; bytes: Uint8Array }
  | { id: number; refused: string; code: ErrorCode }
  | { id: number; fault: string };

/** Why a JSON rows body is not `{"data": [object, ...]}`, in the words the route schemas use elsewhere. */
function shapeError(body: unknown): string | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return 'body must be object';
  const extra = Object.keys(body).find((key) => key !== 'data');
  if (extra !== undefined) return `body has unknown property "${extra}"`;
  const data = (body as { data?: unknown }).data;
  if (data === undefined) return 'body is missing required property "data"';
  if (!Array.isArray(data)) return 'body.data must be array';
  const at = data.findIndex((row) => row === null || typeof row !== 'object' || Array.isArray(row));
  return at < 0 ? undefined : `body.data[${at}] must be object`;
}

/** The bytes of a JSON rows body (docs/api.md) → one batch of the table's columns; any fault is a `BadRequest`. */
export function batchFromJsonBytes(schema: Schema, bytes: Uint8Array): RecordBatch {
  if (bytes.byteLength === 0) {
    throw new BadRequest('the body is empty but Content-Type is application/json: send a JSON body or no Content-Type');
  }
  let body: unknown;
  try {
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
    // A leading byte order mark is allowed, as the framework's own JSON parser allows it.
    body = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch {
    throw new BadRequest('the body is not valid JSON');
  }
  const fault = shapeError(body);
  if (fault !== undefined) throw new BadRequest(fault);
  const rows = (body as { data: unknown[] }).data;
  checkConvertedSize(schema, rows.length, bytes.byteLength);
  return batchFromJson(schema, rows);
}

/**
 * JSON work this small is done on the calling thread: a round trip to the JSON thread costs ~0.4 ms, while
 * parsing 290 KB of rows takes ~1.8 ms and encoding 60 KB of Arrow rows as JSON ~2.3 ms (384-d vectors; 1 MB of
 * Arrow took 37 ms).
 */
const INLINE_PARSE_BYTES = 256 * 1024;
export const INLINE_ENCODE_BYTES = 64 * 1024;

/**
 * Parses JSON rows bodies into Arrow, and encodes large results as JSON, on a thread of its own. Parsing and
 * converting 10k rows × 384-d (75 MB of JSON) took ~0.6–0.8 s, and answering them as JSON ~0.4 s; on the event
 * loop, every request to the server waited that long (a `/healthz` during such appends: 819 ms at worst). The
 * thread starts with the first job and is let go after a minute without one.
 */
export class JsonThread {
  static readonly IDLE_MS = 60_000;
  static readonly HEAP_MB = 3072;
  private worker: Worker | undefined;
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: (bytes: Uint8Array) => void; reject: (err: Error) => void }>();
  private idle: NodeJS.Timeout | undefined;
  private closed = false;

  /** `inlineParseBytes`: bodies up to this size are parsed on the calling thread. */
  constructor(private readonly inlineParseBytes = INLINE_PARSE_BYTES) {}

  /** The rows of a JSON body for a table of `schema` (`schemaIpc`: its catalog form, for the thread). */
  async parse(schema: Schema, schemaIpc: string, bytes: Uint8Array): Promise<ParsedRows> {
    if (bytes.byteLength <= this.inlineParseBytes) return { batches: [batchFromJsonBytes(schema, bytes)] };
    const ipc = await this.run({ op: 'parse', schemaIpc, bytes }, movable(bytes));
    return { batches: arrow.RecordBatchReader.from(ipc).readAll(), stream: ipc };
  }

  /**
   * `{"data": [row, ...]}` as UTF-8 text, for the rows of an IPC stream; longer than `maxChars` is a 400. `shared`:
   * other views of the stream's memory live on (a write's rows, which the fresh rows hold): it is copied to the
   * thread rather than moved, which would leave them on memory that is gone.
   */
  encode(ipc: Uint8Array, maxChars: number, shared = false): Promise<Uint8Array> {
    return this.run({ op: 'encode', ipc, maxChars }, shared ? [] : movable(ipc));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.idle);
    await this.worker?.terminate();
    this.worker = undefined;
  }

  private run(work: Work, moved: ArrayBuffer[]): Promise<Uint8Array> {
    if (this.closed) return Promise.reject(new Error('the JSON thread is closed'));
    const worker = this.thread();
    const id = this.nextId++;
    clearTimeout(this.idle);
    return new Promise<Uint8Array>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      const job: JsonJob = { ...work, id };
      worker.postMessage(job, moved);
    });
  }

  private thread(): Worker {
    if (this.worker !== undefined) return this.worker;
    // Bounded apart from the server's own heap: a body of millions of tiny rows that would need more than this
    // ends the thread (and fails the jobs it held with 503), not the process.
    const worker = new Worker(builtModule(import.meta.url, 'json-rows-worker.js'), {
      resourceLimits: { maxOldGenerationSizeMb: JsonThread.HEAP_MB },
    });
    worker.on('message', (reply: JsonReply) => this.answer(reply));
    worker.on('error', (err) =>
      this.lost(
        worker,
        (err as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? new Unavailable('converting the rows of a request took more memory than a request may use; retry', {
              retryAfterS: 1,
              code: 'converter_out_of_memory',
            })
          : err,
      ),
    );
    worker.on('exit', (code) => this.lost(worker, new Error(`the JSON thread exited (code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private answer(reply: JsonReply): void {
    const waiting = this.pending.get(reply.id);
    this.pending.delete(reply.id);
    if (this.pending.size === 0) this.retireLater();
    if (waiting === undefined) return;
    if ('refused' in reply) waiting.reject(new BadRequest(reply.refused, { code: reply.code }));
    else if ('fault' in reply) waiting.reject(new Error(`the JSON thread failed: ${reply.fault}`));
    else waiting.resolve(reply.bytes);
  }

  /** A thread that died fails what it held; the next job starts a new one. */
  private lost(worker: Worker, err: Error): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    for (const waiting of this.pending.values()) waiting.reject(err);
    this.pending.clear();
  }

  private retireLater(): void {
    clearTimeout(this.idle);
    this.idle = setTimeout(() => {
      const worker = this.worker;
      this.worker = undefined;
      void worker?.terminate();
    }, JsonThread.IDLE_MS);
    this.idle.unref();
  }
}
