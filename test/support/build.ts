import { execFileSync } from 'node:child_process';

/** The CLI tests run the built `dist/cli.js`, exactly as `npx strata` would. */
export default function setup(): void {
  execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
}
