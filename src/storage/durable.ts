import { type BigIntStats, type Dirent, promises as fs } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/** Files Lance writes again under the same name on every commit. */
const REWRITTEN = /^latest_version_hint\.json$/;

/**
 * A folder whose modification time is this old is trusted not to have changed while its time stayed the same:
 * the kernel stamps times at a coarse clock (a few ms), so two changes close together can share one.
 */
const SETTLED_MS = 1000;

/** What a folder held when it was last read, all of it synced. */
interface Seen {
  mtimeNs: bigint;
  files: Set<string>;
  folders: Set<string>;
  /** Its files Lance writes again under the same name (`REWRITTEN`). */
  rewritten: string[];
}

/** What one pass found to sync: files, then the folders read (with what they now hold). */
interface Found {
  files: string[];
  folders: { path: string; seen: Seen; gained: boolean }[];
}

export const gone = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

/** Fsyncs a file or folder; one that is gone (cleaned up since it was listed) needs nothing. */
export async function fsyncPath(path: string): Promise<boolean> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(path, 'r');
  } catch (err) {
    if (gone(err)) return false;
    throw err;
  }
  try {
    await handle.sync();
    return true;
  } finally {
    await handle.close();
  }
}

/**
 * Makes what Lance wrote under one local dataset folder durable. Lance writes local files through the page
 * cache and never fsyncs them, so without this an acknowledged write could be lost to a power cut or a crash of
 * the machine (an S3 PUT is answered only once stored). Measured on this VM after bench/sql.ts's appends: 1.6–1.9
 * GB of them were still dirty pages, up to ~30 s after being acknowledged.
 *
 * Lance never changes a file it wrote (but `REWRITTEN`), so each file is synced once: `sync` fsyncs the files it
 * has not synced before, then every folder that gained an entry, so that the new names are durable too. A
 * folder unchanged since it was last read is not read again, so a write costs what it wrote, not what the
 * dataset holds (versions are kept for minutes, a few files each).
 */
export class DurableFolder {
  private readonly seen = new Map<string, Seen>();

  constructor(readonly root: string) {}

  /** Fsyncs what was written under the folder since the last call; returns how many files it synced. */
  async sync(): Promise<number> {
    const found: Found = { files: [], folders: [] };
    await this.find(this.root, found);
    // The files at once, then their folders at once: a one-row replace's five files took 0.93 ms so against 1.66
    // one after another (the disk takes several flushes together).
    const synced = await Promise.all(found.files.map(fsyncPath));
    await Promise.all(found.folders.filter((f) => f.gained).map((f) => fsyncPath(f.path)));
    for (const { path, seen } of found.folders) this.remember(path, seen);
    return synced.filter(Boolean).length;
  }

  /** The files under the folder not synced yet. */
  async pending(): Promise<string[]> {
    const found: Found = { files: [], folders: [] };
    await this.find(this.root, found);
    return found.files.filter((path) => {
      const folder = this.seen.get(dirname(path));
      return folder === undefined || !folder.files.has(basename(path));
    });
  }

  /** Records what a folder holds, forgetting folders below it that are gone. */
  private remember(path: string, seen: Seen): void {
    for (const name of this.seen.get(path)?.folders ?? []) {
      if (seen.folders.has(name)) continue;
      const below = join(path, name);
      for (const known of [...this.seen.keys()])
        if (known === below || known.startsWith(`${below}/`)) this.seen.delete(known);
    }
    this.seen.set(path, seen);
  }

  /** Adds to `found` what under `dir` needs syncing. */
  private async find(dir: string, found: Found): Promise<void> {
    let stat: BigIntStats;
    try {
      stat = await fs.stat(dir, { bigint: true });
    } catch (err) {
      if (gone(err)) return;
      throw err;
    }
    const before = this.seen.get(dir);
    if (before !== undefined && before.mtimeNs === stat.mtimeNs && Number(stat.mtimeMs) < Date.now() - SETTLED_MS) {
      // No entry came or went: only its folders and the files Lance rewrites may hold something new.
      for (const name of before.rewritten) found.files.push(join(dir, name));
      for (const name of before.folders) await this.find(join(dir, name), found);
      return;
    }
    let entries: Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch (err) {
      if (gone(err)) return;
      throw err;
    }
    const seen: Seen = { mtimeNs: stat.mtimeNs, files: new Set(), folders: new Set(), rewritten: [] };
    let gained = before === undefined;
    // Per entry only what a folder of thousands (versions kept for minutes, one per commit) can afford.
    for (const entry of entries) {
      const name = entry.name;
      if (entry.isDirectory()) {
        seen.folders.add(name);
        if (before?.folders.has(name) !== true) gained = true;
        await this.find(join(dir, name), found);
      } else if (entry.isFile()) {
        seen.files.add(name);
        const fresh = before?.files.has(name) !== true;
        if (fresh) gained = true;
        const rewritten = REWRITTEN.test(name);
        if (rewritten) seen.rewritten.push(name);
        if (fresh || rewritten) found.files.push(join(dir, name));
      }
    }
    found.folders.push({ path: dir, seen, gained });
  }
}

/**
 * Runs one flush (an fsync) for many callers, one at a time: a caller waits for the next flush that begins after
 * it asked, and every caller who asked meanwhile shares that one (group commit). An fsync runs on libuv's
 * threads, so the event loop serves other requests while the disk works. After a failed flush every later one
 * fails too: Linux may drop the pages a failed fsync could not write and report success the next time.
 */
export class GroupSync {
  private running: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  private failed: unknown;

  constructor(private readonly flush: () => Promise<unknown>) {}

  sync(): Promise<void> {
    if (this.failed !== undefined) return Promise.reject(this.failed);
    if (this.queued !== undefined) return this.queued;
    if (this.running === undefined) return this.start();
    // The fsync under way may have begun before the caller's change reached the page cache.
    const queued = this.running
      .catch(() => undefined)
      .then(() => {
        this.queued = undefined;
        return this.failed === undefined ? this.start() : Promise.reject(this.failed);
      });
    this.queued = queued;
    return queued;
  }

  private start(): Promise<void> {
    const run = this.flush()
      .then(
        () => undefined,
        (err: unknown) => {
          this.failed = err;
          throw err;
        },
      )
      .finally(() => {
        if (this.running === run) this.running = undefined;
      });
    this.running = run;
    return run;
  }
}
