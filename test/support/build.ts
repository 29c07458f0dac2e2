import { execFileSync } from 'node:child_process';

/** The CLI tests run the built `dist/cli.js` (and the client package it uses), exactly as `npx strata` would. */
export default function setup(): void {
  execFileSync('npx', ['tsc', '-p', 'packages/client/tsconfig.json'], { stdio: 'inherit' });
  execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
}
