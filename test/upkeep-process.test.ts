import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { connect } from '@lancedb/lancedb';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { rng } from '../bench/corpus.js';
import { arrow } from '../src/arrow/arrow.js';
import { type UpkeepJob, UpkeepProcess } from '../src/engine/lance/upkeep-process.js';
import type { LanceLocation } from '../src/storage/lance.js';
import { eventually } from './support/server.js';

const DIM = 8;
let dir: string;
let location: Pick<LanceLocation, 'uri' | 'storageOptions'>;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'strata-upkeep-process-'));
  location = { uri: dir, storageOptions: {} };
  const rand = rng(5);
  const schema = new arrow.Schema([
    new arrow.Field('id', new arrow.Int64(), false),
    new arrow.Field('emb', new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true)), true),
  ]);
  const rows = Array.from({ length: 1000 }, (_, id) => ({ id, emb: Array.from({ length: DIM }, () => rand()) }));
  const connection = await connect(dir);
  for (const name of ['a', 'b']) (await connection.createTable(name, rows, { schema })).close();
  connection.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A job that trains an IVF_RQ index on `emb`. */
const annJob = (distanceType: 'l2' | 'cosine'): UpkeepJob => ({
  kind: 'ann',
  column: 'emb',
  distanceType,
  index: { type: 'ivf_rq', numBits: 4 },
  replace: false,
});
const optimizeJob = (): UpkeepJob => ({ kind: 'optimize', cleanupOlderThan: new Date() });

async function indexTypes(name: string): Promise<string[]> {
  const connection = await connect(dir);
  const table = await connection.openTable(name);
  try {
    return (await table.listIndices()).map((i) => i.indexType);
  } finally {
    table.close();
    connection.close();
  }
}

describe('the upkeep process', () => {
  test('trains an ANN index on the dataset it is sent, and a job that fails rejects with the reason', async () => {
    const jobs = new UpkeepProcess();
    try {
      await jobs.run(location, 'a', annJob('l2'));
      expect(await indexTypes('a')).toEqual([expect.stringMatching(/^ivf_?rq$/i)]);
      await expect(jobs.run(location, 'missing', optimizeJob())).rejects.toThrow(/not found|does not exist/i);
      // The process outlives a failed job.
      await jobs.run(location, 'a', optimizeJob());
    } finally {
      await jobs.close();
    }
  });

  test('ends once idle, freeing its memory, and the next job starts another', async () => {
    const jobs = new UpkeepProcess(200);
    try {
      await jobs.run(location, 'b', optimizeJob());
      const first = jobs.pid as number;
      expect(alive(first)).toBe(true);
      await eventually(
        async () => jobs.pid === undefined && !alive(first),
        (ended) => ended,
      );
      await jobs.run(location, 'b', annJob('cosine'));
      expect(jobs.pid).toBeGreaterThan(0);
      expect(jobs.pid).not.toBe(first);
      expect(await indexTypes('b')).toEqual([expect.stringMatching(/^ivf_?rq$/i)]);
    } finally {
      await jobs.close();
    }
  });

  test('a process whose only pending work is an upkeep job stays alive until the job is answered', () => {
    // The built module (test/support/build.ts), as `strata serve` runs it, in a process with nothing else to do.
    const module = pathToFileURL(join(process.cwd(), 'dist', 'engine', 'lance', 'upkeep-process.js')).href;
    const script = `
      const { UpkeepProcess } = await import(${JSON.stringify(module)});
      new UpkeepProcess()
        .run(${JSON.stringify(location)}, 'a', { kind: 'optimize', cleanupOlderThan: new Date() })
        .then(() => console.log('job answered'), (err) => console.log('job failed: ' + err.message));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(out.trim()).toBe('job answered');
  });

  test('after close, jobs are refused and no process is left', async () => {
    const jobs = new UpkeepProcess();
    await jobs.run(location, 'b', optimizeJob());
    const pid = jobs.pid as number;
    await jobs.close();
    expect(alive(pid)).toBe(false);
    await expect(jobs.run(location, 'b', optimizeJob())).rejects.toThrow(/closed/);
  });
});
