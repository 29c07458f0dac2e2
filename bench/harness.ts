/** What every benchmark shares: Strata as its own process (as deployed) and a lean HTTP client for it. */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { connect } from '@lancedb/lancedb';
import type { RecordBatch, Schema, Vector } from 'apache-arrow';
import { arrow } from '../src/arrow/arrow.js';
import { MAX_ANN_SEGMENTS } from '../src/engine/upkeep/upkeep.js';

export const ARROW = 'application/vnd.apache.arrow.stream';
export const JSON_BODY = { 'content-type': 'application/json' };

export interface Server {
  url: string;
  /** The API key; a restart on the same data dir passes it back in (the store keeps only the first). */
  secret: string;
  /** POST; resolves with the body, rejects on any status but 200/201. */
  post(path: string, body: Uint8Array | string | undefined, headers?: Record<string, string>): Promise<Buffer>;
  /** GET, through the same connection pool as `post`. */
  get(path: string): Promise<Buffer>;
  /** Pauses or resumes index upkeep on the running node (its admin route), answered once passes under way ended. */
  pauseUpkeep(paused: boolean): Promise<void>;
  rssMb(): Promise<number>;
  /** Resident memory of the server's child processes (its upkeep process), in MB; 0 when none runs. */
  childrenRssMb(): number;
  stop(): Promise<void>;
}

/** Builds, then starts `strata serve` on `dataDir` with `env`, and waits until it answers. */
/** Extra flags for the server's node, e.g. BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile it. */
const NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '');

