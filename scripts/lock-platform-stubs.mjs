// The npm registry reachable from our machines serves only the linux-x64 builds of platform-specific
// optional packages (biome, rollup, esbuild, …), so `npm install` leaves the other platforms' entries out of
// package-lock.json, and `npm ci` then refuses the lock as out of sync. This adds an entry for each missing
// optional package, marked optional with the os/cpu/libc its name declares, so npm ci skips it on this
// platform exactly as it would with a complete lock. Run it after every `npm install`.
import { readFileSync, writeFileSync } from 'node:fs';

const OS = [
  'android',
  'darwin',
  'freebsd',
  'linux',
  'netbsd',
  'openbsd',
  'sunos',
  'aix',
  'win32',
  'openharmony',
  'wasm32',
  'cygwin',
];
const CPU = ['arm64', 'x64', 'arm', 'ia32', 'ppc64', 's390x', 'riscv64', 'loong64', 'mips64el', 'ppc64le', 'mipsel'];

const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));
const packages = lock.packages;
let added = 0;
for (const [path, entry] of Object.entries(packages)) {
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const base = path === '' ? '' : `${path}/`;
    if (packages[`${base}node_modules/${name}`] !== undefined || packages[`node_modules/${name}`] !== undefined)
      continue;
    const parts = name.split('/').pop().split(/[-_.]/);
    const os = OS.find((o) => parts.includes(o) || (o === 'win32' && parts.includes('windows')));
    const cpu = CPU.find((c) => parts.includes(c) || (c === 'ia32' && parts.includes('x86')));
    if (os === undefined && cpu === undefined) continue;
    packages[`node_modules/${name}`] = {
      version: String(version).replace(/^[\^~]/, ''),
      ...(entry.dev ? { dev: true } : {}),
      optional: true,
      ...(os === undefined ? {} : { os: [os] }),
      ...(cpu === undefined ? {} : { cpu: [cpu] }),
      ...(parts.includes('musl') ? { libc: ['musl'] } : parts.includes('gnu') ? { libc: ['glibc'] } : {}),
    };
    added++;
  }
}
lock.packages = Object.fromEntries(
  Object.entries(packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : 1)),
);
writeFileSync('package-lock.json', `${JSON.stringify(lock, null, 2)}\n`);
console.log(`added ${added} platform stub entries to package-lock.json`);
