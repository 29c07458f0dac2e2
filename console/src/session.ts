import { Strata } from '@strata/client';

/**
 * The tab's API key lives in sessionStorage only: it ends with the tab, is never put in a URL or a cookie, and
 * goes to the server as the bearer header of each API call the client makes.
 */
const KEY = 'strata.apiKey';

export function storedKey(): string | undefined {
  return sessionStorage.getItem(KEY) ?? undefined;
}

export function storeKey(key: string): void {
  sessionStorage.setItem(KEY, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY);
}

/**
 * A client of this origin. Retries are few: a person is waiting, and a refusal is better shown than hidden
 * behind a minute of backoff.
 */
export function clientOf(key: string): Strata {
  return new Strata({
    url: location.origin,
    apiKey: key,
    retry: { retries: 2, maxWaitMs: 5000, behindWaitMs: 60_000 },
    timeoutMs: 120_000,
  });
}
