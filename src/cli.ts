#!/usr/bin/env node
import { CLIENT_USAGE, runClientCommand, UsageError } from './cli/commands.js';
import { ConfigError, flagsToEnv, loadConfig } from './config.js';
import { issueKey } from './control/keys.js';
import { openControlStore } from './control/open.js';
import { serve } from './server.js';

const USAGE = `usage:
  strata serve [--host H] [--port P] [--data-dir DIR] [--…]   serve the API (flags mirror STRATA_* variables)
  strata keys create --account NAME [--data-dir DIR]        issue a key; prints it once on a line of its own
  strata keys list [--data-dir DIR]                         list keys (ids, accounts, states; never secrets)
  strata keys revoke ID [--data-dir DIR]                    revoke a key at once
${CLIENT_USAGE}`;

/** Pulls `--account NAME` (a keys-only option) out of the flags, leaving the config flags. */
function takeOption(args: string[], name: string): string | undefined {
  const index = args.findIndex((arg) => arg === `--${name}` || arg.startsWith(`--${name}=`));
  if (index < 0) return undefined;
  const arg = args[index] ?? '';
  const inline = arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : undefined;
  const value = inline ?? args[index + 1];
  args.splice(index, inline === undefined ? 2 : 1);
  return value;
}

async function keys(args: string[]): Promise<number> {
  const verb = args.shift();
  const account = takeOption(args, 'account');
  const id = verb === 'revoke' && args[0] !== undefined && !args[0].startsWith('--') ? args.shift() : undefined;
  const config = loadConfig({ ...process.env, ...flagsToEnv(args) });
  const store = await openControlStore(config);
  try {
    if (verb === 'create') {
      if (account === undefined || !/^[A-Za-z0-9_-]{1,128}$/.test(account)) {
        process.stderr.write('keys create needs --account NAME (A-Z a-z 0-9 _ -, at most 128 characters)\n');
        return 2;
      }
      const key = await issueKey(store, account);
      process.stderr.write(`created key ${key.id} for account "${key.account.name}"\n`);
      process.stdout.write(`${key.secret}\n`);
      return 0;
    }
    if (verb === 'list') {
      for (const key of await store.listKeys()) {
        const state = key.revokedMs === null ? 'active' : `revoked ${new Date(key.revokedMs).toISOString()}`;
        process.stdout.write(`${key.id}\t${key.accountName}\t${new Date(key.createdMs).toISOString()}\t${state}\n`);
      }
      return 0;
    }
    if (verb === 'revoke' && id !== undefined) {
      if (await store.revokeKey(id, Date.now())) {
        process.stdout.write(`revoked ${id}\n`);
        return 0;
      }
      process.stderr.write(`no active key with id ${id}\n`);
      return 1;
    }
    process.stderr.write(`${USAGE}\n`);
    return 2;
  } finally {
    await store.close();
  }
}

async function main(argv: string[]): Promise<number | undefined> {
  const [command, ...rest] = argv;
  if (command === 'serve') {
    await serve(loadConfig({ ...process.env, ...flagsToEnv(rest) }));
    return undefined;
  }
  if (command === 'keys') return keys(rest);
  if (command !== undefined) {
    try {
      const code = await runClientCommand(command, rest);
      if (code !== undefined) return code;
    } catch (err) {
      if (!(err instanceof UsageError)) throw err;
      process.stderr.write(`strata ${command}: ${err.message}\n${USAGE}\n`);
      return 2;
    }
  }
  // A bare `strata` says how to call it rather than starting a server nobody asked for.
  process.stderr.write(`${USAGE}\n`);
  return command === '--help' || command === 'help' ? 0 : 2;
}

process.env.LANCEDB_LOG ??= 'error';
main(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(
      `strata: ${err instanceof ConfigError ? err.message : String(err instanceof Error ? err.stack : err)}\n`,
    );
    process.exitCode = 2;
  },
);
