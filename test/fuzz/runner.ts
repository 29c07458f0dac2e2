import { readdirSync, readFileSync } from 'node:fs';
import fc from 'fast-check';
import { capturedLogs } from '../support/logs.js';
import type { FuzzCase } from './cases.js';
import { errorOf, problemsOf } from './checks.js';
import { fuzzCases } from './requests.js';
import { type Outcome, type Secrets, send, targetOf } from './send.js';
import type { World } from './world.js';

export interface FuzzOptions {
  count: number;
  seed: number;
  /** Requests in flight at once. */
  concurrency: number;
  /** `GET /healthz` after every this many requests. */
  healthEvery: number;
  maxRssBytes: number;
  /** How long one request may go unanswered. */
  timeoutMs: number;
  /** Run only these case indices (to replay failures of a run with the same seed). */
  only?: number[];
  /** Progress lines (the CLI prints them; the test slice stays quiet). */
  progress?: (line: string) => void;
  /** One line per answered request (FUZZ_TRACE=1), to see what preceded a state going wrong. */
  trace?: (line: string) => void;
}

export interface Failure {
  index: number;
  fuzzCase: FuzzCase;
  outcome: Outcome;
  problems: string[];
  /** For a 5xx: the server's own log line of the fault (message and where it was thrown). */
  serverError?: string;
}

export interface FuzzReport {
  seed: number;
  sent: number;
  durationMs: number;
  /** route → status (or `closed`, `unsent`, `no answer`) → count. */
  tally: Map<string, Map<string, number>>;
  failures: Failure[];
  /** Problems not tied to one request: health checks, memory. */
  serverProblems: string[];
  rss: { start: number; peak: number; end: number };
  healthChecks: number;
}

/** Cases are made in chunks of this many, each chunk from its own seed, so any index can be made again alone. */
const CHUNK = 100;

function chunkSeed(seed: number, chunk: number): number {
  return (seed ^ Math.imul(chunk + 1, 0x9e3779b1)) | 0;
}

/** The cases of a run, made lazily: index i is the same case for the same seed and world shape. */
export function caseSource(world: World, seed: number): (index: number) => FuzzCase {
  const arbitrary = fuzzCases(world);
  let cached: { chunk: number; cases: FuzzCase[] } | undefined;
  return (index) => {
    const chunk = Math.floor(index / CHUNK);
    if (cached?.chunk !== chunk) {
      cached = { chunk, cases: fc.sample(arbitrary, { seed: chunkSeed(seed, chunk), numRuns: CHUNK }) };
    }
    return cached.cases[index % CHUNK] as FuzzCase;
  };
}

/** Resident memory of this process and every process it started (Strata's upkeep children), in bytes. */
export function treeRss(): number {
  let total = process.memoryUsage().rss;
  const page = 4096;
  const visit = (pid: number, depth: number) => {
    if (depth > 4) return;
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      return;
    }
    for (const task of tasks) {
      let children: string[] = [];
      try {
        children = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
      } catch {
        continue;
      }
      for (const child of children) {
        try {
          total += Number(readFileSync(`/proc/${child}/statm`, 'utf8').split(' ')[1]) * page;
        } catch {
          // It ended between the listing and the read.
        }
        visit(Number(child), depth + 1);
      }
    }
  };
  visit(process.pid, 0);
  return total;
}

/** The server's log line for a request that faulted: its error message and first frame in our sources. */
function serverErrorOf(requestId: string | undefined): string | undefined {
  if (requestId === undefined) return undefined;
  const needle = `"reqId":"${requestId}"`;
  for (const line of capturedLogs()) {
    if (!line.includes(needle) || !line.includes('"err"')) continue;
    try {
      const entry = JSON.parse(line) as { err?: { type?: string; message?: string; stack?: string } };
      const frame = entry.err?.stack?.split('\n').find((l) => l.includes('/src/'));
      return `${entry.err?.type ?? 'Error'}: ${entry.err?.message ?? '?'}${frame === undefined ? '' : ` ${frame.trim()}`}`;
    } catch {
      return line.slice(0, 400);
    }
  }
  return undefined;
}

function traceOf(c: FuzzCase): string {
  if (c.kind === 'raw') return `${c.route} ${JSON.stringify(c.chunks.join('').slice(0, 100))}`;
  const auth = c.auth.kind === 'key' ? `key ${c.auth.account}` : c.auth.kind;
  return `${c.method} ${c.path.slice(0, 100)} (${auth})`;
}

function statusLabel(o: Outcome): string {
  if (o.unsent !== undefined) return 'unsent';
  if (o.statuses.length === 0) return o.closed === true ? 'closed' : 'no answer';
  return String(o.statuses[0]);
}

async function healthy(url: string): Promise<string | undefined> {
  const started = performance.now();
  try {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
    await res.text();
    if (res.status !== 200) return `GET /healthz answered ${res.status}`;
    return undefined;
  } catch (err) {
    return `GET /healthz failed after ${Math.round(performance.now() - started)} ms: ${(err as Error).message}`;
  }
}

/**
 * Whether the fixtures are still there: no generated request may remove the accounts' databases or their
 * tables (drops and deletes aim only at names the fuzzer owns), so a loss is a request that did what it must not.
 */
