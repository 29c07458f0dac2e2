import { Worker } from 'node:worker_threads';
import type { MetricKind } from 'usearch';
import { builtModule } from '../../built-module.js';
import type { FreshMatrix, MatrixScan } from './vector-matrix.js';

/** What the scan thread is told: rows written or packed into a matrix, a matrix let go of, or a scan. */
export type ScanJob =
  | { op: 'write'; matrix: number; dim: number; kind: MetricKind; slot: number; vectors: Float32Array }
  | { op: 'pack'; matrix: number; keep: readonly number[] }
  | { op: 'close'; matrix: number }
  | { op: 'scan'; id: number; matrix: number; slots: number; query: Float32Array; count: number };

/** What it answers a scan. */
export type ScanReply = { id: number; scan: MatrixScan } | { id: number; fault: string };

/** The scan thread died, and the matrices it held with it: the fresh rows they served must be let go of. */
export class MatrixLost extends Error {
  constructor(reason: string) {
    super(`the vector scan thread was lost: ${reason}`);
  }
}

/**
 * The node's fresh vector matrices, held and scanned on a thread of their own: a scan of 105k × 384 takes 6–8 ms
 * in f32 (2 in 8 bits), which on the event loop every other request waited out. The thread starts with the first
 * matrix and ends a minute after the last one went; it keeps no process alive.
 */
export class VectorScanThread {
  /** How long the thread stays after its last matrix went. */
  static readonly IDLE_MS = 60_000;
  private worker: Worker | undefined;
  private readonly pending = new Map<
    number,
    { worker: Worker; resolve: (scan: MatrixScan) => void; reject: (err: Error) => void }
  >();
  private nextId = 0;
  private nextMatrix = 0;
  private open = 0;
  /** The thread each open matrix lives on, and whom to tell if it dies. */
  private readonly owners = new Map<number, { worker: Worker; lost: () => void }>();
  private idle: NodeJS.Timeout | undefined;
  private closed = false;

  /**
   * A matrix of rows of `dim` floats on the thread (none once the node closes: its scans fail); `lost` is called
   * once if the thread dies with it.
   */
  matrix(dim: number, kind: MetricKind, lost: () => void): FreshMatrix {
    this.open++;
    clearTimeout(this.idle);
    const worker = this.closed ? undefined : this.thread();
    const id = this.nextMatrix++;
    if (worker !== undefined) this.owners.set(id, { worker, lost });
    return new ThreadMatrix(this, worker, id, dim, kind);
  }

  /** Sends `job` to `worker`, unless that thread was lost since: its matrices are gone. */
  send(worker: Worker | undefined, job: ScanJob, moved: ArrayBuffer[] = []): boolean {
    if (worker === undefined || this.worker !== worker) return false;
    worker.postMessage(job, moved);
    return true;
  }

  scan(worker: Worker | undefined, job: Omit<Extract<ScanJob, { op: 'scan' }>, 'id'>): Promise<MatrixScan> {
    const id = this.nextId++;
    return new Promise<MatrixScan>((resolve, reject) => {
      if (worker === undefined || !this.send(worker, { ...job, id })) {
        reject(new MatrixLost('before this scan'));
        return;
      }
      this.pending.set(id, { worker, resolve, reject });
    });
  }

  /** A matrix was let go of: the thread ends a while after the last one. */
  released(worker: Worker | undefined, matrix: number): void {
    this.owners.delete(matrix);
    this.send(worker, { op: 'close', matrix });
    if (--this.open > 0) return;
    clearTimeout(this.idle);
    this.idle = setTimeout(() => {
      const idle = this.worker;
      if (this.open > 0 || idle === undefined) return;
      this.worker = undefined;
      void idle.terminate();
    }, VectorScanThread.IDLE_MS);
    this.idle.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.idle);
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private thread(): Worker {
    if (this.worker !== undefined) return this.worker;
    const worker = new Worker(builtModule(import.meta.url, 'vector-scans-worker.js'));
    worker.unref();
    worker.on('message', (reply: ScanReply) => this.answer(reply));
    worker.on('error', (err) => this.lost(worker, err.message));
    worker.on('exit', (code) => this.lost(worker, `it exited (code ${code})`));
    this.worker = worker;
    return worker;
  }

  private answer(reply: ScanReply): void {
    const waiting = this.pending.get(reply.id);
    this.pending.delete(reply.id);
    if (waiting === undefined) return;
    if ('fault' in reply) waiting.reject(new Error(`a vector scan failed: ${reply.fault}`));
    else waiting.resolve(reply.scan);
  }

  /** A thread that died fails the scans it held, and tells its matrices' owners, which let go of their rows. */
  private lost(worker: Worker, reason: string): void {
    if (this.worker === worker) this.worker = undefined;
    for (const [id, waiting] of this.pending) {
      if (waiting.worker !== worker) continue;
      this.pending.delete(id);
      waiting.reject(new MatrixLost(reason));
    }
    for (const [id, owner] of this.owners) {
      if (owner.worker !== worker) continue;
      this.owners.delete(id);
      queueMicrotask(owner.lost);
    }
  }
}

/** Room for waiting rows kept between sends. */
const KEPT_WAITING_BYTES = 64 * 1024;

/**
 * A matrix on the scan thread. Rows written one by one are sent together: at the next scan, pack or close, or
 * once the writing code yields.
 */
class ThreadMatrix implements FreshMatrix {
  /** Rows written since the last send, copied at once (a write's vectors may view memory that moves on). */
  private waiting = new Float32Array(0);
  private waitingRows = 0;
  private waitingFrom = 0;
  private closed = false;

  constructor(
    private readonly thread: VectorScanThread,
    private readonly worker: Worker | undefined,
    private readonly id: number,
    private readonly dim: number,
    private readonly kind: MetricKind,
  ) {}

  write(slot: number, vectors: Float32Array): void {
    if (this.closed) return;
    if (this.waitingRows > 0 && slot !== this.waitingFrom + this.waitingRows) this.flush();
    if (this.waitingRows === 0) {
      this.waitingFrom = slot;
      queueMicrotask(() => this.flush());
    }
    const rows = vectors.length / this.dim;
    const end = (this.waitingRows + rows) * this.dim;
    if (end > this.waiting.length) {
      const grown = new Float32Array(Math.max(end, 2 * this.waiting.length, 64 * this.dim));
      grown.set(this.waiting.subarray(0, this.waitingRows * this.dim));
      this.waiting = grown;
    }
    this.waiting.set(vectors, this.waitingRows * this.dim);
    this.waitingRows += rows;
  }

  pack(keep: readonly number[]): void {
    this.flush();
    this.thread.send(this.worker, { op: 'pack', matrix: this.id, keep });
  }

  scan(slots: number, query: Float32Array, count: number): Promise<MatrixScan> {
    this.flush();
    return this.thread.scan(this.worker, { op: 'scan', matrix: this.id, slots, query, count });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.waiting = new Float32Array(0);
    this.waitingRows = 0;
    this.thread.released(this.worker, this.id);
  }

  private flush(): void {
    if (this.waitingRows === 0 || this.closed) return;
    const vectors = this.waiting.slice(0, this.waitingRows * this.dim);
    this.waitingRows = 0;
    // A large commit's room is not kept for the small ones that follow.
    if (this.waiting.byteLength > KEPT_WAITING_BYTES) this.waiting = new Float32Array(0);
    this.thread.send(
      this.worker,
      { op: 'write', matrix: this.id, dim: this.dim, kind: this.kind, slot: this.waitingFrom, vectors },
      [vectors.buffer],
    );
  }
}
