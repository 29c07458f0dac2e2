/** The thread `JsonRowsParser` converts JSON rows bodies on: bytes and a table schema in, an Arrow stream out. */
import { parentPort } from 'node:worker_threads';
import { arrow } from '../arrow/arrow.js';
import { BadRequest } from '../errors.js';
import { batchFromJsonBytes, type JsonRowsReply } from './json-rows.js';
import { schemaFromIpc } from './schema.js';

interface Job {
  id: number;
  schemaIpc: string;
  bytes: Uint8Array;
}

const port = parentPort;
if (port === null) throw new Error('json-rows-worker runs as a worker thread');

port.on('message', ({ id, schemaIpc, bytes }: Job) => {
  let ipc: Uint8Array;
  try {
    const batch = batchFromJsonBytes(schemaFromIpc(schemaIpc), bytes);
    ipc = arrow.tableToIPC(new arrow.Table([batch]), 'stream');
  } catch (err) {
    const reply: JsonRowsReply =
      err instanceof BadRequest
        ? { id, refused: err.message }
        : { id, fault: err instanceof Error ? err.message : String(err) };
    port.postMessage(reply);
    return;
  }
  const reply: JsonRowsReply = { id, ipc };
  const whole = ipc.byteOffset === 0 && ipc.byteLength === ipc.buffer.byteLength;
  port.postMessage(reply, whole ? [ipc.buffer as ArrayBuffer] : []);
});
