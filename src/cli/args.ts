import { parseArgs } from 'node:util';
import { Strata, StrataAdmin } from '@strata/client';
import { UsageError } from './errors.js';

/** The options every client command takes (usage.ts, client options). */
const COMMON = {
  url: { type: 'string' },
  'api-key': { type: 'string' },
  database: { type: 'string' },
  table: { type: 'string' },
  format: { type: 'string' },
} as const;

export type Options = Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }>;
export type Parsed = { values: Record<string, string | boolean | string[] | undefined>; positionals: string[] };

/** A command's arguments, or a usage error in our words (Node's name the option with unbalanced quotes). */
export function parse(args: string[], extra: Options): Parsed {
  try {
    return parseArgs({ args, options: { ...COMMON, ...extra }, allowPositionals: true, strict: true }) as Parsed;
  } catch (err) {
    const { code, message } = err as { code?: string; message: string };
    const option = /'(-[^']*)'/.exec(message)?.[1];
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option !== undefined) {
      throw new UsageError(`unknown option ${option}`);
    }
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option !== undefined) {
      throw new UsageError(`option ${option.split(',')[0]} needs a value`);
    }
    throw new UsageError(message);
  }
}

export function required(parsed: Parsed, name: string): string {
  const value = parsed.values[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

export const text = (parsed: Parsed, name: string) => parsed.values[name] as string | undefined;
export const texts = (parsed: Parsed, name: string) => (parsed.values[name] as string[] | undefined) ?? [];

/** The service's address, from --url, STRATA_URL or the default. */
export const urlOf = (parsed: Parsed) => text(parsed, 'url') ?? process.env.STRATA_URL ?? 'http://127.0.0.1:8080';

export function clientOf(parsed: Parsed): Strata {
  const apiKey = text(parsed, 'api-key') ?? process.env.STRATA_API_KEY;
  if (apiKey === undefined || apiKey === '')
    throw new UsageError('an API key is required: --api-key or STRATA_API_KEY');
  // A load outlasts a restart of the service: a dead node's hold on a request's key lapses within seconds.
  return new Strata({ url: urlOf(parsed), apiKey, retry: { retries: 30, baseDelayMs: 250, maxDelayMs: 5000 } });
}

/** A client of the node's admin routes, with its admin key from --admin-key or STRATA_ADMIN_KEY. */
export function adminOf(parsed: Parsed): StrataAdmin {
  const adminKey = text(parsed, 'admin-key') ?? process.env.STRATA_ADMIN_KEY;
  if (adminKey === undefined || adminKey === '')
    throw new UsageError("the node's admin key is required: --admin-key or STRATA_ADMIN_KEY");
  return new StrataAdmin({ url: urlOf(parsed), adminKey });
}

/** A whole number of at least `min` from an option, or the default. */
export function wholeNumber(parsed: Parsed, name: string, fallback: number, min = 1): number {
  const raw = text(parsed, name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`--${name} must be a whole number${min > 0 ? ` of at least ${min}` : ''}, got "${raw}"`);
  }
  return value;
}
