import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Account, ApiKeyRecord, ControlStore } from './store.js';

export const KEY_PATTERN = /^sk_[A-Za-z0-9_-]{32,}$/;

export function hashKey(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** A new key: `sk_` + 43 base64url characters (256 random bits). */
export function newSecret(): string {
  return `sk_${randomBytes(32).toString('base64url')}`;
}

export interface IssuedKey {
  id: string;
  secret: string;
  account: Account;
}

/** What the store keeps of a new live key of an account: its hash, never the secret. */
export function keyRecord(accountId: string, secret: string): ApiKeyRecord {
  const id = `key_${randomUUID().replaceAll('-', '').slice(0, 16)}`;
  return { id, accountId, hash: hashKey(secret), createdMs: Date.now(), revokedMs: null };
}

/** Stores the hash of `secret` (a new one unless given) for the named account; the secret is returned once. */
export async function issueKey(store: ControlStore, accountName: string, secret = newSecret()): Promise<IssuedKey> {
  const account = await store.ensureAccount(accountName);
  const key = keyRecord(account.id, secret);
  await store.insertKey(key);
  return { id: key.id, secret, account };
}

/**
 * The account id a bearer header proves, or undefined. The lookup is by hash, and the final comparison runs
 * in constant time, so neither the timing nor the store reveals how much of a guessed key was right.
 */
export async function authenticate(
  store: ControlStore,
  header: string | undefined,
): Promise<{ accountId: string; keyId: string } | undefined> {
  const match = header === undefined ? null : /^Bearer ([^\s]+)$/i.exec(header.trim());
  const secret = match?.[1];
  if (secret === undefined || !KEY_PATTERN.test(secret)) return undefined;
  const hash = hashKey(secret);
  const key = await store.findKeyByHash(hash);
  if (key === undefined || key.revokedMs !== null) return undefined;
  const ok = timingSafeEqual(Buffer.from(key.hash, 'hex'), Buffer.from(hash, 'hex'));
  return ok ? { accountId: key.accountId, keyId: key.id } : undefined;
}
