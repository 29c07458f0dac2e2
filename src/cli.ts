#!/usr/bin/env node
import { runClientCommand } from './cli/commands.js';
import { allUsage, usageOf, wantsHelp } from './cli/usage.js';
import { ConfigError, flagsToEnv, loadConfig } from './config.js';
import { issueKey } from './control/keys.js';
import { openControlStore } from './control/open.js';
import { serve } from './server.js';

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

/** Bad usage of serve or keys: the message, the command's usage, exit code 2. */
function usageError(command: string, message: string): number {
  process.stderr.write(`strata ${command}: ${message}\n${usageOf(command)}`);
  return 2;
}

async function keys(args: string[]): Promise<number> {
  const verb = args.shift();
  const account = takeOption(args, 'account');
  const id = verb === 'revoke' && args[0] !== undefined && !args[0].startsWith('--') ? args.shift() : undefined;
  if (verb === 'create' && (account === undefined || !/^[A-Za-z0-9_-]{1,128}$/.test(account))) {
    return usageError('keys', 'keys create needs --account NAME (A-Z a-z 0-9 _ -, at most 128 characters)');
  }
  if (!(verb === 'create' || verb === 'list' || (verb === 'revoke' && id !== undefined))) {
    return usageError('keys', 'keys takes create --account NAME, list, or revoke ID');
  }
  const config = loadConfig({ ...process.env, ...flagsToEnv(args) });
  const store = await openControlStore(config);
  try {
    if (verb === 'create' && account !== undefined) {
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
    if (id !== undefined && (await store.revokeKey(id, Date.now()))) {
      process.stdout.write(`revoked ${id}\n`);
      return 0;
    }
    process.stderr.write(`no active key with id ${id}\n`);
    return 1;
  } finally {
    await store.close();
  }
}

async function main(argv: string[]): Promise<number | undefined> {
  const [command, ...rest] = argv;
  if ((command === 'serve' || command === 'keys') && wantsHelp(rest)) {
    process.stdout.write(usageOf(command));
    return 0;
  }
  if (command === 'serve') {
    let env: Record<string, string>;
    try {
      env = flagsToEnv(rest);
    } catch (err) {
      if (err instanceof ConfigError) return usageError('serve', err.message);
      throw err;
    }
    await serve(loadConfig({ ...process.env, ...env }));
    return undefined;
  }
  if (command === 'keys') {
    try {
      return await keys(rest);
    } catch (err) {
      if (err instanceof ConfigError) return usageError('keys', err.message);
      throw err;
    }
  }
  if (command !== undefined && command !== '--help' && command !== '-h' && command !== 'help') {
    const code = await runClientCommand(command, rest);
    if (code !== undefined) return code;
    process.stderr.write(`strata: unknown command "${command}"\n`);
  }
  // A bare `strata` says how to call it rather than starting a server nobody asked for.
  const help = command === '--help' || command === '-h' || command === 'help';
  (help ? process.stdout : process.stderr).write(allUsage());
  return help ? 0 : 2;
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
