import { createHash } from 'node:crypto';
import { availableParallelism, totalmem } from 'node:os';
import { resolve } from 'node:path';

/** Every setting Strata reads, parsed once from the environment (and CLI flags, which override it). */
export interface Config {
  host: string;
  port: number;
  dataDir: string;
  bootstrapKey: string | undefined;
  localStorage: boolean;
  allowInsecureEndpoints: boolean;
  /**
   * Whether an S3 binding without `role_arn` may use the server's own AWS identity. Off by default: on a
   * hosted node that identity reaches other customers' buckets, so any account could bind them (ext).
   */
  allowServerIdentity: boolean;
  maxBodyBytes: number;
  /** How long a request body may go without a byte arriving before the connection is closed (ext). */
  bodyIdleMs: number;
  sqlTimeoutMs: number;
  sqlMaxRows: number;
  /** DuckDB memory limit of each database's SQL engine, MiB; beyond it queries spill or fail (ext). */
  sqlMemoryMb: number;
  /**
   * MiB the SQL copies of all the node's databases may hold together (ext): a load that would pass it lets go of
   * idle databases' copies first, and is refused with 503 `sql_memory_busy` when that is not enough.
   */
  sqlNodeMemoryMb: number;
  /** DuckDB threads of each database's SQL engine (ext). */
  sqlThreads: number;
  maxActiveDatabases: number;
  /** How long a worker may sit unused before it is let go (ext). */
  workerIdleMs: number;
  /** Requests per minute per API key before 429 (ext). */
  rateLimitPerMinute: number;
  /** Failed authentications per minute per client address before 429 (ext). */
  authFailuresPerMinute: number;
  /** Per-tenant limits (ext): what one account may hold and run, so that it cannot starve the others. */
  limits: TenantLimits;
  /** Pause between index upkeep passes of a database (ext). */
  upkeepIntervalMs: number;
  /** How long a node's upkeep lease on a table lasts unrenewed: how soon another node takes over from a dead one. */
  upkeepLeaseMs: number;
  /** How long an idempotency key is remembered after its write (docs/api.md). */
  idempotencyTtlMs: number;
  /** How long a write holds its idempotency key unrenewed: a retry after its node died waits at most this long. */
  idempotencyHoldMs: number;
  /** Rows at which a vector column gets its ANN index; below it searches scan exactly (ext). */
  annMinRows: number;
  /**
   * While writes go on, rows outside a table's search indexes that its fresh rows hold are folded in by upkeep
   * once they number this many or are `upkeepHeldTailMs` old, rather than on every pass (ext).
   */
  upkeepHeldTailRows: number;
  upkeepHeldTailMs: number;
  /**
   * Rows of a table its search indexes may miss before appends and updates to it are refused with 429
   * `index_behind` until upkeep folds them in (ext): searches scan those rows outside the indexes.
   */
  maxUnindexedRows: number;
  /**
   * Bytes the fresh rows (searched beside the indexes by the node that wrote them) of all tables may take on a
   * node (ext); past it, the largest let go of theirs and their searches read Lance's way until upkeep folds them.
   */
  freshTierBytes: number;
  /**
   * Where nodes share a store, whether each node's fresh tier follows the tables it searches (`FreshRows.follow`);
   * `STRATA_FRESH_FOLLOW=0` leaves the rows outside the indexes to Lance there.
   */
  freshFollow: boolean;
  /** Upkeep makes no commits while set: for maintenance windows, and for measuring search over a tail (ext). */
  upkeepPaused: boolean;
  /**
   * The SHA-256 (hex) of the node's admin key (`STRATA_ADMIN_KEY`), which the admin routes take as their bearer
   * token; undefined turns them off. The key itself is not kept.
   */
  adminKeyHash: string | undefined;
  /**
   * How long old table versions are kept before upkeep prunes them (ext). The API serves only the latest
   * version; old ones are kept for reads still running on them (on any node) and cost the bucket their size.
   */
  versionRetentionMs: number;
  controlUrl: string | undefined;
  logLevel: string;
  aws: AwsConfig;
}

export interface TenantLimits {
  /** Databases one account may register. */
  databasesPerAccount: number;
  /** Tables one database may hold. */
  tablesPerDatabase: number;
  /** Requests of one account running at once on a node; more wait for nothing and get 429. */
  concurrentRequestsPerAccount: number;
  /** Share (percent) of a node's database workers one account's databases may hold. */
  workerSharePercent: number;
  /** Bytes a SQL result or a row reply may encode to; larger ones are refused with 400. */
  maxResultBytes: number;
}

