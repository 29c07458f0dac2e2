// `npm start` builds only when a source file is newer than the build, so a fresh clone just works.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

const built = existsSync('dist/cli.js') ? statSync('dist/cli.js').mtimeMs : 0;
const client = existsSync('packages/client/dist/index.js') ? statSync('packages/client/dist/index.js').mtimeMs : 0;
// The CLI's client commands run on the client package, built first.
if (client === 0 || newest('packages/client/src') > client) {
  execFileSync('npx', ['tsc', '-p', 'packages/client/tsconfig.json'], { stdio: 'inherit' });
}
if (built === 0 || newest('src') > built) {
  execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
}
// The web console bundles the client's sources with its own.
const page = existsSync('dist/console/index.html') ? statSync('dist/console/index.html').mtimeMs : 0;
if (page === 0 || Math.max(newest('console'), newest('packages/client/src')) > page) {
  execFileSync('npx', ['vite', 'build', '--config', 'console/vite.config.ts', '--logLevel', 'warn'], {
    stdio: 'inherit',
  });
}
