/**
 * npm run bench:digest — what an Idempotency-Key's fingerprint of a body costs: `rowsDigest` of the rows a body
 * holds (src/arrow/digest.ts) beside the CRC-32 of the same body's IPC bytes, which the fingerprint used before.
 * In process, no server: a key's cost over HTTP is in bench:load. Shapes: 1,000 and 10,000 rows of an id, a short
 * text and a 384-d vector; 50,000 rows of an id, a text and an 8-d vector. Median of BENCH_ROUNDS (default 20).
 */
import { crc32 } from 'node:zlib';
import { arrow } from '../src/arrow/arrow.js';
import { rowsDigest } from '../src/arrow/digest.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 20);
const { Field, Float32, FixedSizeList, Int64, Utf8 } = arrow;

function median(run: () => void): number {
  const times: number[] = [];
  for (let i = 0; i < ROUNDS + 3; i++) {
    const started = performance.now();
    run();
    if (i >= 3) times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b)[Math.floor(times.length / 2)] ?? Number.NaN;
}

for (const [rows, dim] of [
  [1_000, 384],
  [10_000, 384],
  [50_000, 8],
] as const) {
  const table = new arrow.Table({
    id: arrow.vectorFromArray(
      Array.from({ length: rows }, (_, i) => BigInt(i)),
      new Int64(),
    ),
    title: arrow.vectorFromArray(
      Array.from({ length: rows }, (_, i) => `title number ${i} with some words`),
      new Utf8(),
    ),
    emb: arrow.vectorFromArray(
      Array.from({ length: rows }, () => Array.from({ length: dim }, Math.random)),
      new FixedSizeList(dim, new Field('item', new Float32(), true)),
    ),
  });
  const ipc = arrow.tableToIPC(table, 'stream');
  const batches = arrow.tableFromIPC(ipc).batches;
  const digest = median(() => rowsDigest(batches));
  const body = median(() => crc32(ipc));
  console.log(
    `${rows} rows × ${dim}-d (${(ipc.byteLength / 1e6).toFixed(1)} MB): rowsDigest ${digest.toFixed(2)} ms, ` +
      `CRC-32 of the body ${body.toFixed(2)} ms (${(digest / body).toFixed(2)}×)`,
  );
}
