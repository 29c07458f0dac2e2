import { afterAll, beforeAll, expect, test } from 'vitest';
import { formatReport } from './fuzz/report.js';
import { runFuzz } from './fuzz/runner.js';
import { startWorld, type World } from './fuzz/world.js';

// The slice of `npm run fuzz` that runs with every `npm test`: a fixed seed, so a failure here replays with
// `FUZZ_SEED=20240601 npm run fuzz 2500` and its printed case indices.
// Slow: 2,500 requests, four at a time, against a server in this process: about 7 s here, far more when the
// machine is loaded (150 s allowed).
const SLICE = { count: 2500, seed: 20240601 };

let world: World;

beforeAll(async () => {
  world = await startWorld();
}, 60_000);
afterAll(() => world?.close());

test(`${SLICE.count} generated requests over every route: no 5xx, all answered, no 2xx without a key or across accounts`, async () => {
  const report = await runFuzz(world, {
    ...SLICE,
    concurrency: 4,
    healthEvery: 200,
    maxRssBytes: 3 * 1024 ** 3,
    timeoutMs: 20_000,
  });

  expect(report.sent).toBe(SLICE.count);
  expect(report.failures.length + report.serverProblems.length, formatReport(report, 25)).toBe(0);
}, 150_000);
