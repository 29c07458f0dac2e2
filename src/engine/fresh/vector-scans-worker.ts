/** The thread `VectorScanThread` runs: it holds the node's fresh vector matrices and scans them. */
import { parentPort } from 'node:worker_threads';
import { VectorMatrix } from './vector-matrix.js';
import type { ScanJob, ScanReply } from './vector-scans.js';

const port = parentPort;
if (port === null) throw new Error('vector-scans-worker runs as a worker thread');

const matrices = new Map<number, VectorMatrix>();

port.on('message', (job: ScanJob) => {
  if (job.op === 'write') {
    let matrix = matrices.get(job.matrix);
    if (matrix === undefined) {
      matrix = new VectorMatrix(job.dim, job.kind);
      matrices.set(job.matrix, matrix);
    }
    matrix.write(job.slot, job.vectors);
  } else if (job.op === 'pack') matrices.get(job.matrix)?.pack(job.keep);
  else if (job.op === 'close') matrices.delete(job.matrix);
  else {
    let reply: ScanReply;
    try {
      const matrix = matrices.get(job.matrix);
      reply = {
        id: job.id,
        scan: matrix?.scan(job.slots, job.query, job.count) ?? { slots: [], distances: [] },
      };
    } catch (err) {
      reply = { id: job.id, fault: err instanceof Error ? err.message : String(err) };
    }
    port.postMessage(reply);
  }
});
