/** A refusal from the service, or a request that could not reach it after every retry. */
export class StrataError extends Error {
  override readonly name = 'StrataError';

  constructor(
    message: string,
    /** The HTTP status; 0 when the service could not be reached. */
    readonly status: number,
    /** The service's stable error code (docs/errors.md), when it answered. */
    readonly code: string | undefined,
    /** How long the service asked to wait before retrying, when it did. */
    readonly retryAfterMs: number | undefined,
  ) {
    super(message);
  }
}
