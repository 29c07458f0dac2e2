import type { Storage } from '../contract/databases.js';
import { Unprocessable } from '../errors.js';
import { endpointRefusal, type Resolver } from './endpoint.js';

/** A database's storage binding as stored: defaults applied, prefix normalised (no leading/trailing `/`). */
export type Binding =
  | {
      provider: 's3';
      bucket: string;
      region: string;
      endpoint: string | null;
      prefix: string;
      roleArn: string | null;
      requesterPays: boolean;
    }
  | { provider: 'local'; bucket: string; prefix: string };

export interface BindingPolicy {
  localStorage: boolean;
  allowInsecureEndpoints: boolean;
  /** Whether an S3 binding without `role_arn` may use the server's own identity (`STRATA_ALLOW_SERVER_IDENTITY`). */
  allowServerIdentity: boolean;
  resolve?: Resolver;
}

const LOCAL_BUCKET = /^[A-Za-z0-9._-]+$/;

/** Splits a prefix into segments, refusing anything that could climb out of the bucket or confuse a path. */
export function prefixSegments(prefix: string): string[] {
  const trimmed = prefix.replace(/^\/+|\/+$/g, '');
  if (trimmed === '') return [];
  const segments = trimmed.split('/');
  for (const segment of segments) {
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
    if (segment === '' || segment === '.' || segment === '..' || /[\\\u0000-\u001f]/.test(segment)) {
      throw new Unprocessable(
        `storage binding refused: prefix "${prefix}" must be /-separated names without empty, "." or ".." parts`,
      );
    }
  }
  return segments;
}

/** Turns a registration's `storage` into a binding, or refuses it with 422 (API.md §3). */
export async function bindingFrom(storage: Storage, policy: BindingPolicy): Promise<Binding> {
  const prefix = prefixSegments(storage.prefix ?? '').join('/');
  if (storage.provider === 'local') {
    if (!policy.localStorage) {
      throw new Unprocessable('storage binding refused: the local provider is switched off on this server');
    }
    if (!LOCAL_BUCKET.test(storage.bucket) || storage.bucket === '.' || storage.bucket === '..') {
      throw new Unprocessable(
        `storage binding refused: bucket "${storage.bucket}" must be a folder name of A-Z a-z 0-9 . _ - (not "." or "..")`,
      );
    }
    return { provider: 'local', bucket: storage.bucket, prefix };
  }
  const endpoint = storage.endpoint ?? null;
  if (endpoint !== null) await assertEndpointAllowed(endpoint, policy);
  return {
    provider: 's3',
    bucket: storage.bucket,
    region: storage.region ?? 'us-east-1',
    endpoint,
    prefix,
    roleArn: storage.role_arn ?? null,
    requesterPays: storage.requester_pays ?? false,
  };
}

/** Checked at registration and again before every use, so a host re-pointed to a private address is caught. */
export async function assertEndpointAllowed(endpoint: string, policy: BindingPolicy): Promise<void> {
  const refusal = await endpointRefusal(endpoint, policy.allowInsecureEndpoints, policy.resolve);
  if (refusal !== undefined) {
    throw new Unprocessable(`storage binding refused: endpoint "${endpoint}" is not allowed: ${refusal}`);
  }
}

/** Joins the binding prefix and a key relative to it. */
export function objectKey(binding: Binding, key: string): string {
  return binding.prefix === '' ? key : `${binding.prefix}/${key}`;
}