async function fixturesIntact(world: World): Promise<string | undefined> {
  const checks: [string, string, string[]][] = [
    [world.keys.A, world.database, world.tables.map((t) => t.name)],
    [world.keys.B, world.foreignDatabase, world.foreignTables],
  ];
  for (const [authorization, database, tables] of checks) {
    try {
      const res = await fetch(`${world.strata.url}/v1/list_tables/${database}`, {
        headers: { authorization },
        signal: AbortSignal.timeout(5000),
      });
      const body = (await res.json()) as { tables?: { table_name: string }[] };
      if (res.status === 503) continue;
      if (res.status !== 200) return `list_tables of ${database} answered ${res.status}: ${JSON.stringify(body)}`;
      const names = new Set(body.tables?.map((t) => t.table_name));
      const lost = tables.filter((t) => !names.has(t));
      if (lost.length > 0) return `tables of ${database} gone: ${lost.join(', ')}`;
    } catch (err) {
      return `list_tables of ${database} failed: ${(err as Error).message}`;
    }
  }
  return undefined;
}

/** The cases being sent right now, for a report when the process is about to die. */
export const inFlight = new Map<number, FuzzCase>();

/** Sends `count` generated requests at the world's server, `concurrency` at a time, and judges every answer. */
export async function runFuzz(world: World, options: FuzzOptions): Promise<FuzzReport> {
  const caseAt = caseSource(world, options.seed);
  const target = targetOf(world.strata.url, options.concurrency);
  const secrets: Secrets = {
    A: world.keys.A.replace(/^Bearer /, ''),
    B: world.keys.B.replace(/^Bearer /, ''),
  };
  const indices = options.only ?? Array.from({ length: options.count }, (_, i) => i);
  const report: FuzzReport = {
    seed: options.seed,
    sent: 0,
    durationMs: 0,
    tally: new Map(),
    failures: [],
    serverProblems: [],
    rss: { start: treeRss(), peak: 0, end: 0 },
    healthChecks: 0,
  };
  report.rss.peak = report.rss.start;
  const sampleRss = () => {
    const rss = treeRss();
    report.rss.peak = Math.max(report.rss.peak, rss);
    return rss;
  };
  const sampler = setInterval(sampleRss, 250);
  const started = performance.now();
  let next = 0;
  let healthRunning: Promise<void> | undefined;

  const checkServer = async () => {
    report.healthChecks++;
    const problem = await healthy(world.strata.url);
    if (problem !== undefined) report.serverProblems.push(`after ${report.sent} requests: ${problem}`);
    const lost = await fixturesIntact(world);
    if (lost !== undefined && !report.serverProblems.some((p) => p.includes('fixtures'))) {
      report.serverProblems.push(`fixtures lost after ${report.sent} requests: ${lost}`);
    }
    const rss = sampleRss();
    if (rss > options.maxRssBytes && !report.serverProblems.some((p) => p.startsWith('memory'))) {
      report.serverProblems.push(
        `memory: RSS ${mib(rss)} over the bound ${mib(options.maxRssBytes)} after ${report.sent} requests`,
      );
    }
  };

  const worker = async () => {
    for (;;) {
      const slot = next++;
      if (slot >= indices.length) return;
      const index = indices[slot] as number;
      const fuzzCase = caseAt(index);
      inFlight.set(index, fuzzCase);
      const outcome = await send(target, fuzzCase, secrets, options.timeoutMs);
      inFlight.delete(index);
      report.sent++;
      const byStatus = report.tally.get(fuzzCase.route) ?? new Map<string, number>();
      const label = statusLabel(outcome);
      byStatus.set(label, (byStatus.get(label) ?? 0) + 1);
      report.tally.set(fuzzCase.route, byStatus);
      options.trace?.(`${index} ${label} ${traceOf(fuzzCase)}`);
      const problems = problemsOf(fuzzCase, outcome, secrets);
      if (problems.length > 0) {
        const requestId = outcome.headers['x-request-id'];
        const failure: Failure = { index, fuzzCase, outcome, problems };
        const serverError =
          (outcome.statuses[0] ?? 0) >= 500
            ? (serverErrorOf(typeof requestId === 'string' ? requestId : undefined) ?? errorOf(outcome.body))
            : undefined;
        if (serverError !== undefined) failure.serverError = serverError;
        report.failures.push(failure);
      }
      if (report.sent % options.healthEvery === 0 && healthRunning === undefined) {
        healthRunning = checkServer().finally(() => {
          healthRunning = undefined;
        });
      }
      if (options.progress !== undefined && report.sent % 1000 === 0) {
        const s = ((performance.now() - started) / 1000).toFixed(0);
        const m = process.memoryUsage();
        options.progress(
          `${report.sent}/${indices.length} sent, ${s} s, RSS ${mib(sampleRss())} (JS heap ${mib(m.heapUsed)}, ` +
            `external ${mib(m.external)}, children ${mib(treeRss() - m.rss)}), ${report.failures.length} failing`,
        );
      }
    }
  };

  try {
    await Promise.all(Array.from({ length: options.concurrency }, worker));
    await healthRunning;
    await checkServer();
  } finally {
    clearInterval(sampler);
    target.agent.destroy();
  }
  report.durationMs = performance.now() - started;
  report.rss.end = sampleRss();
  return report;
}

export const mib = (bytes: number) => `${Math.round(bytes / 1024 / 1024)} MiB`;
