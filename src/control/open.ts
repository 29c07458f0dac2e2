import { join } from 'node:path';
import type { Config } from '../config.js';
import { ConfigError } from '../config.js';
import { PostgresControlStore } from './postgres.js';
import { SqliteControlStore } from './sqlite.js';
import type { ControlStore } from './store.js';

/**
 * The store the configuration names: the embedded SQLite file unless `STRATA_CONTROL_URL` names PostgreSQL
 * (`postgres://…`, shared by every node) or another SQLite file (`sqlite:PATH`).
 */
export async function openControlStore(config: Pick<Config, 'controlUrl' | 'dataDir'>): Promise<ControlStore> {
  const url = config.controlUrl;
  if (url === undefined) return SqliteControlStore.open(join(config.dataDir, 'control.sqlite'));
  if (url.startsWith('sqlite:')) return SqliteControlStore.open(url.slice('sqlite:'.length));
  if (/^postgres(?:ql)?:\/\//.test(url)) return PostgresControlStore.open(url);
  throw new ConfigError(
    `STRATA_CONTROL_URL must be postgres://USER:PASSWORD@HOST:PORT/DATABASE or sqlite:PATH, got "${url.replace(/\/\/[^@/]*@/, '//…@')}"`,
  );
}
