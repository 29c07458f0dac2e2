import { promises as fs } from 'node:fs';
import { basename, dirname, extname, join, relative, sep } from 'node:path';
import { fsyncPath, gone } from './durable.js';

/** Lance's manifests, data files and index files end with these bytes. */
const LANCE_END = Buffer.from('LANC');
/** An Arrow IPC file (a deletion file of few rows) ends with these. */
const ARROW_END = Buffer.from('ARROW1');
/** A roaring bitmap (a deletion file of many rows) begins with one of these cookies (u16, little-endian). */
const ROARING_COOKIES: ReadonlySet<number> = new Set([12346, 12347]);
const U64_MAX = 2n ** 64n - 1n;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Files checked at once when a dataset opens. */
const CHECKS_IN_FLIGHT = 32;
const DELETION_FILE = /^\d+-(\d+)-(\d+)\.(?:arrow|bin)$/;

/** The version a manifest's name stands for: Lance names them `u64::MAX - version` (older datasets: `version`). */
function manifestVersion(name: string): bigint | undefined {
  const match = /^(\d+)\.manifest$/.exec(name);
  if (match === null) return undefined;
  const n = BigInt(match[1] as string);
  return n > 2n ** 63n ? U64_MAX - n : n;
}

function varint(n: bigint): Buffer {
  const bytes: number[] = [];
  let rest = n;
  while (rest >= 0x80n) {
    bytes.push(Number(rest & 0x7fn) | 0x80);
    rest >>= 7n;
  }
  bytes.push(Number(rest));
  return Buffer.from(bytes);
}

/**
 * The bytes by which a manifest names a file of the dataset: a data file by its name, an index by its folder's
 * UUID (16 bytes), a deletion file by its `DeletionFile` fields (read_version = 2, id = 3: tags 0x10, 0x18).
 */
function nameInManifest(datasetDir: string, path: string): Buffer | undefined {
  const [top, folder] = relative(datasetDir, path).split(sep);
  if (top === 'data') return Buffer.from(basename(path));
  if (top === '_indices' && folder !== undefined && UUID.test(folder)) {
    return Buffer.from(folder.replaceAll('-', ''), 'hex');
  }
  const deletion = top === '_deletions' ? DELETION_FILE.exec(basename(path)) : null;
  if (deletion === null) return undefined;
  const [, readVersion, id] = deletion as unknown as [string, string, string];
  return Buffer.concat([Buffer.from([0x10]), varint(BigInt(readVersion)), Buffer.from([0x18]), varint(BigInt(id))]);
}

/** Whether a file ends (or, a roaring bitmap, begins) as the format it is named for always does. */
async function looksWhole(path: string): Promise<boolean> {
  const ext = extname(path);
  const expected = ext === '.lance' || ext === '.idx' ? LANCE_END : ext === '.arrow' ? ARROW_END : undefined;
  if (expected === undefined && ext !== '.bin') return true;
  const handle = await fs.open(path, 'r');
  try {
    const { size } = await handle.stat();
    if (expected === undefined) {
      const head = Buffer.alloc(4);
      await handle.read(head, 0, 4, 0);
      return size >= 8 && ROARING_COOKIES.has(head.readUInt16LE(0));
    }
    if (size < expected.length) return false;
    const tail = Buffer.alloc(expected.length);
    await handle.read(tail, 0, tail.length, size - tail.length);
    return tail.equals(expected);
  } finally {
    await handle.close();
  }
}

const listed = (dir: string) =>
  fs.readdir(dir, { withFileTypes: true }).catch((err: unknown) => {
    if (gone(err)) return [];
    throw err;
  });

