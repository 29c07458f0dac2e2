import { randomUUID } from 'node:crypto';
import { lstat, mkdir, open, readdir, readFile, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import type { Binding } from './binding.js';
import { prefixSegments } from './binding.js';
import { asStorageError, type ObjectStore, StorageError, tooLarge } from './objects.js';

type LocalBinding = Extract<Binding, { provider: 'local' }>;

/**
 * A "bucket" that is a folder under `<data dir>/buckets/`. Every path is built from checked segments and
 * every existing component is checked not to be a symbolic link, so a binding can never reach outside.
 */
export class LocalObjects implements ObjectStore {
  private readonly root: string;

  constructor(
    private readonly bucketsDir: string,
    binding: LocalBinding,
  ) {
    this.root = join(bucketsDir, binding.bucket, ...prefixSegments(binding.prefix));
  }

  /** The folder that holds this binding's objects: `<prefix>` inside the bucket folder. */
  get location(): string {
    return this.root;
  }

  private path(key: string): string {
    return join(this.root, ...prefixSegments(key));
  }

  /** Refuses when any existing component between the buckets folder and `path` is a link or not a folder. */
  private async assertContained(path: string): Promise<void> {
    const parts = relative(this.bucketsDir, path)
      .split(sep)
      .filter((part) => part !== '');
    let current = this.bucketsDir;
    for (const part of parts) {
      current = join(current, part);
      const info = await lstat(current).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return undefined;
        throw err;
      });
      if (info === undefined) return;
      if (info.isSymbolicLink()) throw new StorageError('SymbolicLink', `${part} is a symbolic link`);
    }
  }

  private async run<T>(path: string, op: () => Promise<T>): Promise<T> {
    try {
      await this.assertContained(path);
      return await op();
    } catch (err) {
      throw asStorageError(err);
    }
  }

  async checkCredentials(): Promise<void> {
    await this.run(this.root, async () => {
      await mkdir(this.bucketsDir, { recursive: true });
      await mkdir(this.root, { recursive: true });
    });
  }

  async put(key: string, bytes: Uint8Array): Promise<void> {
    const path = this.path(key);
    await this.run(path, async () => {
      await mkdir(dirname(path), { recursive: true });
      // Written aside and renamed over: a reader finds the old object or the new one, never a part.
      const aside = `${path}.${randomUUID()}.part`;
      try {
        await writeFile(aside, bytes);
        await rename(aside, path);
      } catch (err) {
        await unlink(aside).catch(() => undefined);
        throw err;
      }
    });
  }

  async get(key: string, maxBytes?: number): Promise<Uint8Array> {
    const path = this.path(key);
    if (maxBytes === undefined) return this.run(path, () => readFile(path));
    return this.run(path, async () => {
      const file = await open(path, 'r');
      try {
        const { size } = await file.stat();
        if (size > maxBytes) throw tooLarge(key, maxBytes);
        const bytes = new Uint8Array(size);
        const { bytesRead } = await file.read(bytes, 0, size, 0);
        return bytes.subarray(0, bytesRead);
      } finally {
        await file.close();
      }
    });
  }

  async list(prefix: string): Promise<string[]> {
    const dir = this.path(prefix);
    return this.run(dir, async () => {
      const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(
        (err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return [];
          throw err;
        },
      );
      return entries
        .filter((entry) => entry.isFile())
        .map((entry) => relative(this.root, join(entry.parentPath, entry.name)).split(sep).join('/'))
        .sort();
    });
  }

  async putIfAbsent(key: string, bytes: Uint8Array): Promise<'refused' | 'written'> {
    const path = this.path(key);
    return this.run(path, async () => {
      await mkdir(dirname(path), { recursive: true });
      try {
        await writeFile(path, bytes, { flag: 'wx' });
        return 'written' as const;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') return 'refused' as const;
        throw err;
      }
    });
  }

  async delete(key: string): Promise<void> {
    const path = this.path(key);
    await this.run(path, () => unlink(path));
  }

  async deletePrefix(prefix: string): Promise<number> {
    const count = (await this.list(prefix)).length;
    const dir = this.path(prefix);
    await this.run(dir, () => rm(dir, { recursive: true, force: true }));
    return count;
  }
}