export async function startServer(
  dataDir: string,
  env: Record<string, string> = {},
  options: { build?: boolean; secret?: string } = {},
): Promise<Server> {
  if (options.build ?? true) execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
  const secret = options.secret ?? `sk_${randomBytes(32).toString('base64url')}`;
  const adminKey = `admin_${randomBytes(32).toString('base64url')}`;
  const port = 18000 + Math.floor(Math.random() * 1000);
  const child: ChildProcess = spawn(
    process.execPath,
    [...NODE_ARGS, 'dist/cli.js', 'serve', '--data-dir', dataDir, '--port', String(port), '--log-level', 'warn'],
    { env: { ...process.env, ...env, STRATA_BOOTSTRAP_KEY: secret, STRATA_ADMIN_KEY: adminKey }, stdio: 'inherit' },
  );
  // A benchmark that dies must not leave its server behind.
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 400; i++) {
    const up = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  // node:http rather than fetch: undici's fetch spends longer on a 16 MB body than the server does.
  const agent = new Agent({ keepAlive: true });
  const auth = { authorization: `Bearer ${secret}` };
  const send = (method: string, path: string, body: Uint8Array | string | undefined, headers: Record<string, string>) =>
    new Promise<Buffer>((resolve, reject) => {
      const req = request(`${url}${path}`, { method, agent, headers: { ...auth, ...headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const out = Buffer.concat(chunks);
          if (res.statusCode === 200 || res.statusCode === 201 || res.statusCode === 204) resolve(out);
          else reject(new Error(`${path}: ${res.statusCode} ${out.toString()}`));
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  return {
    url,
    secret,
    post: (path, body, headers = JSON_BODY) => send('POST', path, body, headers),
    get: (path) => send('GET', path, undefined, {}),
    async pauseUpkeep(paused) {
      await send('PUT', '/v1/admin/upkeep', JSON.stringify({ paused }), {
        ...JSON_BODY,
        authorization: `Bearer ${adminKey}`,
      });
    },
    async rssMb() {
      const metrics = await (await fetch(`${url}/metrics`)).text();
      return Math.round(Number(/^process_resident_memory_bytes (\S+)$/m.exec(metrics)?.[1] ?? 0) / 2 ** 20);
    },
    childrenRssMb() {
      let kb = 0;
      for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
        try {
          // The parent's pid is the field after the command name, which is in parentheses and may hold spaces.
          const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
          if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== child.pid) continue;
          kb += Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
        } catch {
          // The process ended meanwhile.
        }
      }
      return Math.round(kb / 1024);
    },
    async stop() {
      agent.destroy();
      process.removeListener('exit', reap);
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}

/** Registers and verifies a local database, and waits until it is active. */
export async function activeDatabase(server: Server, name: string): Promise<void> {
  await server.post('/v1/databases', JSON.stringify({ name, storage: { provider: 'local', bucket: name } }));
  await server.post(`/v1/databases/${name}/storage/verify`, undefined, {});
  for (let i = 0; i < 200; i++) {
    const ready = await server.post(`/v1/list_tables/${name}`, undefined, {}).then(
      () => true,
      (err: unknown) => {
        if (/: 503 /.test(String(err))) return false;
        throw err;
      },
    );
    if (ready) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * An append, sent again while the service refuses it as `index_behind` (past STRATA_MAX_UNINDEXED_ROWS nothing is
 * written until upkeep folded the tail), as the client does.
 */
export async function appendWaiting(
  server: Server,
  path: string,
  body: Uint8Array | string,
  headers: Record<string, string>,
): Promise<void> {
  for (;;) {
    try {
      await server.post(path, body, headers);
      return;
    } catch (err) {
      if (!String(err).includes('index_behind')) throw err;
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }
}

export const percentile = (sorted: readonly number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

export async function seconds(run: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await run();
  return (performance.now() - start) / 1000;
}

export const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/** Removes a benchmark's data dir, unless BENCH_KEEP is set (to experiment on the data it built). */
export function removeDataDir(dataDir: string): void {
  if (process.env.BENCH_KEEP === undefined) rmSync(dataDir, { recursive: true, force: true });
  else console.log(`kept ${dataDir}`);
}

export function saveResults(name: string, results: object): void {
  console.log(JSON.stringify(results, null, 2));
  const dir = join(import.meta.dirname, 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(results, null, 2)}\n`);
}

/** Megabytes the kernel still has to write to disk (dirty and under writeback), from /proc/meminfo. */
export function pendingDiskWritesMb(): number {
  const meminfo = readFileSync('/proc/meminfo', 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(meminfo)?.[1] ?? 0);
  return Math.round((kb('Dirty') + kb('Writeback')) / 1024);
}

/**
 * Writes back what the benchmark's setup left dirty in the page cache. On this VM the kernel's writeback of a
 * few GB takes one of the two cores for seconds: a 1M-row SQL load measured 9.9 s beside 2.3 GB of writeback
 * and 6.0 s after `sync`, the same data both times.
 */
export function flushDisk(): { pendingMb: number; seconds: number } {
  const pendingMb = pendingDiskWritesMb();
  const start = performance.now();
  execFileSync('sync');
  return { pendingMb, seconds: Number(((performance.now() - start) / 1000).toFixed(1)) };
}

/** Longer than the server's default upkeep interval (5 s). */
const QUIET_MS = 6_000;

/**
 * Waits until upkeep has folded every row of every table of a local database into its indexes (and, with
 * `ann`, built a vector index somewhere, in no more segments than upkeep lets pass without training it again),
 * so measurements do not share the machine with it. Returns the seconds until upkeep's last commit; QUIET_MS
 * without a commit are waited after it. A training that starts after that can still overlap a measurement:
 * `tableVersions` before and after one shows it.
 */

export async function untilIndexed(dataDir: string, database: string, ann = false): Promise<number> {
  const dir = join(dataDir, 'buckets', database, 'tables');
  const connection = await connect(dir, { readConsistencyInterval: 0 });
  const names = readdirSync(dir)
    .filter((f) => f.endsWith('.lance'))
    .map((f) => f.replace(/\.lance$/, ''));
  const tables = await Promise.all(names.map((name) => connection.openTable(name)));
  try {
    // Caught up, and no commit for a while: an upkeep pass (compaction, pruning) can follow the last fold.
    const start = Date.now();
    let versions = '';
    let lastCommit = start;
    for (;;) {
      let unindexed = 0;
      let annFound = false;
      let annSplit = false;
      const now = (await Promise.all(tables.map((t) => t.version()))).join();
      if (now !== versions && versions !== '') lastCommit = Date.now();
      versions = now;
      for (const table of tables) {
        for (const index of await table.listIndices()) {
          const stats = await table.indexStats(index.name);
          unindexed += stats?.numUnindexedRows ?? 0;
          if (/ivf/i.test(index.indexType)) {
            annFound = true;
            if ((stats?.numIndices ?? 1) > MAX_ANN_SEGMENTS) annSplit = true;
          }
        }
      }
      if (unindexed === 0 && !annSplit && (annFound || !ann) && Date.now() - lastCommit >= QUIET_MS) {
        return (lastCommit - start) / 1000;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  } finally {
    for (const table of tables) table.close();
    connection.close();
  }
}

/** The Lance version of every table of a local database, to tell whether anything committed in between. */
export async function tableVersions(dataDir: string, database: string): Promise<string> {
  const dir = join(dataDir, 'buckets', database, 'tables');
  const connection = await connect(dir, { readConsistencyInterval: 0 });
  try {
    const names = readdirSync(dir).filter((f) => f.endsWith('.lance'));
    const versions: number[] = [];
    for (const name of names) {
      const table = await connection.openTable(name.replace(/\.lance$/, ''));
      versions.push(await table.version());
      table.close();
    }
    return versions.join();
  } finally {
    connection.close();
  }
}

/** The Arrow type of a `dim`-wide f32 vector column, as the service stores it. */
export const vectorType = (dim: number) =>
  new arrow.FixedSizeList(dim, new arrow.Field('item', new arrow.Float32(), true));

/** A vector column over `values` (row-major, `dim` floats per row), without copying them. */
export function vectorColumn(values: Float32Array, dim: number): Vector {
  const rows = values.length / dim;
  const child = arrow.makeData({ type: new arrow.Float32(), length: values.length, nullCount: 0, data: values });
  return arrow.makeVector(arrow.makeData({ type: vectorType(dim), length: rows, nullCount: 0, child }));
}

/** A record batch of `schema` from whole columns, in the schema's order. */
export function batchOf(schema: Schema, columns: readonly Vector[]): RecordBatch {
  const data = arrow.makeData({
    type: new arrow.Struct(schema.fields),
    length: columns[0]?.length ?? 0,
    nullCount: 0,
    children: columns.map((c) => c.data[0] as NonNullable<(typeof c.data)[0]>),
  });
  return new arrow.RecordBatch(schema, data);
}
