/**
 * Statements written once for both control stores: `sql` collects the values it is given as parameters, so no
 * value is ever spliced into the text, and renders the few things the dialects spell differently.
 */

/** The dialects a statement is rendered for. */
export type Dialect = 'sqlite' | 'postgres';

/** A row lock of PostgreSQL's (see `rowLock`). */
class RowLock {
  constructor(readonly clause: string) {}
}

/** The current time in ms, as one clock sees it. */
class Clock {}

export class Sql {
  constructor(
    readonly strings: readonly string[],
    readonly values: readonly unknown[],
  ) {}
}

/** A statement with its parameters collected; a nested `Sql` is spliced in with its own. */
export const sql = (strings: TemplateStringsArray, ...values: unknown[]): Sql => new Sql(strings, values);

/** Text that is the same in both dialects and holds no value (a list of constants, say). */
export const raw = (text: string): Sql => new Sql([text], []);

/**
 * The current time in ms. PostgreSQL reads the database's clock, so that leases and claims are judged by one clock
 * whichever node asks; the embedded store has one process, whose clock it is (read once per statement).
 */
export const now = new Clock();

/**
 * A row lock PostgreSQL takes (`FOR SHARE`, `FOR KEY SHARE OF t`, `FOR UPDATE SKIP LOCKED`). Nothing on SQLite,
 * where a transaction that writes holds the whole file from its start (`BEGIN IMMEDIATE`).
 */
export const rowLock = (clause: string): RowLock => new RowLock(clause);

const POSTGRES_NOW_MS = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

export interface Rendered {
  text: string;
  params: unknown[];
}

/** The statement's text in the dialect, with `?` (SQLite) or `$n` (PostgreSQL) for each parameter. */
export function render(query: Sql, dialect: Dialect): Rendered {
  const params: unknown[] = [];
  /** Read once for the whole statement: its comparisons and the times it writes agree. */
  let clock: number | undefined;
  const param = (value: unknown): string => {
    params.push(value);
    return dialect === 'postgres' ? `$${params.length}` : '?';
  };
  const walk = (part: Sql): string => {
    let text = part.strings[0] ?? '';
    part.values.forEach((value, i) => {
      if (value instanceof Sql) text += walk(value);
      else if (value instanceof RowLock) text += dialect === 'postgres' ? value.clause : '';
      else if (value instanceof Clock) {
        if (dialect === 'postgres') text += POSTGRES_NOW_MS;
        else {
          clock = clock ?? Date.now();
          text += param(clock);
        }
      } else text += param(value);
      text += part.strings[i + 1] ?? '';
    });
    return text;
  };
  return { text: walk(query), params };
}
