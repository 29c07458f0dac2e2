/**
 * What read-your-writes across nodes costs a read: Lance opened with `readConsistencyInterval: 0` (as the service
 * opens every table) looks for a newer version before each read; without it, a handle reads the version it
 * holds. Measured on a local folder and on s3rver (an S3 protocol server on loopback), 300 point reads each.
 * Run: npm run bench:freshness
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@lancedb/lancedb';
import { arrow } from '../src/arrow/arrow.js';
import { startS3 } from '../test/support/s3.js';

const s3 = await startS3(['probe']);
const dir = mkdtempSync(join(tmpdir(), 'strata-freshness-'));
const results: Record<string, { p50: number; p99: number }> = {};
const storageOptions = {
  awsAccessKeyId: 'S3RVER',
  awsSecretAccessKey: 'S3RVER',
  endpoint: s3.endpoint,
  region: 'us-east-1',
  allowHttp: 'true',
  awsEc2MetadataDisabled: 'true',
};
for (const uri of ['s3://probe/t', join(dir, 't')]) {
  const writer = await connect(uri, { storageOptions });
  const t = await writer.createTable(
    'x',
    arrow.tableFromArrays({ id: Int32Array.from({ length: 1000 }, (_, i) => i) }),
    { mode: 'overwrite' },
  );
  for (let i = 0; i < 20; i++) await t.add(arrow.tableFromArrays({ id: Int32Array.from([i]) }));
  for (const interval of [undefined, 0]) {
    const c = await connect(uri, { storageOptions, readConsistencyInterval: interval });
    const tab = await c.openTable('x');
    const times: number[] = [];
    for (let i = 0; i < 300; i++) {
      const s = performance.now();
      await tab.query().where('id = 5').limit(1).toArrow();
      times.push(performance.now() - s);
    }
    times.sort((a, b) => a - b);
    const where = uri.startsWith('s3://') ? 's3rver' : 'local';
    results[`${where}_${interval === 0 ? 'checked' : 'unchecked'}`] = {
      p50: Number((times[150] ?? 0).toFixed(3)),
      p99: Number((times[297] ?? 0).toFixed(3)),
    };
    tab.close();
    c.close();
  }
}
await s3.close();
rmSync(dir, { recursive: true, force: true });
const added = (where: string) =>
  Number(((results[`${where}_checked`]?.p50 ?? 0) - (results[`${where}_unchecked`]?.p50 ?? 0)).toFixed(3));
console.log(JSON.stringify({ ms: results, added_p50_ms: { local: added('local'), s3rver: added('s3rver') } }, null, 2));
