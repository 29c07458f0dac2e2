import { type ChildProcess, fork } from 'node:child_process';
import { setPriority } from 'node:os';
import { builtModule } from '../../built-module.js';
import type { LanceLocation } from '../../storage/lance.js';
import type { IndexSpec } from '../indexes/registry.js';
import { UpkeepProcessGone } from '../rows/source.js';

/** Heavy upkeep work on one dataset: train an ANN index, build another index, or fold, compact and prune (`optimize()`). */
export type UpkeepJob =
  | {
      kind: 'ann';
      column: string;
      distanceType: 'cosine' | 'l2' | 'dot';
      index: { type: 'ivf_rq'; numBits: number } | { type: 'ivf_flat' };
      replace: boolean;
    }
  | { kind: 'optimize'; cleanupOlderThan: Date }
  /** Builds (or builds again from every live row) a text or scalar index. */
  | { kind: 'index'; index: Exclude<IndexSpec, { type: 'ann' }>; replace: boolean };

/** A job as sent to the upkeep process (`upkeep-child.ts`). */
export interface UpkeepRequest {
  id: number;
  uri: string;
  storageOptions: Record<string, string>;
  table: string;
  work: UpkeepJob;
}

export type UpkeepReply = { id: number; ok: true } | { id: number; ok: false; message: string };

/**
 * Niceness of the upkeep process. Lance trains and compacts on every core; run in the service's own process it
 * competed with searches as an equal (hybrid search p99 53.6 ms while an index was trained beside it, 19.1 ms with
 * the training at niceness 10; docs/performance.md has the measurements).
 */
export const UPKEEP_NICENESS = 10;

/**
 * The upkeep process ends once it has had no job for this long, and with it the memory it took (908 MB after
 * indexing bench:search's 1M rows); the next job starts another, whose first fold reads the indexes again.
 */
const UPKEEP_IDLE_MS = 60_000;

/** The upkeep process's module. */
const CHILD = builtModule(import.meta.url, 'upkeep-child.js');

interface Pending {
  resolve(): void;
  reject(err: Error): void;
}

/**
 * The process that runs upkeep's heavy Lance work for every database of this server, at a lower CPU priority so
 * that searches keep theirs. Started on the first job; when it dies (killed, out of memory), its jobs fail (upkeep
 * retries them on its next pass) and the next job starts another. The service itself never depends on it.
 */
export class UpkeepProcess {
  /** The running process and the jobs it was sent. */
  private current: { child: ChildProcess; pending: Map<number, Pending> } | undefined;
  private nextId = 0;
  private closed = false;
  private idle: NodeJS.Timeout | undefined;

  constructor(private readonly idleMs = UPKEEP_IDLE_MS) {}

  /** Runs `work` on the dataset `table` at `location`; resolves once its commit is done. */
  run(location: Pick<LanceLocation, 'uri' | 'storageOptions'>, table: string, work: UpkeepJob): Promise<void> {
    if (this.closed) return Promise.reject(new UpkeepProcessGone('upkeep process closed'));
    clearTimeout(this.idle);
    const { child, pending } = this.started();
    const request: UpkeepRequest = {
      id: this.nextId++,
      uri: location.uri,
      storageOptions: location.storageOptions,
      table,
      work,
    };
    // While it has work, the process's channel keeps this one alive, so no job is left unanswered at exit.
    child.channel?.ref();
    const job = new Promise<void>((resolve, reject) => {
      pending.set(request.id, { resolve, reject });
      child.send(request, (err) => {
        if (err === null || !pending.delete(request.id)) return;
        reject(new UpkeepProcessGone(`upkeep process gone: ${err.message}`));
      });
    });
    const settled = () => {
      if (pending.size > 0 || this.current?.child !== child) return;
      child.channel?.unref();
      clearTimeout(this.idle);
      this.idle = setTimeout(() => this.retire(child), this.idleMs).unref();
    };
    job.then(settled, settled);
    return job;
  }

  /** The process id while one runs (tests check its priority). */
  get pid(): number | undefined {
    return this.current?.child.pid;
  }

  /** Stops the process; jobs in flight fail, and Lance keeps each dataset at its last commit. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.idle);
    const child = this.current?.child;
    if (child === undefined) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  /** Ends an idle process; it is forgotten first, so the next job starts another rather than reach this one. */
  private retire(child: ChildProcess): void {
    if (this.current?.child !== child || this.current.pending.size > 0) return;
    this.current = undefined;
    child.kill('SIGTERM');
  }

  private started(): { child: ChildProcess; pending: Map<number, Pending> } {
    if (this.current !== undefined) return this.current;
    // Not the parent's flags (a test runner's loaders): the child is the build's JavaScript.
    const child = fork(CHILD, [], { execArgv: [], serialization: 'advanced', stdio: 'inherit' });
    const pending = new Map<number, Pending>();
    this.current = { child, pending };
    child.on('spawn', () => {
      try {
        if (child.pid !== undefined) setPriority(child.pid, UPKEEP_NICENESS);
      } catch {
        // Raising niceness is always allowed on Linux; elsewhere upkeep runs at the service's priority.
      }
    });
    child.on('message', (reply: UpkeepReply) => {
      const waiting = pending.get(reply.id);
      if (waiting === undefined) return;
      pending.delete(reply.id);
      if (reply.ok) waiting.resolve();
      else waiting.reject(new Error(reply.message));
    });
    const fail = (cause: Error) => {
      const err = new UpkeepProcessGone(`upkeep process gone: ${cause.message}`);
      if (this.current?.child === child) this.current = undefined;
      for (const waiting of pending.values()) waiting.reject(err);
      pending.clear();
    };
    // A process that could not start reports only 'error'; one that ran reports 'exit'.
    child.on('error', fail);
    child.on('exit', (code, signal) => fail(new Error(`exited (${signal ?? `code ${code}`})`)));
    // An idle upkeep process does not keep the service's process alive.
    child.unref();
    child.channel?.unref();
    return this.current;
  }
}
