/**
 * What made each version of a Lance dataset, and its fragments, read from the versions' manifests. A compaction
 * (Lance's `Rewrite` operation) moves live rows to new fragments without changing one of them, and an append adds
 * whole fragments, but nothing else Lance or LanceDB's API tells says which a version is: a version's listed metadata
 * holds only row, fragment and file counts. Lance writes the transaction that made a version into the version's
 * manifest (its `transaction_section`), beside the version's fragments, so one read of the manifest says. Anything not
 * as expected (a manifest missing, written by an older Lance without that section, or not what it should be) tells
 * nothing, and the reader treats the version as any other commit.
 */

/** A file of the dataset by its path inside the dataset's folder; rejects when it cannot be read. */
export type DatasetFile = (path: string) => Promise<Uint8Array>;

/**
 * Lance's field numbers: Manifest's `fragments` and `transaction_section`; DataFragment's `id`, `deletion_file` and
 * `physical_rows`.
 */
const FRAGMENTS = 2;
const TRANSACTION_SECTION = 21;
const FRAGMENT_ID = 1;
const DELETION_FILE = 3;
const PHYSICAL_ROWS = 4;
/** Transaction operations (their field numbers): those that only add fragments, or change no row at all. */
const APPEND = 100;
const CREATE_INDEX = 103;
const REWRITE = 104;
const RESERVE_FRAGMENTS = 107;
const UPDATE_CONFIG = 110;
const ADDING_ONLY = new Set([APPEND, CREATE_INDEX, RESERVE_FRAGMENTS, UPDATE_CONFIG]);
/** Transaction fields from here up are its `operation` (Lance numbers them 100 and over). */
const FIRST_OPERATION = 100;

/** A manifest file ends with its manifest's position (8 bytes) and Lance's version and magic (8 bytes). */
const FOOTER_BYTES = 16;
const MAGIC = 'LANC';

/** Versions whose kind is kept: a table's followers ask about the last few steps' versions only. */
const KEPT = 256;
/**
 * Versions a step may span for their manifests to be read (a few at a time, `READS_AT_ONCE`): past it (a node that
 * follows from an old fold, say) the step is read as any other, rather than manifests of every version between.
 */
const MAX_SPAN = 64;
const READS_AT_ONCE = 4;
/** How long a manifest's read may take before it tells nothing: a bucket that stops answering holds no search up. */
const READ_MS = 2_000;

/** A version's manifest under Lance's current naming (`V2`): the version subtracted from u64's largest, 20 digits. */
export function manifestPath(version: number): string {
  return `_versions/${(0xffff_ffff_ffff_ffffn - BigInt(version)).toString().padStart(20, '0')}.manifest`;
}

/** A data fragment of a version: its id, its rows as written, and whether some of them are deleted. */
export interface Fragment {
  id: number;
  rows: number;
  deletions: boolean;
}

export class DatasetCommits {
  /** Each version's operation, as read: versions never change once committed. */
  private readonly operations = new Map<number, number>();
  private last: { version: number; bytes: Uint8Array } | undefined;

  constructor(private readonly read: DatasetFile) {}

  /**
   * Whether `version` was made by a compaction (it moved rows and changed none); undefined when its manifest does
   * not say (see above).
   */
  async compacted(version: number): Promise<boolean | undefined> {
    const operation = await this.operation(version);
    return operation === undefined ? undefined : operation === REWRITE;
  }

  /** The versions after `from` up to `to` a compaction made, ascending; undefined when one's manifest does not say. */
  async compactions(from: number, to: number): Promise<number[] | undefined> {
    const operations = await this.operationsBetween(from, to);
    if (operations === undefined) return undefined;
    return operations.flatMap((operation, i) => (operation === REWRITE ? [from + 1 + i] : []));
  }

  /**
   * The fragments of `to` when every version after `from` up to it only added fragments (appends) or changed no row
   * (an index, a configuration); undefined otherwise, or when a manifest does not say.
   */
  async fragmentsAdding(from: number, to: number): Promise<Fragment[] | undefined> {
    const operations = await this.operationsBetween(from, to);
    if (operations === undefined || !operations.every((operation) => ADDING_ONLY.has(operation))) return undefined;
    const bytes = await this.manifest(to);
    return bytes === undefined ? undefined : fragmentsOf(bytes);
  }

