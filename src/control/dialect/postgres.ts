import type pg from 'pg';
import { StrataError } from '../../errors.js';
import type { ControlEvent } from '../events.js';
import { type Db, type RunResult, type TransactionOptions, type Tx, unavailable } from './db.js';
import { render, type Sql } from './sql.js';

/** The channel on which nodes tell each other what changed (LISTEN/NOTIFY). */
export const CONTROL_CHANNEL = 'strata_control';

/**
 * Whether an error means PostgreSQL could not be reached or went away, rather than that it refused the
 * statement: no SQLSTATE at all (a socket error, a timeout), or a class that names the connection or the
 * server's state (08 connection, 57P shutdown, 53 resources).
 */
export function isUnreachable(err: unknown): boolean {
  if (err instanceof StrataError) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return code.startsWith('08') || code.startsWith('57P') || code.startsWith('53');
}

type Client = pg.Pool | pg.PoolClient;

async function query<Row extends object>(client: Client, statement: Sql): Promise<pg.QueryResult<Row>> {
  const { text, params } = render(statement, 'postgres');
  return client.query<Row>(text, params);
}

/**
 * Runs one call of the driver: an error that says PostgreSQL could not be reached becomes `Unavailable`, and
 * `broke` is told (the connection is not given back to the pool); an error it answered is left as it is.
 */
async function reached<T>(run: () => Promise<T>, broke?: () => void): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (!isUnreachable(err)) throw err;
    broke?.();
    throw unavailable();
  }
}

class PostgresTx implements Tx {
  /** Whether the connection broke under the transaction. */
  broken = false;

  constructor(private readonly client: pg.PoolClient) {}

  private query<Row extends object>(statement: Sql): Promise<pg.QueryResult<Row>> {
    return reached(
      () => query<Row>(this.client, statement),
      () => {
        this.broken = true;
      },
    );
  }

  private call(text: string, params: unknown[] = []): Promise<unknown> {
    return reached(
      () => this.client.query(text, params),
      () => {
        this.broken = true;
      },
    );
  }

  async run(statement: Sql): Promise<RunResult> {
    return { changes: (await this.query(statement)).rowCount ?? 0 };
  }

  async all<Row extends object>(statement: Sql): Promise<Row[]> {
    return (await this.query<Row>(statement)).rows;
  }

  async get<Row extends object>(statement: Sql): Promise<Row | undefined> {
    return (await this.query<Row>(statement)).rows[0];
  }

  async notify(event: ControlEvent): Promise<void> {
    await this.call('SELECT pg_notify($1, $2)', [CONTROL_CHANNEL, JSON.stringify(event)]);
  }

  async lock(key: number): Promise<void> {
    await this.call('SELECT pg_advisory_xact_lock($1)', [key]);
  }

  async exec(script: string): Promise<void> {
    await this.call(script);
  }

  begin = () => this.call('BEGIN');
  commit = () => this.call('COMMIT');
}

/** The statements of either store, run on PostgreSQL; a store that cannot be reached answers `Unavailable`. */
export class PostgresDb implements Db {
  readonly dialect = 'postgres' as const;

  constructor(private readonly pool: pg.Pool) {}

  async run(statement: Sql): Promise<RunResult> {
    return { changes: (await reached(() => query(this.pool, statement))).rowCount ?? 0 };
  }

  async all<Row extends object>(statement: Sql): Promise<Row[]> {
    return (await reached(() => query<Row>(this.pool, statement))).rows;
  }

  async get<Row extends object>(statement: Sql): Promise<Row | undefined> {
    return (await reached(() => query<Row>(this.pool, statement))).rows[0];
  }

  /** Runs `work` in one transaction on one connection. */
  async transaction<T>(work: (tx: Tx) => Promise<T>, _options?: TransactionOptions): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch {
      throw unavailable();
    }
    const tx = new PostgresTx(client);
    try {
      await tx.begin();
      const result = await work(tx);
      await tx.commit();
      return result;
    } catch (err) {
      if (!tx.broken) await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release(tx.broken);
    }
  }
}
