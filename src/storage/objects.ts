/** A provider's failure, carrying the provider's own error code (e.g. `NoSuchBucket`, `EACCES`). */
export class StorageError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'StorageError';
  }
}

/** The few object operations the service itself performs in a bucket; keys are relative to the binding prefix. */
export interface ObjectStore {
  /** Proves the identity the store will use: resolves credentials (assuming a role) or checks the folder. */
  checkCredentials(): Promise<void>;
  put(key: string, bytes: Uint8Array): Promise<void>;
  /** An object's bytes; past `maxBytes` (when given), a `StorageError` `TooLarge` before more is read. */
  get(key: string, maxBytes?: number): Promise<Uint8Array>;
  /** Keys under a relative prefix, relative to the binding prefix. */
  list(prefix: string): Promise<string[]>;
  /** `refused` when the key already existed; `written` when the store wrote over it or created it. */
  putIfAbsent(key: string, bytes: Uint8Array): Promise<'refused' | 'written'>;
  delete(key: string): Promise<void>;
  /** Deletes every object under a relative prefix; returns how many went. */
  deletePrefix(prefix: string): Promise<number>;
}

/** An object larger than its reader takes. */
export function tooLarge(key: string, maxBytes: number): StorageError {
  return new StorageError('TooLarge', `${key} is larger than ${maxBytes} bytes`);
}

/** Turns anything a provider throws into a `StorageError` with the provider's code. */
export function asStorageError(err: unknown): StorageError {
  if (err instanceof StorageError) return err;
  if (err instanceof Error) {
    const withCode = err as Error & { Code?: unknown; code?: unknown };
    const code =
      typeof withCode.Code === 'string' ? withCode.Code : typeof withCode.code === 'string' ? withCode.code : err.name;
    return new StorageError(code, err.message || code);
  }
  return new StorageError('Unknown', String(err));
}

/** The one sentence every failure below the S3 protocol is reported with (see `asRemoteStorageError`). */
export const ENDPOINT_UNREACHABLE = 'the storage endpoint could not be reached';

/**
 * Turns what the AWS SDK throws into a `StorageError` that is safe to show the customer. A reply of the
 * provider (it carries an HTTP status) keeps its code and message (`AccessDenied`, `NoSuchBucket`, …).
 * Anything that never got a reply — refused, reset or timed-out connections, DNS, TLS, an endpoint refused at
 * connect — becomes `EndpointUnreachable` with a fixed sentence: the low-level text (`ECONNREFUSED
 * 10.0.0.5:443`, certificate names) would make verification an oracle for probing the server's network.
 */
export function asRemoteStorageError(err: unknown): StorageError {
  if (err instanceof StorageError) return err;
  const status = (err as { $metadata?: { httpStatusCode?: unknown } } | null)?.$metadata?.httpStatusCode;
  // The SDK's "no credentials anywhere" comes from the server's own configuration, not from the endpoint.
  const ownCredentials = err instanceof Error && err.name === 'CredentialsProviderError';
  if (typeof status === 'number' || ownCredentials) return asStorageError(err);
  return new StorageError('EndpointUnreachable', ENDPOINT_UNREACHABLE);
}
