import { keyRecord, newSecret } from './keys.js';
import type { ControlStore } from './store.js';

const DEFAULT_ACCOUNT = 'default';

/**
 * On an empty control store, gives account `default` a key: the configured bootstrap key, or a new one whose
 * secret is returned so `serve` can print it once. Returns undefined when nothing was created or printed.
 * Nodes started together on one empty store all get here; the store lets exactly one of them make the key.
 */
export async function bootstrapKey(store: ControlStore, configured: string | undefined): Promise<string | undefined> {
  if ((await store.countKeys()) > 0) return undefined;
  const secret = configured ?? newSecret();
  const account = await store.ensureAccount(DEFAULT_ACCOUNT);
  const made = await store.insertFirstKey(keyRecord(account.id, secret));
  return made && configured === undefined ? secret : undefined;
}
