import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const file = (name: string) => `test/${name}.test.ts`;

/** Pure functions: no build, no PostgreSQL, no Strata server. `npm run test:unit` (about 25 s here). */
const UNIT = [
  'arrow',
  'client-hostile',
  'client-types',
  'config',
  'configuration-docs',
  'digest-property',
  'expansion',
  'fresh-rows',
  'fusion-property',
  'index-registry',
  'text-analyzer',
  'ipc-check',
  'layers',
  'load-groups',
  'load-types',
  'predicate-parser',
  'row-keys',
  'search-plan',
  'sql-columns',
  'sql-ingest',
  'sql-memory-accounting',
  'ssrf',
  'table-changes',
  'vector-matrix',
  'write-intent',
].map(file);

/**
 * What takes more than about 20 s or runs `strata serve` processes (crashes, several nodes on PostgreSQL, loads,
 * the CLI, the README, the fuzz slice): each file says at its top what it costs and why. `npm run test:slow`.
 */
const SLOW = [
  'cli',
  'cli-output',
  'console',
  'crash',
  'fuzz',
  'idempotency-crash',
  'idempotency-expiry',
  'load',
  'load-files',
  'nodes',
  'nodes-backpressure',
  'nodes-drop',
  'nodes-outage',
  'nodes-purge',
  'nodes-purge-late-commit',
  'nodes-races-bootstrap',
  'nodes-races-drop',
  'nodes-sql-fresh',
  'nodes-upsert',
  'predicates',
  'readme',
  'recovery-history',
  'recovery-nodes',
  'rows-property',
  'sql-memory',
  'upkeep',
].map(file);

/** The built CLI and server (`dist/`, which `strata serve` processes and the JSON thread run) and PostgreSQL. */
const BUILD = 'test/support/build.ts';
const POSTGRES = 'test/support/postgres-global.ts';

export default defineConfig({
  test: {
    setupFiles: ['test/support/setup.ts'],
    testTimeout: 30_000,
    // LanceDB warns on every projected query; the server sets the same at start-up (cli.ts).
    env: { LANCEDB_LOG: 'error' },
    hookTimeout: 60_000,
    // Each file starts its own servers on ephemeral ports; two cores favour few forks. The projects share this pool.
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    projects: [
      {
        extends: true,
        // The client's sources, not its build: a unit run builds nothing.
        resolve: {
          alias: { '@strata/client': fileURLToPath(new URL('packages/client/src/index.ts', import.meta.url)) },
        },
        test: { name: 'unit', include: UNIT },
      },
      {
        extends: true,
        // Through HTTP against the server in the test's own process (and the stores and buckets beside it); every
        // file no other project names. `npm run test:service`.
        test: {
          name: 'service',
          include: ['test/**/*.test.ts'],
          exclude: [...UNIT, ...SLOW],
          globalSetup: [BUILD, POSTGRES],
        },
      },
      {
        extends: true,
        test: { name: 'slow', include: SLOW, globalSetup: [BUILD, POSTGRES] },
      },
    ],
  },
});