  /**
   * Whether every version after `from` up to `to` only added rows, moved them (a compaction) or changed none; false
   * when one did more, or its manifest does not say.
   */
  async removedNone(from: number, to: number): Promise<boolean> {
    const operations = await this.operationsBetween(from, to);
    return operations?.every((operation) => ADDING_ONLY.has(operation) || operation === REWRITE) ?? false;
  }

  private async operationsBetween(from: number, to: number): Promise<number[] | undefined> {
    if (to - from > MAX_SPAN) return undefined;
    const operations: number[] = [];
    let next = from + 1;
    let unknown = false;
    const reader = async () => {
      for (let v = next++; v <= to && !unknown; v = next++) {
        const operation = await this.operation(v);
        if (operation === undefined) unknown = true;
        else operations[v - from - 1] = operation;
      }
    };
    await Promise.all(Array.from({ length: READS_AT_ONCE }, reader));
    return unknown ? undefined : operations;
  }

  private async operation(version: number): Promise<number | undefined> {
    const known = this.operations.get(version);
    if (known !== undefined) return known;
    const bytes = await this.manifest(version);
    const operation = bytes === undefined ? undefined : operationOf(bytes);
    if (operation === undefined) return undefined;
    this.operations.set(version, operation);
    if (this.operations.size > KEPT) this.operations.delete(this.operations.keys().next().value as number);
    return operation;
  }

  private async manifest(version: number): Promise<Uint8Array | undefined> {
    // The step's last version is read twice (its operation, then its fragments): the last read is kept.
    if (this.last?.version === version) return this.last.bytes;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), READ_MS);
    });
    try {
      const bytes = await Promise.race([this.read(manifestPath(version)).catch(() => undefined), late]);
      if (bytes !== undefined) this.last = { version, bytes };
      return bytes;
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * The field number of the operation of the transaction a manifest file holds; undefined when the file is not a
 * manifest with a transaction section. The bytes come from the customer's bucket: every offset and length is
 * checked against the file before it is used.
 */
export function operationOf(file: Uint8Array): number | undefined {
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const manifest = manifestOf(file, view);
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
    if (field.number >= FIRST_OPERATION && field.bytes !== undefined) operation = field.number;
  }
  return operation;
}

/** The fragments a manifest file lists; undefined when it is not a whole manifest. */
export function fragmentsOf(file: Uint8Array): Fragment[] | undefined {
  const manifest = manifestOf(file, new DataView(file.buffer, file.byteOffset, file.byteLength));
  if (manifest === undefined) return undefined;
  const fragments: Fragment[] = [];
  for (const field of fieldsOf(manifest)) {
    if (field === undefined) return undefined;
    if (field.number !== FRAGMENTS || field.bytes === undefined) continue;
    // Proto3 leaves out a field at its default: fragment 0 has no id written.
    const fragment: Fragment = { id: 0, rows: 0, deletions: false };
    for (const part of fieldsOf(field.bytes)) {
      if (part === undefined) return undefined;
      if (part.number === FRAGMENT_ID && part.varint !== undefined) fragment.id = Number(part.varint);
      else if (part.number === PHYSICAL_ROWS && part.varint !== undefined) fragment.rows = Number(part.varint);
      else if (part.number === DELETION_FILE) fragment.deletions = true;
    }
    // Ids and row counts past 32 bits cannot be row addresses' halves.
    if (fragment.id >= 2 ** 32 || fragment.rows >= 2 ** 32) return undefined;
    fragments.push(fragment);
  }
  return fragments;
}

/** The manifest message of a manifest file: the file ends with its position, Lance's version and magic. */
function manifestOf(file: Uint8Array, view: DataView): Uint8Array | undefined {
  if (file.length < FOOTER_BYTES) return undefined;
  const tail = new TextDecoder().decode(file.subarray(file.length - MAGIC.length));
  if (tail !== MAGIC) return undefined;
  return section(file, view, view.getBigUint64(file.length - FOOTER_BYTES, true), file.length - FOOTER_BYTES);
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
  /** A length-delimited field's bytes (a message, a string, bytes). */
  bytes?: Uint8Array;
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
      const start = at;
      at += Number(length);
      yield { number, bytes: message.subarray(start, at) };
    } else {
      return yield undefined;
    }
  }
}
