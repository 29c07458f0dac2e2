/**
 * The service's typed errors. Each carries its HTTP status and a stable snake_case `code` (API.md §9: clients
 * branch on the code, people read the message); `http/errors.ts` is the one place that turns them into
 * responses. Engines and the control layer throw these and never see a Fastify reply.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Seconds for `Retry-After`, on the statuses that invite a retry. */
    readonly retryAfterS?: number,
    /** Extra fields merged into the error body beside `error` (a `code` here overrides the default). */
    readonly details?: Readonly<Record<string, unknown>>,
  ) {
    super(message);
    this.name = new.target.name;
  }

  /** The stable code of this error. */
  get code(): string {
    const given = this.details?.code;
    return typeof given === 'string' ? given : (DEFAULT_CODES[this.status] ?? 'error');
  }
}

const DEFAULT_CODES: Readonly<Record<number, string>> = {
  400: 'bad_request',
  401: 'unauthorized',
  404: 'not_found',
  406: 'not_acceptable',
  408: 'timeout',
  409: 'conflict',
  413: 'body_too_large',
  415: 'unsupported_media_type',
  422: 'unprocessable',
  429: 'rate_limited',
  503: 'unavailable',
};

export class BadRequest extends ApiError {
  constructor(message: string, code?: string) {
    super(400, message, undefined, code === undefined ? undefined : { code });
  }
}

export class Unauthorized extends ApiError {
  constructor(message = 'missing or invalid API key') {
    super(401, message);
  }
}

export class NotFound extends ApiError {
  constructor(what: string) {
    super(404, `${what} not found`);
  }
}

export class Conflict extends ApiError {
  constructor(message: string, retryAfterS?: number, code?: string) {
    super(409, message, retryAfterS, code === undefined ? undefined : { code });
  }
}

export class RequestTimeout extends ApiError {
  constructor(message: string) {
    super(408, message);
  }
}

export class Unprocessable extends ApiError {
  constructor(message: string, details?: Readonly<Record<string, unknown>>) {
    super(422, message, undefined, details);
  }
}

/** A tenant limit (API.md §9): counts are `409`, rates and concurrency `429` with `Retry-After`. */
export class LimitExceeded extends ApiError {
  constructor(message: string, retryAfterS?: number) {
    super(retryAfterS === undefined ? 409 : 429, message, retryAfterS, { code: 'limit_exceeded' });
  }
}

/** A reply that would encode to more bytes than `STRATA_MAX_RESULT_BYTES` allows. */
export class ResultTooLarge extends ApiError {
  constructor(capBytes: number, what = 'the result') {
    super(
      400,
      `${what} is larger than the ${capBytes}-byte cap on replies (STRATA_MAX_RESULT_BYTES); select fewer rows or columns`,
      undefined,
      { code: 'result_too_large' },
    );
  }
}

export class Unavailable extends ApiError {
  constructor(message: string, retryAfterS = 1) {
    super(503, message, retryAfterS);
  }
}
