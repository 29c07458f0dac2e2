import type { ApiKeyRecord } from './store.js';

/** API keys a node remembers. */
const KEYS_CACHED = 10_000;

/**
 * Live API keys a node remembers while it hears every revocation: every revocation is announced by the transaction
 * that makes it, so a remembered key is dropped as soon as the notice arrives, and all of them whenever the
 * listener is not connected (a notice may have been missed). Unknown and revoked keys are always looked up.
 */
export class KeyCache {
  /** Whether the listener is connected and listening: only then can a remembered key be trusted. */
  private listening = false;
  private readonly keys = new Map<string, ApiKeyRecord>();
  /**
   * Moves on with every revocation heard and every start or break of the listener. A lookup remembers its key
   * only if it did not move while the lookup ran: a read that began before a revocation can answer after the
   * notice was handled, and would otherwise put the revoked key back.
   */
  private generation = 0;

  /** `hold` is awaited by a lookup after the store answered it, before the key may be remembered (tests only). */
  constructor(private readonly hold?: () => Promise<void>) {}

  async find(hash: string, read: () => Promise<ApiKeyRecord | undefined>): Promise<ApiKeyRecord | undefined> {
    const cached = this.listening ? this.keys.get(hash) : undefined;
    if (cached !== undefined) return cached;
    const generation = this.generation;
    const key = await read();
    if (key === undefined) return undefined;
    await this.hold?.();
    if (key.revokedMs === null && this.listening && generation === this.generation) {
      if (this.keys.size >= KEYS_CACHED) this.keys.delete(this.keys.keys().next().value as string);
      this.keys.set(hash, key);
    }
    return key;
  }

  revoked(hash: string): void {
    this.generation++;
    this.keys.delete(hash);
  }

  connected(): void {
    this.listening = true;
    this.generation++;
  }

  disconnected(): void {
    this.listening = false;
    this.generation++;
    this.keys.clear();
  }
}
