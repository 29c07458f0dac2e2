import { join } from 'node:path';
import type { Binding } from './binding.js';
import { prefixSegments } from './binding.js';
import { LocalObjects } from './local.js';
import { asRemoteStorageError, type ObjectStore } from './objects.js';
import { bucketsDir, openObjects, type StorageEnv } from './open.js';

/** Where a database's Lance datasets live and how Lance reaches them. */
export interface LanceLocation {
  /** The folder (or s3:// URI) holding `<table_id>.lance` datasets. */
  uri: string;
  storageOptions: Record<string, string>;
  /** When the credentials in `storageOptions` stop working; the worker reconnects before then. */
  expiresAtMs: number | undefined;
  /** How responses name a dataset's location, without server paths: `s3://…` or `local://bucket/…`. */
  publicUri: string;
  /** Whether `uri` is a local folder, whose writes Strata must make durable itself (`DurableFolder`). */
  local: boolean;
  /** The same place's objects as the service reads them itself, by keys under `TABLES_PREFIX` (`<table_id>.lance/…`). */
  objects: ObjectStore;
}

export const TABLES_PREFIX = 'tables';

/** Where the service keeps its own objects beside a table's dataset (never inside it, which is Lance's). */
export const asidePrefix = (tableId: string): string => `_strata/tables/${tableId}/`;

export async function lanceLocation(binding: Binding, env: StorageEnv, sessionName: string): Promise<LanceLocation> {
  const tail = [...prefixSegments(binding.prefix), TABLES_PREFIX];
  if (binding.provider === 'local') {
    const objects = new LocalObjects(bucketsDir(env), binding);
    // Creates the folder and proves no part of the path is a link, as verification did.
    await objects.checkCredentials();
    return {
      uri: join(bucketsDir(env), binding.bucket, ...tail),
      storageOptions: {},
      expiresAtMs: undefined,
      publicUri: `local://${[binding.bucket, ...tail].join('/')}`,
      local: true,
      objects,
    };
  }
  // Re-checks the identity and the endpoint. Lance's object store connects by itself (its own Rust HTTP client
  // and DNS), so unlike `S3Objects` its connections cannot be pinned to the checked address. Residual risk:
  // a host that answers a public address to this check and an internal one to Lance (DNS rebinding, or a
  // record changed while a worker holds its connection, which re-resolves on every new connection until the
  // worker reconnects) gets Lance's signed S3 requests sent to that internal address. Each open narrows the
  // window to one check; closing it needs an egress rule (deny private ranges to the server) or an endpoint
  // Lance reaches only through a proxy that does the same check.
  const objects = await openObjects(binding, env, sessionName);
  const { bindingCredentials } = await import('./s3.js');
  const provider = bindingCredentials(binding, env.aws, sessionName);
  const options: Record<string, string> = { aws_region: binding.region };
  let expiresAtMs: number | undefined;
  if (provider !== undefined) {
    try {
      const creds = await provider();
      options.aws_access_key_id = creds.accessKeyId;
      options.aws_secret_access_key = creds.secretAccessKey;
      if (creds.sessionToken !== undefined) options.aws_session_token = creds.sessionToken;
      expiresAtMs = creds.expiration?.getTime();
    } catch (err) {
      throw asRemoteStorageError(err);
    }
  }
  if (binding.endpoint !== null) {
    options.aws_endpoint = binding.endpoint;
    options.aws_virtual_hosted_style_request = 'false';
    if (binding.endpoint.startsWith('http://')) options.allow_http = 'true';
  }
  if (binding.requesterPays) options.aws_request_payer = 'true';
  const uri = `s3://${[binding.bucket, ...tail].join('/')}`;
  return { uri, storageOptions: options, expiresAtMs, publicUri: uri, local: false, objects };
}
