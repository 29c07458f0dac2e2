/**
 * Codes of the failures the client decides itself, beside the service's own codes (its docs/errors.md): no
 * answer at all (`unreachable`), no whole answer within `timeoutMs` (`timeout`), or an answer longer than
 * `maxResponseBytes` (`response_too_large`).
 */
export type ClientErrorCode = 'unreachable' | 'timeout' | 'response_too_large';

/** A refusal from the service, or a request that got no whole answer from it. */
export class StrataError extends Error {
  override readonly name = 'StrataError';

  constructor(
    message: string,
    /** The HTTP status; 0 when no whole answer came (see `code`). */
    readonly status: number,
    /** The service's stable error code (docs/errors.md) when it answered, else a `ClientErrorCode`. */
    readonly code: string | undefined,
    /** How long the service asked to wait before retrying, when it did. */
    readonly retryAfterMs: number | undefined,
    options?: ErrorOptions,
    /**
     * What else the refusal's body says beside its message and code: a failed verification's `checks`, `step` and
     * `provider_code`, say (the service's docs/api.md). Empty for the client's own failures.
     */
    readonly details: Readonly<Record<string, unknown>> = {},
  ) {
    super(message, options);
  }
}

/** Why a request failed, with the system's reason beneath fetch's own ("fetch failed (connect ECONNREFUSED …)"). */
const reasonOf = (err: unknown): string =>
  err instanceof Error
    ? err.cause instanceof Error
      ? `${err.message} (${err.cause.message})`
      : err.message
    : String(err);

/** The client's own failures, each worded once. */
export const clientErrors = {
  unreachable: (url: string, cause: unknown) =>
    new StrataError(`cannot reach ${url}: ${reasonOf(cause)}`, 0, 'unreachable', undefined, { cause }),
  timeout: (url: string, timeoutMs: number) =>
    new StrataError(
      `${url} gave no whole answer within ${timeoutMs} ms (timeoutMs); the request was abandoned`,
      0,
      'timeout',
      undefined,
    ),
  responseTooLarge: (url: string, maxResponseBytes: number, declared?: number) =>
    new StrataError(
      declared === undefined
        ? `the answer from ${url} passed maxResponseBytes (${maxResponseBytes} bytes); it was abandoned unread`
        : `the answer from ${url} declares ${declared} bytes, more than maxResponseBytes (${maxResponseBytes}); it was not read`,
      0,
      'response_too_large',
      undefined,
    ),
};
