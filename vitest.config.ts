import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/support/setup.ts'],
    globalSetup: ['test/support/build.ts', 'test/support/postgres-global.ts'],
    testTimeout: 30_000,
    // LanceDB warns on every projected query; the server sets the same at start-up (cli.ts).
    env: { LANCEDB_LOG: 'error' },
    hookTimeout: 60_000,
    // Each file starts its own servers on ephemeral ports; two cores favour few forks.
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
