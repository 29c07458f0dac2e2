import { join } from 'node:path';
import type { Config } from '../config.js';
import { ConfigError } from '../config.js';
import { SqliteControlStore } from './sqlite.js';
import type { ControlStore } from './store.js';

/** The store the configuration names: the embedded SQLite file unless `STRATA_CONTROL_URL` says otherwise. */
export function openControlStore(config: Pick<Config, 'controlUrl' | 'dataDir'>): ControlStore {
  if (config.controlUrl === undefined) return new SqliteControlStore(join(config.dataDir, 'control.sqlite'));
  if (config.controlUrl.startsWith('sqlite:')) return new SqliteControlStore(config.controlUrl.slice('sqlite:'.length));
  throw new ConfigError(
    `STRATA_CONTROL_URL "${config.controlUrl.split('@').pop()}" is not supported by this build: use the embedded store`,
  );
}
