/**
 * Every error code the service answers with (docs/api.md): clients branch on the code, people read the message.
 * Codes are stable; their sentences may change. The OpenAPI document and `docs/errors.md` list this table.
 */
export const ERROR_CODES = {
  bad_request: 'The body, query string, name, schema, predicate or SQL is invalid; the message names what.',
  body_too_complex: "The body's rows would take too much memory once converted to the table's columns.",
  result_too_large: 'The result is larger than STRATA_MAX_RESULT_BYTES; ask for fewer rows or columns.',
  unauthorized: 'The API key is missing, malformed, unknown or revoked.',
  unknown_database: 'No database of that name in this account (another account’s is answered the same).',
  unknown_table: 'No table of that name in the database.',
  unknown_account: 'The key’s account no longer exists.',
  admin_disabled: 'The node was started without STRATA_ADMIN_KEY: its admin routes are off.',
  not_found: 'Nothing of that name.',
  no_route: 'No route for this method and path.',
  not_acceptable: 'The Accept header allows none of the encodings the endpoint produces.',
  timeout: 'The request ran over its time limit.',
  sql_timeout: 'The SQL query ran over STRATA_SQL_TIMEOUT_MS.',
  request_timeout: 'The request did not arrive in time.',
  conflict: 'The request conflicts with the current state.',
  database_exists: 'The account already has a database of that name.',
  table_exists: 'The database already has a table of that name.',
  location_in_use: 'Another database binds the same storage location, or one inside or around it.',
  database_not_verified: 'The database’s storage binding was never verified: call its verify endpoint.',
  database_verify_failed: 'The last storage verification failed; fix the grant and verify again.',
  verification_running: 'A verification of this database is already running.',
  catalog_change_in_flight: 'Another table creation or drop of this database was being applied; reissue it.',
  write_conflict: 'Another write to the table committed first and this one was not applied; send it again.',
  idempotency_in_flight: 'A request with the same Idempotency-Key is still running; retry after Retry-After.',
  idempotency_key_reused: 'The Idempotency-Key was used for a different request (route, table, predicate or body).',
  idempotency_unresolvable:
    'Whether the first write with this Idempotency-Key committed can no longer be told (its table versions were pruned).',
  row_count_mismatch: 'An update’s replacement rows do not number the rows its predicate matched.',
  duplicate_key: 'A write would give a primary key value a second row (the table holds it, or the rows hold it twice).',
  limit_exceeded: 'A tenant limit: a count (409) or a rate or concurrency (429, Retry-After).',
  body_too_large: 'The body is larger than STRATA_MAX_BODY_BYTES.',
  uri_too_long: 'A segment of the request path is too long.',
  unsupported_media_type: 'The Content-Type is not one the endpoint takes.',
  unprocessable: 'The request is well formed but cannot be carried out.',
  binding_refused: 'The storage binding is refused: provider off, endpoint not allowed, bucket or prefix invalid.',
  verification_failed: 'Storage verification failed at a step; `provider_code` carries the store’s own code.',
  rate_limited: 'The key made more requests this minute than STRATA_RATE_LIMIT_PER_MINUTE.',
  auth_rate_limited: 'Too many failed authentications from this address this minute.',
  headers_too_large: 'The request headers are larger than the server accepts.',
  internal: 'A fault of the service itself; the message carries only the request id.',
  unavailable: 'The service cannot answer now; retry after Retry-After.',
  database_activating: 'The database’s workers are being placed; retry after Retry-After.',
  database_deleting: 'The database is being deleted; once it is, it is unknown_database.',
  no_capacity: 'No worker capacity is free on this node; retry after Retry-After.',
  storage_unavailable: 'The bucket could not be reached; retry after Retry-After.',
  index_behind:
    'The table holds STRATA_MAX_UNINDEXED_ROWS rows its indexes do not cover yet; upkeep is folding them in: retry after Retry-After.',
  control_store_unavailable: 'The control store (PostgreSQL) is not answering; retry after Retry-After.',
  sql_engine_closing: 'The database’s SQL engine closed (its database was deleted or let go); retry.',
  sql_memory_busy:
    'The node’s memory for SQL copies (STRATA_SQL_NODE_MEMORY_MB) is held by databases running statements; retry after Retry-After.',
  converter_out_of_memory: 'Converting a request’s rows needed more memory than a request may use; retry.',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/** An error body (docs/api.md). */
export const errorBody = (error: string, code: ErrorCode): { error: string; code: ErrorCode } => ({ error, code });

/**
 * What went wrong, in the terms of the request rather than of a protocol: `http/errors.ts` is the one place a kind
 * becomes an HTTP status.
 */
export type ErrorKind =
  | 'invalid'
  | 'unauthorized'
  | 'not_found'
  | 'not_acceptable'
  | 'timeout'
  | 'conflict'
  /** A count the tenant may not exceed (tables, databases). */
  | 'limit'
  | 'too_large'
  | 'unprocessable'
  /** A rate or a concurrency the tenant is over for now: retry after a while. */
  | 'throttled'
  | 'unavailable';

const DEFAULT_CODES: Readonly<Record<ErrorKind, ErrorCode>> = {
  invalid: 'bad_request',
  unauthorized: 'unauthorized',
  not_found: 'not_found',
  not_acceptable: 'not_acceptable',
  timeout: 'timeout',
  conflict: 'conflict',
  limit: 'limit_exceeded',
  too_large: 'body_too_large',
  unprocessable: 'unprocessable',
  throttled: 'rate_limited',
  unavailable: 'unavailable',
};

export interface ErrorOptions {
  /** The stable code; the kind's general one when absent. */
  code?: ErrorCode;
  /** Seconds until a retry may succeed (`Retry-After`). */
  retryAfterS?: number;
  /** Extra fields of the error body beside `error` and `code`. */
  details?: Readonly<Record<string, unknown>>;
}

/**
 * The service's typed errors: a kind, a stable code from `ERROR_CODES`, and a message that names what went wrong.
 * Engines and the control layer throw these and never see a reply or a status.
 */
export class StrataError extends Error {
  readonly code: ErrorCode;
  readonly retryAfterS: number | undefined;
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(
    readonly kind: ErrorKind,
    message: string,
    options: ErrorOptions = {},
  ) {
    super(message);
    this.name = new.target.name;
    this.code = options.code ?? DEFAULT_CODES[kind];
    this.retryAfterS = options.retryAfterS;
    this.details = options.details;
  }
}

type CodeOnly = Pick<ErrorOptions, 'code'>;

export class BadRequest extends StrataError {
  constructor(message: string, options: CodeOnly = {}) {
    super('invalid', message, options);
  }
}

export class Unauthorized extends StrataError {
  constructor(message = 'missing or invalid API key', options: ErrorOptions = {}) {
    super('unauthorized', message, options);
  }
}

export class NotFound extends StrataError {
  constructor(what: string, options: CodeOnly = {}) {
    super('not_found', `${what} not found`, options);
  }
}

export class Conflict extends StrataError {
  constructor(message: string, options: Pick<ErrorOptions, 'code' | 'retryAfterS'> = {}) {
    super('conflict', message, options);
  }
}

export class RequestTimeout extends StrataError {
  constructor(message: string, options: CodeOnly = {}) {
    super('timeout', message, options);
  }
}

export class Unprocessable extends StrataError {
  constructor(message: string, options: Pick<ErrorOptions, 'code' | 'details'> = {}) {
    super('unprocessable', message, options);
  }
}

/** A tenant's count limit (docs/api.md): as many as it may have already exist. */
export class LimitExceeded extends StrataError {
  constructor(message: string) {
    super('limit', message, { code: 'limit_exceeded' });
  }
}

/** A tenant's rate or concurrency limit (docs/api.md): over it for now, retry after `retryAfterS`. */
export class Throttled extends StrataError {
  constructor(message: string, options: { retryAfterS: number; code?: ErrorCode }) {
    super('throttled', message, { code: 'limit_exceeded', ...options });
  }
}

/** A reply that would encode to more bytes than `STRATA_MAX_RESULT_BYTES` allows. */
export class ResultTooLarge extends StrataError {
  constructor(capBytes: number, what = 'the result') {
    super(
      'invalid',
      `${what} is larger than the ${capBytes}-byte cap on replies (STRATA_MAX_RESULT_BYTES); select fewer rows or columns`,
      { code: 'result_too_large' },
    );
  }
}

export class Unavailable extends StrataError {
  constructor(message: string, options: Pick<ErrorOptions, 'code' | 'retryAfterS'> = {}) {
    super('unavailable', message, { retryAfterS: 1, ...options });
  }
}
