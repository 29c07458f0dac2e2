/** The thread `JsonThread` runs: JSON rows bodies parsed into Arrow streams, Arrow streams encoded as JSON. */
import { parentPort } from 'node:worker_threads';
import { arrow } from '../../arrow/arrow.js';
import { jsonText } from '../../arrow/to-json.js';
import { StrataError } from '../../errors.js';
import { schemaFromIpc } from '../tables/schema.js';
import { batchFromJsonBytes, type JsonJob, type JsonReply, movable } from './json-rows.js';

const port = parentPort;
if (port === null) throw new Error('json-rows-worker runs as a worker thread');

function work(job: JsonJob): Uint8Array {
  if (job.op === 'encode') return Buffer.from(jsonText(arrow.RecordBatchReader.from(job.ipc).readAll(), job.maxChars));
  const batch = batchFromJsonBytes(schemaFromIpc(job.schemaIpc), job.bytes);
  return arrow.tableToIPC(new arrow.Table([batch]), 'stream');
}

port.on('message', (job: JsonJob) => {
  let bytes: Uint8Array;
  try {
    bytes = work(job);
  } catch (err) {
    const reply: JsonReply =
      err instanceof StrataError && err.kind === 'invalid'
        ? { id: job.id, refused: err.message, code: err.code }
        : { id: job.id, fault: err instanceof Error ? err.message : String(err) };
    port.postMessage(reply);
    return;
  }
  const reply: JsonReply = { id: job.id, bytes };
  port.postMessage(reply, movable(bytes));
});