/** The data, deletion and index files of a dataset that are cut short, each with how a manifest names it. */
async function tornFiles(datasetDir: string): Promise<{ path: string; named: Buffer }[]> {
  const paths: string[] = [];
  for (const top of ['data', '_deletions']) {
    for (const entry of await listed(join(datasetDir, top)))
      if (entry.isFile()) paths.push(join(datasetDir, top, entry.name));
  }
  for (const index of await listed(join(datasetDir, '_indices'))) {
    if (!index.isDirectory()) continue;
    const dir = join(datasetDir, '_indices', index.name);
    for (const entry of await listed(dir)) if (entry.isFile()) paths.push(join(dir, entry.name));
  }
  // Only files a manifest can name are checked: no other can make a version unreadable.
  const candidates = paths.flatMap((path) => {
    const named = nameInManifest(datasetDir, path);
    return named === undefined ? [] : [{ path, named }];
  });
  const torn: { path: string; named: Buffer }[] = [];
  // Several at a time: one by one, 2,000 files took 390 ms, each check a few trips through libuv's pool.
  for (let at = 0; at < candidates.length; at += CHECKS_IN_FLIGHT) {
    const batch = candidates.slice(at, at + CHECKS_IN_FLIGHT);
    const whole = await Promise.all(batch.map(({ path }) => looksWhole(path).catch(() => true)));
    torn.push(...batch.filter((_, i) => whole[i] === false));
  }
  return torn;
}

/** What `setAsideInterruptedCommits` moved into `_interrupted/`, relative to the dataset's folder. */
export interface SetAside {
  manifests: string[];
  files: string[];
}

/**
 * Sets aside the commits a power cut interrupted in a local dataset, so that it opens at the newest version it
 * can read. Lance writes a commit's files, then its manifest, and the service answers only once `sync` made
 * them durable; a cut before that can leave the manifest torn, or whole but naming data, deletion or index files
 * that are torn. Either way Lance fails on that version (a torn manifest: the dataset does not open at all).
 *
 * Every answered write synced all the dataset's files before it answered (DurableFolder), so a torn file belongs
 * to commits never answered, and only the newest versions can name one. Newest first, each manifest that is
 * torn or names a torn file is moved into `_interrupted/`, with the torn files it named; the first that does
 * neither stops it. A file another process is still writing is named by no manifest yet, so it is never
 * mistaken for one. The oldest manifest is always kept.
 */
export async function setAsideInterruptedCommits(datasetDir: string): Promise<SetAside | undefined> {
  const versionsDir = join(datasetDir, '_versions');
  const manifests = (await listed(versionsDir))
    .flatMap((entry) => {
      const version = manifestVersion(entry.name);
      return version === undefined ? [] : [{ name: entry.name, version }];
    })
    .sort((a, b) => (a.version > b.version ? -1 : a.version < b.version ? 1 : 0));
  if (manifests.length < 2) return undefined;
  const torn = await tornFiles(datasetDir);
  const aside: SetAside = { manifests: [], files: [] };
  const files = new Set<string>();
  for (const manifest of manifests.slice(0, -1)) {
    const bytes = await fs.readFile(join(versionsDir, manifest.name));
    const whole = bytes.length >= 16 && bytes.subarray(bytes.length - LANCE_END.length).equals(LANCE_END);
    const names = whole ? torn.filter((file) => bytes.includes(file.named)) : [];
    if (whole && names.length === 0) break;
    aside.manifests.push(join('_versions', manifest.name));
    for (const file of names) files.add(relative(datasetDir, file.path));
  }
  if (aside.manifests.length === 0) return undefined;
  aside.files = [...files];
  // Manifests first: once they are gone, no version names the torn files.
  for (const path of [...aside.manifests, ...aside.files]) await moveAside(datasetDir, path);
  return aside;
}

/** Moves a file of the dataset to the same place under `_interrupted/`, durably. */
async function moveAside(datasetDir: string, path: string): Promise<void> {
  const to = join(datasetDir, '_interrupted', path);
  await fs.mkdir(dirname(to), { recursive: true });
  await fs.rename(join(datasetDir, path), to);
  await fsyncPath(dirname(join(datasetDir, path)));
  await fsyncPath(dirname(to));
}
