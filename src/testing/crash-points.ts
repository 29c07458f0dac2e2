import type { WriteObserver } from '../engine/writes/service.js';

/**
 * Points where a test server kills itself, to prove what a retry finds after a crash (test/recovery-*.test.ts,
 * test/idempotency-crash.test.ts): after every Nth committed keyed write, before answering it
 * (`STRATA_TEST_CRASH_AFTER_COMMIT_EVERY`), and once every Nth keyed write's intent is recorded, before it commits
 * (`STRATA_TEST_CRASH_BEFORE_COMMIT_EVERY`). Unset, as in production, the write path is told nothing.
 */
export function crashPoints(env: NodeJS.ProcessEnv): WriteObserver {
  const afterCommit = Number(env.STRATA_TEST_CRASH_AFTER_COMMIT_EVERY ?? 0);
  const beforeCommit = Number(env.STRATA_TEST_CRASH_BEFORE_COMMIT_EVERY ?? 0);
  const dieEvery = (every: number): (() => void) | undefined => {
    if (!(every > 0)) return undefined;
    let seen = 0;
    return () => {
      if (++seen % every === 0) process.kill(process.pid, 'SIGKILL');
    };
  };
  return { committed: dieEvery(afterCommit), intentRecorded: dieEvery(beforeCommit) };
}
