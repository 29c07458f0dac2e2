import { issueKey } from './keys.js';
import type { ControlStore } from './store.js';

const DEFAULT_ACCOUNT = 'default';

/**
 * On an empty control store, gives account `default` a key: the configured bootstrap key, or a new one whose
 * secret is returned so `serve` can print it once. Returns undefined when nothing was created or printed.
 */
export async function bootstrapKey(store: ControlStore, configured: string | undefined): Promise<string | undefined> {
  if ((await store.countKeys()) > 0) return undefined;
  if (configured !== undefined) {
    await issueKey(store, DEFAULT_ACCOUNT, configured);
    return undefined;
  }
  return (await issueKey(store, DEFAULT_ACCOUNT)).secret;
}
