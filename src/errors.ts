/**
 * The service's typed errors. Each carries its HTTP status; `http/errors.ts` is the one place that turns
 * them into responses. Engines and the control layer throw these and never see a Fastify reply.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Seconds for `Retry-After`, on the statuses that invite a retry. */
    readonly retryAfterS?: number,
    /** Extra fields merged into the error body beside `error`. */
    readonly details?: Readonly<Record<string, unknown>>,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class BadRequest extends ApiError {
  constructor(message: string) {
    super(400, message);
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
  constructor(message: string, retryAfterS?: number) {
    super(409, message, retryAfterS);
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

export class Unavailable extends ApiError {
  constructor(message: string, retryAfterS = 1) {
    super(503, message, retryAfterS);
  }
}