/** The server's own AWS identity and where STS lives; customer endpoints are per binding, not here. */
export interface AwsConfig {
  accessKeyId: string | undefined;
  secretAccessKey: string | undefined;
  sessionToken: string | undefined;
  /** Override of the STS endpoint (ext; tests point it at a local double). */
  stsEndpoint: string | undefined;
  stsRegion: string;
}

export type Env = Readonly<Record<string, string | undefined>>;

export class ConfigError extends Error {}

/** Each `strata serve` flag and the variable it sets. */
export const FLAG_TO_ENV: Readonly<Record<string, string>> = {
  host: 'STRATA_HOST',
  port: 'STRATA_PORT',
  'data-dir': 'STRATA_DATA_DIR',
  'bootstrap-key': 'STRATA_BOOTSTRAP_KEY',
  'local-storage': 'STRATA_LOCAL_STORAGE',
  'allow-insecure-endpoints': 'STRATA_ALLOW_INSECURE_ENDPOINTS',
  'allow-server-identity': 'STRATA_ALLOW_SERVER_IDENTITY',
  'max-body-bytes': 'STRATA_MAX_BODY_BYTES',
  'body-idle-ms': 'STRATA_BODY_IDLE_MS',
  'auth-failures-per-minute': 'STRATA_AUTH_FAILURES_PER_MINUTE',
  'max-databases-per-account': 'STRATA_MAX_DATABASES_PER_ACCOUNT',
  'max-tables-per-database': 'STRATA_MAX_TABLES_PER_DATABASE',
  'max-concurrent-requests-per-account': 'STRATA_MAX_CONCURRENT_REQUESTS_PER_ACCOUNT',
  'max-worker-share-percent': 'STRATA_MAX_WORKER_SHARE_PERCENT',
  'max-result-bytes': 'STRATA_MAX_RESULT_BYTES',
  'sql-timeout-ms': 'STRATA_SQL_TIMEOUT_MS',
  'sql-max-rows': 'STRATA_SQL_MAX_ROWS',
  'sql-memory-mb': 'STRATA_SQL_MEMORY_MB',
  'sql-node-memory-mb': 'STRATA_SQL_NODE_MEMORY_MB',
  'sql-threads': 'STRATA_SQL_THREADS',
  'max-active-databases': 'STRATA_MAX_ACTIVE_DATABASES',
  'worker-idle-ms': 'STRATA_WORKER_IDLE_MS',
  'rate-limit-per-minute': 'STRATA_RATE_LIMIT_PER_MINUTE',
  'control-url': 'STRATA_CONTROL_URL',
  'upkeep-interval-ms': 'STRATA_UPKEEP_INTERVAL_MS',
  'upkeep-lease-ms': 'STRATA_UPKEEP_LEASE_MS',
  'idempotency-ttl-ms': 'STRATA_IDEMPOTENCY_TTL_MS',
  'idempotency-hold-ms': 'STRATA_IDEMPOTENCY_HOLD_MS',
  'ann-min-rows': 'STRATA_ANN_MIN_ROWS',
  'upkeep-held-tail-rows': 'STRATA_UPKEEP_HELD_TAIL_ROWS',
  'upkeep-held-tail-ms': 'STRATA_UPKEEP_HELD_TAIL_MS',
  'version-retention-ms': 'STRATA_VERSION_RETENTION_MS',
  'log-level': 'STRATA_LOG_LEVEL',
};

/** `--data-dir x` / `--data-dir=x` become the matching STRATA_* variable; unknown flags are an error. */
export function flagsToEnv(flags: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < flags.length; i++) {
    const arg = flags[i] ?? '';
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    const name = match?.[1];
    const envName = name === undefined ? undefined : FLAG_TO_ENV[name];
    if (match === null || envName === undefined) throw new ConfigError(`unknown option ${arg}`);
    let value = match[2];
    if (value === undefined) {
      value = flags[i + 1];
      if (value === undefined) throw new ConfigError(`option --${name} needs a value`);
      i++;
    }
    out[envName] = value;
  }
  return out;
}

function integer(env: Env, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || !Number.isSafeInteger(Number(raw))) {
    throw new ConfigError(`${name} must be an integer ≥ ${min}, got "${raw}"`);
  }
  return Number(raw);
}

function percent(env: Env, name: string, fallback: number): number {
  const value = integer(env, name, fallback, 1);
  if (value > 100) throw new ConfigError(`${name} must be a percentage from 1 to 100, got "${value}"`);
  return value;
}

