import { BadRequest } from '../errors.js';
import { checkRecordBatch } from './ipc-check/batch.js';
import { type SchemaSpec, schemaSpec } from './ipc-check/fields.js';
import {
  ARROW_FILE_MAGIC,
  CONTINUATION,
  Damage,
  damaged,
  Flatbuffer,
  HEADER,
  METADATA_V4,
  METADATA_V5,
  type Table,
} from './ipc-check/wire.js';

/**
 * Checks an Arrow IPC *stream* from a client completely before any Arrow JS decoder sees it. Arrow JS trusts
 * every length in a stream: a record batch that claims 2^31 rows, a flatbuffer vector that claims 2^31 entries,
 * or offsets that run past their buffer make it allocate until V8 dies, hang, or hand Lance bytes it refuses
 * later with a 500. Everything here reads the bytes in place, allocates only in proportion to the metadata,
 * and runs in time linear in the input; anything it cannot vouch for is a 400.
 *
 * The flatbuffers are read by hand, mirroring how Arrow JS's generated readers (flatbuffers 24, signed 32-bit
 * offsets) will read them, so that every read Arrow JS makes afterwards is one this file has bounds-checked.
 * Dictionary encoding is checked in full (dictionary batches against their value field, indices against the
 * dictionary's length), since Lance stores dictionary columns. Refused outright, because Arrow JS 18 cannot read
 * them or Lance cannot store them: compressed bodies, unions, LargeList, list and string views, run-end encoding,
 * 64-bit dictionary indices, big-endian data, metadata older than V4, month-day-nano intervals, and the IPC
 * file format.
 */

export interface IpcLimits {
  /** The most rows the whole stream may hold; no single column or child may be longer either. */
  maxRows: number;
  /** Names the stream in error messages; "the body" unless given. */
  subject?: string;
}

/**
 * The rows a body of `byteLength` bytes may claim. Every column with buffers costs at least a bit per row (Bool,
 * packed 8 to a byte), so only columns of Null type could honestly claim more; 1024 leaves room for tiny bodies.
 */
export function maxRowsFor(bytes: Uint8Array): number {
  return Math.max(1024, bytes.byteLength * 8);
}

/** Throws `BadRequest` naming the first thing wrong with `bytes` as an Arrow IPC stream. */
export function checkIpcStream(bytes: Uint8Array, limits: IpcLimits): void {
  try {
    checkStream(bytes, limits.maxRows);
  } catch (err) {
    if (err instanceof Damage) {
      throw new BadRequest(`${limits.subject ?? 'the body'} is not an Arrow IPC stream: ${err.message}`);
    }
    throw err;
  }
}

// ── Messages ──

function startsWithFileMagic(bytes: Uint8Array): boolean {
  return ARROW_FILE_MAGIC.every((b, i) => bytes[i] === b);
}

/** What the messages so far have established; each message is checked against it. */
class StreamState {
  private schema: SchemaSpec | undefined;
  private rows = 0;
  private batches = 0;
  private dictionaryBatches = 0;
  private readonly dictionaryLengths = new Map<number, number>();

  constructor(private readonly maxRows: number) {}

  message(fb: Flatbuffer, headerType: number, header: Table, body: Uint8Array, where: string): void {
    if (headerType === HEADER.Schema) {
      if (this.schema) damaged(`${where} is a second schema`);
      // Arrow JS does not skip a schema message's body; it would read the body as the next message.
      if (body.byteLength !== 0) damaged(`${where} is a schema with a ${body.byteLength}-byte body`);
      this.schema = schemaSpec(fb, header);
      return;
    }
    const schema = this.schema ?? damaged(`${where} comes before any schema`);
    if (headerType === HEADER.RecordBatch) {
      const label = `record batch ${this.batches++}`;
      this.count(checkRecordBatch(fb, header, body, schema.fields, this.maxRows, label, this.dictionaryLengths));
    } else if (headerType === HEADER.DictionaryBatch) {
      const id = fb.int64(header, 0, `${where} dictionary id`);
      const label = `dictionary batch ${this.dictionaryBatches++} (id ${id})`;
      const values = schema.dictionaries.get(id) ?? damaged(`${label}: no column uses dictionary ${id}`);
      const data = fb.table(header, 1, `${label} data`) ?? damaged(`${label} has no record batch`);
      const isDelta = fb.uint8(header, 2, 0, `${label} delta flag`) !== 0;
      const n = checkRecordBatch(fb, data, body, [values], this.maxRows, label, this.dictionaryLengths);
      this.count(n);
      // As Arrow JS: a delta extends the dictionary, anything else replaces it.
      this.dictionaryLengths.set(id, isDelta ? (this.dictionaryLengths.get(id) ?? 0) + n : n);
    } else {
      damaged(`${where} has header type ${headerType}, which a stream of record batches cannot hold`);
    }
  }

  /** Dictionary values count too: like rows, each costs the body at least a bit unless its type is Null. */
  private count(rows: number): void {
    this.rows += rows;
    if (this.rows > this.maxRows) damaged(`its batches hold ${this.rows} rows; this body can hold ${this.maxRows}`);
  }

  finish(): void {
    if (!this.schema) damaged('it holds no schema');
  }
}

function checkStream(bytes: Uint8Array, maxRows: number): void {
  if (bytes.byteLength === 0) damaged('it is empty');
  if (startsWithFileMagic(bytes)) damaged('it is the Arrow IPC file format; send the stream format');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.byteLength;
  const state = new StreamState(maxRows);
  let at = 0;
  for (let index = 0; at < end; index++) {
    const where = `message ${index} (byte ${at})`;
    if (end - at < 4) damaged(`${end - at} stray bytes end the stream`);
    // Arrow JS also reads the pre-0.15 framing, a bare length without the continuation marker.
    let metadataLength = view.getInt32(at, true);
    let prefix = 4;
    if (metadataLength === CONTINUATION) {
      if (end - at < 8) damaged(`the stream ends inside ${where}'s length prefix`);
      metadataLength = view.getInt32(at + 4, true);
      prefix = 8;
    }
    if (metadataLength === 0) {
      if (at + prefix !== end) damaged(`${end - at - prefix} bytes follow the end-of-stream marker`);
      break;
    }
    const metaStart = at + prefix;
    if (metadataLength < 0 || metadataLength > end - metaStart) {
      damaged(`${where} claims ${metadataLength} bytes of metadata; ${end - metaStart} remain`);
    }
    const fb = new Flatbuffer(bytes.subarray(metaStart, metaStart + metadataLength));
    const message = fb.root();
    const version = fb.int16(message, 0, 0, `${where} version`);
    // Arrow JS reads older metadata with another buffer layout; nothing current writes it.
    if (version !== METADATA_V4 && version !== METADATA_V5) {
      damaged(`${where} has metadata version V${version + 1}; V4 and V5 are supported`);
    }
    const headerType = fb.uint8(message, 1, 0, `${where} header type`);
    const header = fb.table(message, 2, `${where} header`) ?? damaged(`${where} has no header`);
    const bodyLength = fb.int64(message, 3, `${where} body length`);
    const bodyStart = metaStart + metadataLength;
    if (!(bodyLength >= 0 && bodyLength <= end - bodyStart)) {
      damaged(`${where} claims a ${bodyLength}-byte body; ${end - bodyStart} bytes remain`);
    }
    state.message(fb, headerType, header, bytes.subarray(bodyStart, bodyStart + bodyLength), where);
    at = bodyStart + bodyLength;
  }
  state.finish();
}
