import { fileURLToPath } from 'node:url';

/**
 * The path of the built module `name` (a worker thread's or child process's entry) beside the module at
 * `metaUrl`: in `dist/` when that module runs from the build, and in the build of it when it runs from the
 * TypeScript sources (the tests), which the tests' global setup makes first.
 */
export function builtModule(metaUrl: string, name: string): string {
  const here = fileURLToPath(metaUrl);
  const folder = here.slice(0, here.lastIndexOf('/') + 1);
  if (!here.endsWith('.ts')) return `${folder}${name}`;
  const at = here.lastIndexOf('/src/');
  return `${here.slice(0, at)}/dist/${folder.slice(at + 5)}${name}`;
}