function flag(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw.toLowerCase())) return true;
  if (['0', 'false', 'no', 'off'].includes(raw.toLowerCase())) return false;
  throw new ConfigError(`${name} must be 1 or 0, got "${raw}"`);
}

function text(env: Env, name: string): string | undefined {
  const raw = env[name];
  return raw === undefined || raw === '' ? undefined : raw;
}

/** The least an admin key may hold, in characters: guessing it must be as hopeless as guessing an API key. */
const ADMIN_KEY_MIN = 32;

function adminKey(env: Env): string | undefined {
  const raw = text(env, 'STRATA_ADMIN_KEY');
  if (raw === undefined) return undefined;
  // Printable ASCII only: a header carries nothing else as the same bytes, so another key could never match.
  if (raw.length < ADMIN_KEY_MIN || !/^[\x21-\x7e]+$/.test(raw)) {
    throw new ConfigError(
      `STRATA_ADMIN_KEY must be at least ${ADMIN_KEY_MIN} printable ASCII characters without spaces`,
    );
  }
  return createHash('sha256').update(raw).digest('hex');
}

/** What the node's memory allows, for the defaults that are a share of it. */
export interface Machine {
  /** Bytes of memory the process may use: the machine's, or its container's limit when that is lower. */
  memoryBytes: number;
}

export function thisMachine(): Machine {
  // A container's limit is what an out-of-memory kill enforces; os.totalmem() reports the host's memory there.
  const constrained = process.constrainedMemory?.() ?? 0;
  const total = totalmem();
  return { memoryBytes: constrained > 0 && constrained < total ? constrained : total };
}

const MIB = 1024 * 1024;

/**
 * The SQL memory settings, checked against each other. Half the machine goes to SQL copies by default: the other
 * half is for what no budget bounds, each query's own working memory (up to `STRATA_SQL_MEMORY_MB` in each
 * database), Lance's reads and caches, the upkeep process, Node's heap and the page cache the buckets' files
 * are read through. A database's limit above the node's budget could never be met, so it refuses to start.
 */
function sqlMemory(env: Env, machine: Machine): { sqlMemoryMb: number; sqlNodeMemoryMb: number } {
  const machineMb = Math.floor(machine.memoryBytes / MIB);
  const sqlNodeMemoryMb = integer(env, 'STRATA_SQL_NODE_MEMORY_MB', Math.max(64, Math.floor(machineMb / 2)), 64);
  if (sqlNodeMemoryMb > machineMb) {
    throw new ConfigError(
      `STRATA_SQL_NODE_MEMORY_MB (${sqlNodeMemoryMb}) is more than this machine's memory (${machineMb} MiB)`,
    );
  }
  // Unset, a database's limit is 4 GiB or the whole node budget when that is smaller: a small machine starts.
  const sqlMemoryMb = integer(env, 'STRATA_SQL_MEMORY_MB', Math.min(4096, sqlNodeMemoryMb), 64);
  if (sqlMemoryMb > sqlNodeMemoryMb) {
    throw new ConfigError(
      `STRATA_SQL_MEMORY_MB (${sqlMemoryMb}, each database) is more than STRATA_SQL_NODE_MEMORY_MB (${sqlNodeMemoryMb}, all databases of the node together); lower the first or raise the second`,
    );
  }
  return { sqlMemoryMb, sqlNodeMemoryMb };
}

/**
 * How many holds a key must outlive. A key is held by its request (renewed while it runs) and, if its node dies,
 * until the hold lapses and a retry takes it over; a key that expired meanwhile could be reused for another write.
 * Expiry never drops an unresolved key (`decide`), but a TTL near the hold makes every slow write such a case.
 */
const TTL_HOLDS = 10;

function idempotency(env: Env): { idempotencyTtlMs: number; idempotencyHoldMs: number } {
  const idempotencyTtlMs = integer(env, 'STRATA_IDEMPOTENCY_TTL_MS', 86_400_000, 1000);
  const idempotencyHoldMs = integer(env, 'STRATA_IDEMPOTENCY_HOLD_MS', 10_000, 100);
  if (idempotencyTtlMs < TTL_HOLDS * idempotencyHoldMs) {
    throw new ConfigError(
      `STRATA_IDEMPOTENCY_TTL_MS (${idempotencyTtlMs}) must be at least ${TTL_HOLDS} times STRATA_IDEMPOTENCY_HOLD_MS (${idempotencyHoldMs}): a key must outlive the holds of the writes it names; raise the first or lower the second`,
    );
  }
  return { idempotencyTtlMs, idempotencyHoldMs };
}

