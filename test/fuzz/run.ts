/**
 * `npm run fuzz [count]`: generated requests at a real Strata in this process; prints counts by route × status,
 * memory, and every failure class with its smallest request; exits 1 on any failure.
 *
 *   FUZZ_REQUESTS  how many (default 20000; a number argument wins)
 *   FUZZ_SEED      the seed (default: random, printed first so a run can be replayed)
 *   FUZZ_ONLY      comma-separated case indices: replay just those (same seed)
 *   FUZZ_CONCURRENCY (default 4), FUZZ_MAX_RSS_MB (default 3072), FUZZ_TIMEOUT_MS (default 20000)
 *   FUZZ_TRACE=1   one line per request: index, status, method, path, key
 */
import { describeCase, formatReport } from './report.js';
import { inFlight, runFuzz } from './runner.js';
import { startWorld } from './world.js';

const env = process.env;
const numberArg = process.argv.slice(2).find((a) => /^\d+$/.test(a));
const count = Number(numberArg ?? env.FUZZ_REQUESTS ?? 20_000);
const seed = env.FUZZ_SEED === undefined ? (Date.now() ^ (process.pid << 16)) | 0 : Number(env.FUZZ_SEED);
const only = env.FUZZ_ONLY?.split(',').filter(Boolean).map(Number);

console.log(
  `fuzz: seed ${seed} (replay with FUZZ_SEED=${seed}), ${only === undefined ? `${count} requests` : `cases ${only.join(',')}`}`,
);

// A fault that escapes the server's handlers would end the process; say what was in flight before it does.
const dying = (what: string) => (err: unknown) => {
  console.error(`\nfuzz: ${what} in the process (the server runs in it): ${(err as Error)?.stack ?? String(err)}`);
  console.error(`requests in flight (seed ${seed}):`);
  for (const [index, c] of inFlight) console.error(`case ${index}\n${describeCase(c)}`);
  process.exit(2);
};
process.on('uncaughtException', dying('uncaught exception'));
process.on('unhandledRejection', dying('unhandled rejection'));

const world = await startWorld();
let exitCode = 1;
try {
  const report = await runFuzz(world, {
    count,
    seed,
    concurrency: Number(env.FUZZ_CONCURRENCY ?? 4),
    healthEvery: 200,
    maxRssBytes: Number(env.FUZZ_MAX_RSS_MB ?? 3072) * 1024 * 1024,
    timeoutMs: Number(env.FUZZ_TIMEOUT_MS ?? 20_000),
    ...(only === undefined ? {} : { only }),
    progress: (line) => console.log(`fuzz: ${line}`),
    ...(env.FUZZ_TRACE === '1' ? { trace: (line: string) => console.log(`trace: ${line}`) } : {}),
  });
  console.log(`\n${formatReport(report)}`);
  exitCode = report.failures.length > 0 || report.serverProblems.length > 0 ? 1 : 0;
} catch (err) {
  console.error(`fuzz: the run itself failed: ${(err as Error).stack ?? String(err)}`);
  exitCode = 2;
} finally {
  await world.close();
}
process.exit(exitCode);
