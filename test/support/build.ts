import { execFileSync } from 'node:child_process';

/** Set once the build ran in this vitest process: the service and slow projects both ask for it. */
const BUILT = Symbol.for('strata.test.build');
const run = globalThis as { [BUILT]?: true };

/**
 * The tests that need `dist/` run the built `dist/cli.js` (and the client package it uses), exactly as
 * `npx strata` would, and the in-process server's JSON thread runs its built module. Built once per test run,
 * however many projects ask for it; the unit project does not.
 */
export default function setup(): void {
  if (run[BUILT]) return;
  execFileSync('npx', ['tsc', '-p', 'packages/client/tsconfig.json'], { stdio: 'inherit' });
  execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
  // The web console's files, which every server serves at /console/ (test/console.test.ts drives them).
  execFileSync('npx', ['vite', 'build', '--config', 'console/vite.config.ts', '--logLevel', 'warn'], {
    stdio: 'inherit',
  });
  run[BUILT] = true;
}
