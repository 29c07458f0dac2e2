import type { Data, DataType, RecordBatch, Schema } from 'apache-arrow';
import { arrow } from './arrow.js';
import { rebasedBitmap } from './cast.js';

/** A stream holding only `schema` (and the end-of-stream marker), as `schema_ipc` carries. */
export function schemaOnlyStream(schema: Schema): Uint8Array {
  const writer = new arrow.RecordBatchStreamWriter();
  writer.reset(undefined, schema);
  writer.close();
  return writer.toUint8Array(true);
}

/**
 * Whether an IPC stream carries record batch messages. Read at the message level: Arrow's batch reader
 * invents an empty batch for a schema-only stream, so it cannot tell the two apart. Only for bytes that
 * `checkIpcStream` (ipc-check.ts) passed: the message reader trusts every length it reads.
 */
export function streamHasBatches(bytes: Uint8Array): boolean {
  const reader = new arrow.MessageReader(bytes);
  for (const message of reader) {
    if (message.headerType === arrow.MessageHeader.RecordBatch) return true;
    if (message.bodyLength > 0) reader.readMessageBody(message.bodyLength);
  }
  return false;
}

/**
 * Arrow JS cannot write a slice of a LargeUtf8/LargeBinary column (its offset rebasing mixes BigInt and
 * number), so such slices are copied to start at zero; everything else passes through untouched.
 */
function writable(data: Data): Data {
  const type = data.type as DataType;
  if ((type.typeId === arrow.Type.LargeUtf8 || type.typeId === arrow.Type.LargeBinary) && data.offset !== 0) {
    const offsets = data.valueOffsets as unknown as BigInt64Array;
    const start = offsets[0] ?? 0n;
    const end = offsets[data.length] ?? 0n;
    return arrow.makeData({
      type: type as never,
      length: data.length,
      nullCount: data.nullCount,
      nullBitmap: rebasedBitmap(data),
      valueOffsets: BigInt64Array.from(offsets.subarray(0, data.length + 1), (o) => o - start) as never,
      data: (data.values as Uint8Array).slice(Number(start), Number(end)),
    });
  }
  if (data.children.length === 0 || data.children.every((child) => writable(child as Data) === child)) return data;
  return data.clone(
    type,
    data.offset,
    data.length,
    data.nullCount,
    data.buffers,
    data.children.map((c) => writable(c as Data)),
  );
}

/** Batches Arrow JS's IPC writer can encode, whatever slicing produced them. */
export function writableBatches(batches: readonly RecordBatch[]): RecordBatch[] {
  return batches.map((batch) => {
    const data = writable(batch.data as Data);
    return data === batch.data ? batch : new arrow.RecordBatch(batch.schema, data as never);
  });
}
