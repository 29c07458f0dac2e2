import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './server.js';

/** The built CLI, run exactly as `npx strata` would run it. */
export const CLI = join(import.meta.dirname, '..', '..', 'dist', 'cli.js');

const run = promisify(execFile);

/** `strata ARGS...` run to its end, with `env` over the test's environment. */
export const cli = (args: readonly string[], env: Record<string, string> = {}) =>
  run(process.execPath, [CLI, ...args], { env: { ...process.env, ...env } });

/** A `strata serve` process. */
export interface Served {
  url: string;
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** `strata serve` as its own process, as a user would start it; resolves once it listens. */
export async function serveProcess(dataDir: string, env: Record<string, string> = {}, port?: number): Promise<Served> {
  port ??= await freePort();
  const child = spawn(process.execPath, [CLI, 'serve', '--data-dir', dataDir, '--port', String(port)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 400 && !output.includes('Server listening') && child.exitCode === null; i++) {
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  if (!output.includes('Server listening')) {
    child.kill('SIGKILL');
    throw new Error(`serve did not start:\n${output}`);
  }
  return { url, child, output: () => output, exited };
}
