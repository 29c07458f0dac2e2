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
  get(key: string): Promise<Uint8Array>;
  /** Keys under a relative prefix, relative to the binding prefix. */
  list(prefix: string): Promise<string[]>;
  /** `refused` when the key already existed; `written` when the store wrote over it or created it. */
  putIfAbsent(key: string, bytes: Uint8Array): Promise<'refused' | 'written'>;
  delete(key: string): Promise<void>;
  /** Deletes every object under a relative prefix; returns how many went. */
  deletePrefix(prefix: string): Promise<number>;
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
