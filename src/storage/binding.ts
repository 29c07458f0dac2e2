import type { Storage } from '../contract/databases.js';
import { Unprocessable } from '../errors.js';
import { endpointRefusal, type Resolver } from './endpoint.js';

/** The code of every refusal of a binding (docs/api.md: 422). */
const BINDING_REFUSED = 'binding_refused';

/** A database's storage binding as stored: defaults applied, prefix normalised (no leading/trailing `/`). */
export type Binding =
  | {
      provider: 's3';
      bucket: string;
      region: string;
      endpoint: string | null;
      prefix: string;
      roleArn: string | null;
      /**
       * The account's external id, passed as `ExternalId` when assuming `roleArn` so a role trusts this account
       * only (confused deputy). Bindings stored before external ids existed lack the field: missing (or '') means
       * AssumeRole is called without one.
       */
      externalId: string;
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
    // %, ? and # would be read as escapes, a query or a fragment once the prefix is part of a URI.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
    if (segment === '' || segment === '.' || segment === '..' || /[\\\u0000-\u001f%?#]/.test(segment)) {
      throw new Unprocessable(
        `storage binding refused: prefix "${prefix}" must be /-separated names without empty, "." or ".." parts, or any of % ? #`,
        { code: BINDING_REFUSED },
      );
    }
  }
  return segments;
}

/**
 * Why S3 through the server's own identity is refused: any account could otherwise bind any bucket that
 * identity reaches (confused deputy).
 */
export const SERVER_IDENTITY_REFUSED =
  'storage binding refused: S3 buckets are reached by assuming the role in "role_arn" (with the account\'s external id); ' +
  "binding through the server's own identity is switched off on this server (STRATA_ALLOW_SERVER_IDENTITY)";

/**
 * Turns a registration's `storage` into a binding, or refuses it with 422 (docs/api.md, §9). `externalId` is the
 * registering account's external id, kept in the binding and sent with every AssumeRole of it.
 */
export async function bindingFrom(storage: Storage, policy: BindingPolicy, externalId: string): Promise<Binding> {
  const prefix = prefixSegments(storage.prefix ?? '').join('/');
  if (storage.provider === 'local') {
    if (!policy.localStorage) {
      throw new Unprocessable('storage binding refused: the local provider is switched off on this server', {
        code: BINDING_REFUSED,
      });
    }
    if (!LOCAL_BUCKET.test(storage.bucket) || storage.bucket === '.' || storage.bucket === '..') {
      throw new Unprocessable(
        `storage binding refused: bucket "${storage.bucket}" must be a folder name of A-Z a-z 0-9 . _ - (not "." or "..")`,
        { code: BINDING_REFUSED },
      );
    }
    return { provider: 'local', bucket: storage.bucket, prefix };
  }
  const roleArn = storage.role_arn ?? null;
  assertIdentityAllowed(roleArn, policy);
  const endpoint = storage.endpoint ?? null;
  if (endpoint !== null) await assertEndpointAllowed(endpoint, policy);
  return {
    provider: 's3',
    bucket: storage.bucket,
    region: storage.region ?? 'us-east-1',
    endpoint,
    prefix,
    roleArn,
    externalId,
    requesterPays: storage.requester_pays ?? false,
  };
}

/**
 * Checked at registration and again before every use, so a binding stored while the server allowed its own
 * identity stops working once it no longer does.
 */
export function assertIdentityAllowed(roleArn: string | null, policy: BindingPolicy): void {
  if (roleArn === null && !policy.allowServerIdentity)
    throw new Unprocessable(SERVER_IDENTITY_REFUSED, { code: BINDING_REFUSED });
}

/**
 * Checked at registration and again before every use, so a host re-pointed to a private address is caught.
 * Connections made by `S3Objects` are pinned besides (`pinnedLookup`); this check is what Lance gets.
 */
export async function assertEndpointAllowed(endpoint: string, policy: BindingPolicy): Promise<void> {
  const refusal = await endpointRefusal(endpoint, policy.allowInsecureEndpoints, policy.resolve);
  if (refusal !== undefined) {
    throw new Unprocessable(`storage binding refused: endpoint "${endpoint}" is not allowed: ${refusal}`, {
      code: BINDING_REFUSED,
    });
  }
}

/** Joins the binding prefix and a key relative to it. */
export function objectKey(binding: Binding, key: string): string {
  return binding.prefix === '' ? key : `${binding.prefix}/${key}`;
}
