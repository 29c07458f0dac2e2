/**
 * Which versions of a Lance dataset a compaction made, read from the versions' manifests. A compaction (Lance's
 * `Rewrite` operation) moves live rows to new fragments without changing one of them, and nothing else Lance or
 * LanceDB's API tells says so: a version's listed metadata holds only row, fragment and file counts. Lance writes
 * the transaction that made a version into the version's manifest (its `transaction_section`), so one read of the
 * manifest says. Anything not as expected (a manifest missing, written by an older Lance without that section, or
 * not what it should be) tells nothing, and the reader treats the version as any other commit.
 */

/** A file of the dataset by its path inside the dataset's folder; rejects when it cannot be read. */
export type DatasetFile = (path: string) => Promise<Uint8Array>;

/** Lance's field numbers (Manifest.transaction_section; Transaction's `operation`: Rewrite). */
const TRANSACTION_SECTION = 21;
const REWRITE = 104;
/** Transaction fields from here up are its `operation` (Lance numbers them 100 and over). */
const FIRST_OPERATION = 100;

/** A manifest file ends with its manifest's position (8 bytes) and Lance's version and magic (8 bytes). */
const FOOTER_BYTES = 16;
const MAGIC = 'LANC';

/** Versions whose kind is kept: a table's followers ask about the last few steps' versions only. */
const KEPT = 256;

/** A version's manifest under Lance's current naming (`V2`): the version subtracted from u64's largest, 20 digits. */
export function manifestPath(version: number): string {
  return `_versions/${(0xffff_ffff_ffff_ffffn - BigInt(version)).toString().padStart(20, '0')}.manifest`;
}

export class DatasetCommits {
  private readonly kinds = new Map<number, boolean>();

  constructor(private readonly read: DatasetFile) {}

  /**
   * Whether `version` was made by a compaction (it moved rows and changed none); undefined when its manifest does
   * not say (see above). Versions never change once committed, so what was read is kept.
   */
  async compacted(version: number): Promise<boolean | undefined> {
    const known = this.kinds.get(version);
    if (known !== undefined) return known;
    let bytes: Uint8Array;
    try {
      bytes = await this.read(manifestPath(version));
    } catch {
      return undefined;
    }
    const operation = operationOf(bytes);
    if (operation === undefined) return undefined;
    const compacted = operation === REWRITE;
    this.kinds.set(version, compacted);
    if (this.kinds.size > KEPT) this.kinds.delete(this.kinds.keys().next().value as number);
    return compacted;
  }

  /** The versions after `from` up to `to` a compaction made, ascending; undefined when one's manifest does not say. */
  async compactions(from: number, to: number): Promise<number[] | undefined> {
    const versions = Array.from({ length: Math.max(0, to - from) }, (_, i) => from + 1 + i);
    const kinds = await Promise.all(versions.map((v) => this.compacted(v)));
    if (kinds.includes(undefined)) return undefined;
    return versions.filter((_, i) => kinds[i]);
  }
}

/**
 * The field number of the operation of the transaction a manifest file holds; undefined when the file is not a
 * manifest with a transaction section. The bytes come from the customer's bucket: every offset and length is
 * checked against the file before it is used.
 */
export function operationOf(file: Uint8Array): number | undefined {
  if (file.length < FOOTER_BYTES) return undefined;
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const tail = new TextDecoder().decode(file.subarray(file.length - MAGIC.length));
  if (tail !== MAGIC) return undefined;
  const manifestAt = view.getBigUint64(file.length - FOOTER_BYTES, true);
  const manifest = section(file, view, manifestAt, file.length - FOOTER_BYTES);
  if (manifest === undefined) return undefined;
  let transactionAt: bigint | undefined;
  for (const field of fieldsOf(manifest)) {
    if (field === undefined) return undefined;
    if (field.number === TRANSACTION_SECTION && field.varint !== undefined) transactionAt = field.varint;
  }
  if (transactionAt === undefined) return undefined;
  const transaction = section(file, view, transactionAt, file.length - FOOTER_BYTES);
  if (transaction === undefined) return undefined;
  let operation: number | undefined;
  for (const field of fieldsOf(transaction)) {
    if (field === undefined) return undefined;
    if (field.number >= FIRST_OPERATION && field.bytes) operation = field.number;
  }
  return operation;
}

/** A message Lance wrote at `at`: its length (4 bytes, little-endian), then its bytes, all before `end`. */
function section(file: Uint8Array, view: DataView, at: bigint, end: number): Uint8Array | undefined {
  if (at + 4n > BigInt(end)) return undefined;
  const start = Number(at) + 4;
  const length = view.getUint32(Number(at), true);
  if (start + length > end) return undefined;
  return file.subarray(start, start + length);
}

interface Field {
  number: number;
  /** A varint field's value. */
  varint?: bigint;
  /** Whether the field is length-delimited (a message, a string, bytes). */
  bytes?: boolean;
}

/** The top-level fields of a protobuf message; yields undefined (and stops) where the bytes are malformed. */
function* fieldsOf(message: Uint8Array): Generator<Field | undefined> {
  let at = 0;
  const varint = (): bigint | undefined => {
    let value = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (at >= message.length) return undefined;
      const byte = message[at++] as number;
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
    return undefined;
  };
  while (at < message.length) {
    const key = varint();
    if (key === undefined) return yield undefined;
    const number = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      const value = varint();
      if (value === undefined) return yield undefined;
      yield { number, varint: value };
    } else if (wire === 1 || wire === 5) {
      at += wire === 1 ? 8 : 4;
      if (at > message.length) return yield undefined;
      yield { number };
    } else if (wire === 2) {
      const length = varint();
      if (length === undefined || BigInt(at) + length > BigInt(message.length)) return yield undefined;
      at += Number(length);
      yield { number, bytes: true };
    } else {
      return yield undefined;
    }
  }
}
