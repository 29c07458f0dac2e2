import { carriesKey, type FuzzCase, isPublicPath, SECRET_B } from './cases.js';
import { KEEP_BYTES, type Outcome, type Secrets } from './send.js';
import { FOREIGN_CANARY } from './world.js';

/** Routes whose path names a database: a 503 + Retry-After there means activating or no capacity (API.md §3). */
const DATABASE_ROUTE =
  /^(POST|GET|DELETE) \/v1\/(create_table|drop_table|schema|list_tables|append|update|delete|hybrid_search|count|exact_match|token_match|query_sql|databases\/\{name\})/;

const header = (o: Outcome, name: string): string | undefined => {
  const value = o.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/** Whether the request needed a key: a /v1 path that is not public. Raw cases say so themselves. */
function needsKey(c: FuzzCase): boolean {
  return c.kind === 'http' && c.path.startsWith('/v1') && !isPublicPath(c.path);
}

/**
 * Everything wrong with how one request was answered, as short class names (empty when all is well): the
 * suite's invariants first (no 5xx, an answer, no 2xx without a key or across accounts), then the contract's
 * shape of every answer (API.md §1, §8: error bodies, X-Request-Id, WWW-Authenticate, Retry-After).
 */
export function problemsOf(c: FuzzCase, o: Outcome, secrets: Secrets): string[] {
  if (o.unsent !== undefined) return [];
  const leaks = leaksOf(c, o, secrets);
  if (c.kind === 'raw') return [...rawProblems(c, o), ...leaks];
  return [...httpProblems(c, o), ...leaks];
}

/** Whether a case sends account B's key (then B's data may come back). */
function sendsB(c: FuzzCase): boolean {
  if (c.kind === 'raw') return c.chunks.some((chunk) => chunk.includes(SECRET_B));
  return (
    (c.auth.kind === 'key' && c.auth.account === 'B') || (c.auth.kind === 'header' && c.auth.value.includes(SECRET_B))
  );
}

/** Data of account B in an answer to anyone else, or a key written back in any answer. */
function leaksOf(c: FuzzCase, o: Outcome, secrets: Secrets): string[] {
  const text = o.body.toString('latin1');
  const problems: string[] = [];
  if (!sendsB(c) && text.includes(FOREIGN_CANARY)) problems.push("account B's data in an answer to another key");
  if (text.includes(secrets.A) || text.includes(secrets.B)) problems.push('an API key written back in an answer');
  return problems;
}

function httpProblems(c: FuzzCase & { kind: 'http' }, o: Outcome): string[] {
  const problems: string[] = [];
  const status = o.statuses[0];
  if (status === undefined) {
    const error = o.error ?? 'connection closed';
    return [/Parse Error/.test(error) ? `unparseable answer (${error})` : `no answer (${error})`];
  }
  if (status >= 500) {
    const allowed = status === 503 && DATABASE_ROUTE.test(c.route) && header(o, 'retry-after') !== undefined;
    if (!allowed) problems.push(`${status} answer`);
  }
  if (status === 408 && c.route !== 'POST /v1/query_sql') problems.push('408 outside SQL');
  const keyed = carriesKey(c);
  if (status < 300 && status >= 200 && needsKey(c) && !keyed) problems.push('2xx without a key');
  if (c.foreign && ((status >= 200 && status < 300) || [409, 422, 503].includes(status))) {
    problems.push(`other account's database answered ${status}, not 404`);
  }
  // Limits on the request's size, a path that is not valid percent-encoding (the router cannot tell which
  // route it names) and a request the HTTP parser cannot read are answered before anything can be authenticated; an answer without X-Request-Id never
  // reached the app's hooks (that is its own problem, below).
  const reachedApp = header(o, 'x-request-id') !== undefined;
  const unroutable = status === 400 && /not valid percent-encoded|not valid HTTP/.test(o.body.toString('latin1'));
  if (needsKey(c) && !keyed && reachedApp && !unroutable && ![401, 429, 414, 431].includes(status)) {
    problems.push(`no key answered ${status}, not 401`);
  }
  if (status === 401 && header(o, 'www-authenticate') !== 'Bearer')
    problems.push('401 without WWW-Authenticate: Bearer');
  if ((status === 429 || status === 503) && header(o, 'retry-after') === undefined)
    problems.push(`${status} without Retry-After`);
  if (!reachedApp) problems.push('no X-Request-Id');
  if (status >= 400 && c.method !== 'HEAD' && !isErrorBody(o.body)) problems.push('error body is not {"error": "..."}');
  return problems;
}

function isErrorBody(body: Buffer): boolean {
  // Bodies are kept only up to a limit; a long one (an error quoting a huge input) is judged by its start.
  if (body.length >= KEEP_BYTES) return body.subarray(0, 10).toString() === '{"error":"';
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && typeof (parsed as { error?: unknown }).error === 'string';
  } catch {
    return false;
  }
}

function rawProblems(c: FuzzCase & { kind: 'raw' }, o: Outcome): string[] {
  const problems: string[] = [];
  if (o.statuses.length === 0 && o.closed !== true) problems.push(`no answer (${o.error ?? 'open'})`);
  o.statuses.forEach((status, i) => {
    if (status >= 500) problems.push(`${status} answer`);
    const judged = !c.onlyLastForbidden || (i > 0 && i === o.statuses.length - 1);
    if (status >= 200 && status < 300 && c.forbid2xx !== undefined && judged) problems.push(`2xx: ${c.forbid2xx}`);
  });
  return [...new Set(problems)];
}

/** The error sentence of a response body, if it has one. */
export function errorOf(body: Buffer): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    const error = (parsed as { error?: unknown } | null)?.error;
    return typeof error === 'string' ? error : undefined;
  } catch {
    return undefined;
  }
}
