import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * What this machine remembers of a file's load into a table: the settings its first run used. The service's
 * idempotency keys say which rows landed; they match only requests of the same rows, so a run again must group
 * the rows as the first run did, and this record says how.
 */
export interface LoadRecord {
  file: string;
  url: string;
  database: string;
  table: string;
  batchRows: number;
  startedMs: number;
}

/** `$XDG_STATE_HOME/strata/loads`, or `~/.local/state/strata/loads` (the XDG base directory default). */
function recordsDir(): string {
  const state = process.env.XDG_STATE_HOME;
  return join(state !== undefined && state !== '' ? state : join(homedir(), '.local', 'state'), 'strata', 'loads');
}

/** The record's file: one per service and key prefix (which names the file, its version, database and table). */
export function recordPath(url: string, keyPrefix: string): string {
  return join(recordsDir(), `${createHash('sha256').update(`${url}\n${keyPrefix}`).digest('hex').slice(0, 32)}.json`);
}

export function readRecord(path: string): LoadRecord | undefined {
  try {
    const record = JSON.parse(readFileSync(path, 'utf8')) as Partial<LoadRecord>;
    return typeof record.batchRows === 'number' ? (record as LoadRecord) : undefined;
  } catch {
    return undefined;
  }
}

/** Writes the record (whole or not at all); false when it cannot be written, and the load goes on without it. */
export function writeRecord(path: string, record: LoadRecord): boolean {
  try {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(`${path}.tmp`, `${JSON.stringify(record)}\n`);
    renameSync(`${path}.tmp`, path);
    return true;
  } catch {
    return false;
  }
}
