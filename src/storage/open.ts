import { join } from 'node:path';
import type { AwsConfig } from '../config.js';
import { assertEndpointAllowed, assertIdentityAllowed, type Binding, type BindingPolicy } from './binding.js';
import { LocalObjects } from './local.js';
import type { ObjectStore } from './objects.js';

/** What the storage layer needs from the server's configuration. */
export interface StorageEnv {
  dataDir: string;
  aws: AwsConfig;
  policy: BindingPolicy;
}

export const bucketsDir = (env: StorageEnv): string => join(env.dataDir, 'buckets');

/**
 * The object store of a binding. The identity and the endpoint are re-checked on every open: the server may no
 * longer allow its own identity, and a host that resolved to a public address at registration may point
 * somewhere else now (the store's connections are pinned to checked addresses besides: `pinnedLookup`). The
 * AWS SDK is loaded on first use: it is a quarter of the server's JS heap (5 of 20 MB), which every garbage
 * collection marks, and local folders never need it.
 */
export async function openObjects(binding: Binding, env: StorageEnv, sessionName: string): Promise<ObjectStore> {
  if (binding.provider === 'local') return new LocalObjects(bucketsDir(env), binding);
  assertIdentityAllowed(binding.roleArn, env.policy);
  if (binding.endpoint !== null) await assertEndpointAllowed(binding.endpoint, env.policy);
  const { bindingCredentials, S3Objects } = await import('./s3.js');
  return new S3Objects(binding, bindingCredentials(binding, env.aws, sessionName), env.policy);
}
