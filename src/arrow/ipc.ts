import type { Schema } from 'apache-arrow';
import { arrow } from './arrow.js';

/** A stream holding only `schema` (and the end-of-stream marker), as `schema_ipc` carries. */
export function schemaOnlyStream(schema: Schema): Uint8Array {
  const writer = new arrow.RecordBatchStreamWriter();
  writer.reset(undefined, schema);
  writer.close();
  return writer.toUint8Array(true);
}

/**
 * Whether an IPC stream carries record batch messages. Read at the message level: Arrow's batch reader
 * invents an empty batch for a schema-only stream, so it cannot tell the two apart.
 */
export function streamHasBatches(bytes: Uint8Array): boolean {
  const reader = new arrow.MessageReader(bytes);
  for (const message of reader) {
    if (message.headerType === arrow.MessageHeader.RecordBatch) return true;
    if (message.bodyLength > 0) reader.readMessageBody(message.bodyLength);
  }
  return false;
}
