/**
 * What one fuzz case is. Keys are never part of a case: a case names which account's key it sends, and the
 * runner fills it in, so a case prints and replays without a secret.
 */

/** The secret of an account's key (`sk_…`), wherever a case wants to write it. */
export const SECRET_A = '{{SECRET_A}}';
export const SECRET_B = '{{SECRET_B}}';

export type Account = 'A' | 'B';

export type Auth =
  /** `Authorization: Bearer <the account's key>`. */
  | { kind: 'key'; account: Account }
  /** This header, verbatim; it may hold `SECRET_A`/`SECRET_B` (a key in an odd spelling). */
  | { kind: 'header'; value: string }
  | { kind: 'none' };

export interface HttpCase {
  kind: 'http';
  /** The route it aims at, for the table of counts: `POST /v1/append`. */
  route: string;
  method: string;
  /** Exactly as sent: already percent-encoded, query included. */
  path: string;
  auth: Auth;
  headers: Record<string, string>;
  body?: Uint8Array;
  /** How the case was made (which field was mutated, how an Arrow stream was damaged). */
  note: string;
  /** The path names a database of the other account than the key's. */
  foreign: boolean;
}

export interface RawCase {
  kind: 'raw';
  route: string;
  /** Latin-1 text written to a fresh TCP connection, one write per chunk; may hold `SECRET_A`/`SECRET_B`. */
  chunks: string[];
  /** Whether to end our side after writing (for requests left unfinished on purpose). */
  halfClose: boolean;
  note: string;
  /** Why no response on this connection may be 2xx (no key, the other account's database), if so. */
  forbid2xx: string | undefined;
  /** `forbid2xx` is about the last of several pipelined requests only. */
  onlyLastForbidden?: boolean;
}

export type FuzzCase = HttpCase | RawCase;

/** Whether a case carries a real key anywhere (its Authorization header, or any of a raw request's bytes). */
export function carriesKey(c: FuzzCase): boolean {
  if (c.kind === 'raw') return c.chunks.some((chunk) => chunk.includes(SECRET_A) || chunk.includes(SECRET_B));
  if (c.auth.kind === 'key') return true;
  return c.auth.kind === 'header' && (c.auth.value.includes(SECRET_A) || c.auth.value.includes(SECRET_B));
}

/** Paths anyone may call without a key (API.md §1), with or without a query string. */
export function isPublicPath(path: string): boolean {
  const bare = path.split('?')[0] ?? '';
  return ['/healthz', '/readyz', '/metrics', '/v1/openapi.json'].includes(bare) || /^\/docs(\/|$)/.test(bare);
}