export function loadConfig(env: Env, machine: Machine = thisMachine()): Config {
  const bootstrapKey = text(env, 'STRATA_BOOTSTRAP_KEY');
  if (bootstrapKey !== undefined && !/^sk_[A-Za-z0-9_-]{32,}$/.test(bootstrapKey)) {
    throw new ConfigError('STRATA_BOOTSTRAP_KEY must be "sk_" followed by at least 32 URL-safe characters');
  }
  return {
    host: text(env, 'STRATA_HOST') ?? '127.0.0.1',
    port: integer(env, 'STRATA_PORT', 8080, 0),
    dataDir: resolve(text(env, 'STRATA_DATA_DIR') ?? './data'),
    bootstrapKey,
    localStorage: flag(env, 'STRATA_LOCAL_STORAGE', true),
    allowInsecureEndpoints: flag(env, 'STRATA_ALLOW_INSECURE_ENDPOINTS', false),
    allowServerIdentity: flag(env, 'STRATA_ALLOW_SERVER_IDENTITY', false),
    maxBodyBytes: integer(env, 'STRATA_MAX_BODY_BYTES', 256 * 1024 * 1024, 1),
    bodyIdleMs: integer(env, 'STRATA_BODY_IDLE_MS', 30_000, 100),
    sqlTimeoutMs: integer(env, 'STRATA_SQL_TIMEOUT_MS', 30_000, 1),
    sqlMaxRows: integer(env, 'STRATA_SQL_MAX_ROWS', 1_000_000, 1),
    ...sqlMemory(env, machine),
    sqlThreads: integer(env, 'STRATA_SQL_THREADS', Math.max(1, availableParallelism()), 1),
    maxActiveDatabases: integer(env, 'STRATA_MAX_ACTIVE_DATABASES', 64, 1),
    workerIdleMs: integer(env, 'STRATA_WORKER_IDLE_MS', 300_000, 1),
    rateLimitPerMinute: integer(env, 'STRATA_RATE_LIMIT_PER_MINUTE', 60_000, 1),
    authFailuresPerMinute: integer(env, 'STRATA_AUTH_FAILURES_PER_MINUTE', 60, 1),
    limits: {
      databasesPerAccount: integer(env, 'STRATA_MAX_DATABASES_PER_ACCOUNT', 100, 1),
      tablesPerDatabase: integer(env, 'STRATA_MAX_TABLES_PER_DATABASE', 1000, 1),
      concurrentRequestsPerAccount: integer(env, 'STRATA_MAX_CONCURRENT_REQUESTS_PER_ACCOUNT', 64, 1),
      workerSharePercent: percent(env, 'STRATA_MAX_WORKER_SHARE_PERCENT', 50),
      maxResultBytes: integer(env, 'STRATA_MAX_RESULT_BYTES', 512 * 1024 * 1024, 1024),
    },
    upkeepIntervalMs: integer(env, 'STRATA_UPKEEP_INTERVAL_MS', 5_000, 10),
    upkeepLeaseMs: integer(env, 'STRATA_UPKEEP_LEASE_MS', 30_000, 300),
    ...idempotency(env),
    annMinRows: integer(env, 'STRATA_ANN_MIN_ROWS', 25_000, 1),
    upkeepHeldTailRows: integer(env, 'STRATA_UPKEEP_HELD_TAIL_ROWS', 50_000, 0),
    upkeepHeldTailMs: integer(env, 'STRATA_UPKEEP_HELD_TAIL_MS', 30_000, 0),
    maxUnindexedRows: integer(env, 'STRATA_MAX_UNINDEXED_ROWS', 500_000, 1),
    freshTierBytes: integer(env, 'STRATA_FRESH_TIER_MB', 1024, 0) * 1024 * 1024,
    freshFollow: flag(env, 'STRATA_FRESH_FOLLOW', true),
    upkeepPaused: flag(env, 'STRATA_UPKEEP_PAUSED', false),
    adminKeyHash: adminKey(env),
    versionRetentionMs: integer(env, 'STRATA_VERSION_RETENTION_MS', 600_000, 0),
    controlUrl: text(env, 'STRATA_CONTROL_URL'),
    logLevel: text(env, 'STRATA_LOG_LEVEL') ?? 'info',
    aws: {
      accessKeyId: text(env, 'AWS_ACCESS_KEY_ID'),
      secretAccessKey: text(env, 'AWS_SECRET_ACCESS_KEY'),
      sessionToken: text(env, 'AWS_SESSION_TOKEN'),
      stsEndpoint: text(env, 'STRATA_STS_ENDPOINT'),
      stsRegion: text(env, 'AWS_REGION') ?? 'us-east-1',
    },
  };
}
