import type { FuzzCase } from './cases.js';
import { errorOf } from './checks.js';
import { type Failure, type FuzzReport, mib } from './runner.js';
import type { Outcome } from './send.js';

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…(${text.length} chars)` : text);

/** A body as readable text when it is UTF-8, else as base64; long ones cut. */
function bodyText(bytes: Uint8Array, max = 400): string {
  const text = Buffer.from(bytes).toString('utf8');
  const control = [...text].some((ch) => {
    const code = ch.charCodeAt(0);
    return code < 0x20 && code !== 0x09 && code !== 0x0a && code !== 0x0d;
  });
  const printable = !text.includes('\uFFFD') && !control;
  return printable ? clip(JSON.stringify(text), max) : `base64:${clip(Buffer.from(bytes).toString('base64'), max)}`;
}

/** One case, compactly: enough to send it again by hand. Keys appear as {{SECRET_A}}, never in clear. */
export function describeCase(c: FuzzCase): string {
  if (c.kind === 'raw') {
    const text = c.chunks.join('');
    return [
      `${c.route} (${c.note})${c.halfClose ? ', then half-close' : ''}`,
      `  bytes: ${clip(JSON.stringify(text), 500)}`,
    ].join('\n');
  }
  const auth =
    c.auth.kind === 'key'
      ? `Bearer {{SECRET_${c.auth.account}}}`
      : c.auth.kind === 'header'
        ? JSON.stringify(c.auth.value.slice(0, 120))
        : '(none)';
  const lines = [`${c.method} ${clip(c.path, 300)}`, `  authorization: ${auth}`];
  const headers = Object.entries(c.headers);
  if (headers.length > 0) lines.push(`  headers: ${clip(JSON.stringify(Object.fromEntries(headers)), 300)}`);
  if (c.body !== undefined) lines.push(`  body (${c.body.length} B; ${c.note}): ${bodyText(c.body)}`);
  return lines.join('\n');
}

export function describeOutcome(o: Outcome): string {
  if (o.unsent !== undefined) return `not sent: ${o.unsent}`;
  if (o.statuses.length === 0)
    return `${o.closed === true ? 'closed without an answer' : `no answer: ${o.error}`} after ${Math.round(o.ms)} ms`;
  return `→ ${o.statuses.join(', ')} in ${Math.round(o.ms)} ms: ${bodyText(o.body, 300)}`;
}

/** What makes failures "the same": the problems, the route, and the error's words with numbers and quotes blurred. */
function classOf(f: Failure): string {
  const words = f.serverError ?? errorOf(f.outcome.body) ?? '';
  const blurred = words
    .replace(/"[^"]*"/g, '"…"')
    .replace(/'[^']*'/g, "'…'")
    .replace(/\d+/g, 'N')
    .replace(/\(request id [^)]*\)/, '')
    .slice(0, 140);
  const status = f.outcome.statuses.join(',') || 'none';
  // A fault is told apart by where it happened; a missing header or a badly shaped body, by what was wrong.
  const fault = f.problems.some((p) => /^5\d\d|^no answer|^2xx|^other account|^no key|^account B|^an API key/.test(p));
  return `${f.problems.join('; ')} | ${fault ? f.fuzzCase.route : '*'} | ${status} | ${blurred}`;
}

const sizeOf = (c: FuzzCase) => (c.kind === 'raw' ? c.chunks.join('').length : c.path.length + (c.body?.length ?? 0));

export interface FailureClass {
  key: string;
  count: number;
  /** The smallest request of the class. */
  example: Failure;
  indices: number[];
}

export function failureClasses(failures: readonly Failure[]): FailureClass[] {
  const classes = new Map<string, FailureClass>();
  for (const f of failures) {
    const key = classOf(f);
    const known = classes.get(key);
    if (known === undefined) {
      classes.set(key, { key, count: 1, example: f, indices: [f.index] });
      continue;
    }
    known.count++;
    known.indices.push(f.index);
    if (sizeOf(f.fuzzCase) < sizeOf(known.example.fuzzCase)) known.example = f;
  }
  return [...classes.values()].sort((a, b) => b.count - a.count);
}

function tallyTable(report: FuzzReport): string {
  const statuses = new Set<string>();
  for (const byStatus of report.tally.values()) for (const s of byStatus.keys()) statuses.add(s);
  const columns = [...statuses].sort((a, b) => (Number(a) || 1000) - (Number(b) || 1000) || a.localeCompare(b));
  const rows = [...report.tally.entries()].sort(([a], [b]) => a.localeCompare(b));
  const width = Math.max(5, ...rows.map(([route]) => route.length));
  const cell = (text: string) => text.padStart(Math.max(6, ...columns.map((c) => c.length + 1)));
  const lines = [`${'route'.padEnd(width)}${columns.map(cell).join('')}${cell('total')}`];
  const totals = new Map<string, number>();
  for (const [route, byStatus] of rows) {
    let sum = 0;
    const cells = columns.map((c) => {
      const n = byStatus.get(c) ?? 0;
      sum += n;
      totals.set(c, (totals.get(c) ?? 0) + n);
      return cell(n === 0 ? '.' : String(n));
    });
    lines.push(`${route.padEnd(width)}${cells.join('')}${cell(String(sum))}`);
  }
  const all = [...totals.values()].reduce((a, b) => a + b, 0);
  lines.push(
    `${'total'.padEnd(width)}${columns.map((c) => cell(String(totals.get(c) ?? 0))).join('')}${cell(String(all))}`,
  );
  return lines.join('\n');
}

/** The whole report: counts by route × status, memory, health, and each failure class with its smallest request. */
export function formatReport(report: FuzzReport, maxClasses = 60): string {
  const classes = failureClasses(report.failures);
  const out = [
    `seed ${report.seed}: ${report.sent} requests in ${(report.durationMs / 1000).toFixed(1)} s`,
    '',
    tallyTable(report),
    '',
    `RSS (server in process + its children): start ${mib(report.rss.start)}, peak ${mib(report.rss.peak)}, end ${mib(report.rss.end)}`,
    `health checks: ${report.healthChecks}, failed: ${report.serverProblems.length}`,
    ...report.serverProblems.map((p) => `  ${p}`),
    '',
    `${report.failures.length} failing requests in ${classes.length} classes`,
  ];
  for (const [i, c] of classes.slice(0, maxClasses).entries()) {
    const f = c.example;
    out.push(
      '',
      `#${i + 1} ×${c.count}  ${c.key}`,
      `  case ${f.index} (others: ${
        c.indices
          .filter((n) => n !== f.index)
          .slice(0, 8)
          .join(', ') || 'none'
      })`,
      ...describeCase(f.fuzzCase)
        .split('\n')
        .map((l) => `  ${l}`),
      `  ${describeOutcome(f.outcome)}`,
    );
    if (f.serverError !== undefined) out.push(`  server: ${clip(f.serverError, 400)}`);
  }
  if (classes.length > maxClasses) out.push('', `… ${classes.length - maxClasses} more classes`);
  if (report.failures.length > 0) {
    const replay = classes.map((c) => c.example.index).slice(0, 20);
    out.push('', `replay the examples: FUZZ_SEED=${report.seed} FUZZ_ONLY=${replay.join(',')} npm run fuzz`);
  }
  return out.join('\n');
}
