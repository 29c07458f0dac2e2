import { FLAG_TO_ENV } from '../config.js';

/** The usage of each `strata` command: printed by `strata CMD --help`, and with any usage error of CMD. */

const CLIENT_OPTIONS = `options of every client command:
  --url URL          the service (STRATA_URL, default http://127.0.0.1:8080)
  --api-key KEY      its API key (STRATA_API_KEY)
  --format F         table, json, csv or arrow (a table on a terminal, JSON lines otherwise)
  --help             this command's usage`;

export const USAGES: Readonly<Record<string, string>> = {
  serve: `strata serve [--host H] [--port P] [--data-dir DIR] [--OPTION VALUE]...
  serve the API. Every STRATA_* variable of docs/configuration.md is also a flag, spelled in lower
  case with dashes and without STRATA_ (STRATA_DATA_DIR is --data-dir, STRATA_SQL_TIMEOUT_MS is --sql-timeout-ms);
  a flag wins over its variable.
  --host H           address to listen on (127.0.0.1)
  --port P           port to listen on (8080)
  --data-dir DIR     control store and local-folder buckets (./data)
  --control-url URL  sqlite:/path or postgres://USER:PASSWORD@HOST:PORT/DB (embedded SQLite)
  --log-level L      pino log level (info)
  every flag and its variable (docs/operations.md says what each does):
${Object.entries(FLAG_TO_ENV)
  .map(([flag, env]) => `    --${flag.padEnd(38)} ${env}`)
  .join('\n')}`,
  keys: `strata keys create --account NAME [--data-dir DIR]    issue a key; prints it once on a line of its own
strata keys list [--data-dir DIR]                     list keys (ids, accounts, states; never secrets)
strata keys revoke ID [--data-dir DIR]                revoke a key at once
  --data-dir DIR and --control-url URL pick the control store, as for strata serve`,
  load: `strata load FILE... --database DB --table T [--create] [--fts COL]... [--vector COL:METRIC]... [--scalar COL[:KIND]]...
                  [--primary-key COL] [--upsert] [--batch-rows N] [--concurrency N]
  load Parquet, CSV, TSV, JSON Lines (.jsonl, .ndjson) or Arrow IPC (.arrow, .arrows, .ipc) files; a FILE is a
  path, never a pattern. Run the same command again after an interruption: it resumes, and every row lands
  exactly once.
  --database DB        the database
  --table T            the table
  --create             create the table from the first file's columns (it may exist already)
  --fts COL[:ANALYZER][:positions]
                       with --create: a full-text index on COL, with ANALYZER (ascii_lower by default;
                       english, french, …: stemmed) and, with :positions, word positions for "phrases" (repeatable)
  --vector COL:METRIC  load COL as a vector; with --create, index it with METRIC: cosine, l2sq (l2) or
                       negdot (dot) (repeatable)
  --scalar COL[:KIND]  with --create: a scalar index on COL for filters, predicates and exact_match; KIND btree,
                       bitmap or label_list, by COL's type when not given (repeatable)
  --primary-key COL    with --create: COL names one row each (an integer, string or binary column)
  --upsert             write rows by the table's primary key: a row whose key exists replaces it, the others
                       are inserted (a changed file loaded again lands each key once)
  --batch-rows N       rows per request (10000); a resumed load keeps the value its first run used
  --concurrency N      requests in flight at once (3)`,
  sql: `strata sql --database DB "SELECT ..."
  run one read-only SQL statement over the database's tables
  --database DB      the database`,
  search: `strata search --database DB --table T [--text Q --text-field F] [--vector JSON --vector-field F]
                    [-k N] [--filter P] [--operator or|and] [--prefix] [--fuzziness N]
  full-text (BM25), vector, or hybrid search (both, fused by reciprocal rank)
  --database DB      the database
  --table T          the table
  --text Q           the text query, with --text-field F: the indexed text column; repeat it (F or F:BOOST,
                     e.g. --text-field summary:2 --text-field description) to search several as one leg;
                     "quoted words" are a phrase
  --prefix           the text's last word also finds every word it begins
  --fuzziness N      each word of the text also finds the words within N edits (0, 1 or 2)
  --vector JSON      the query vector as a JSON array, with --vector-field F: the indexed vector column
  -k N               rows to return (10)
  --filter P         a predicate the rows must match, e.g. "price < 10"
  --operator OP      how the text query's tokens combine: or (default) or and
  --explain          each row's rank, score and share in each leg (an _explain column), and on stderr what
                     each leg read and how long it took`,
  count: `strata count --database DB --table T --field F [--field F]... [--operator or|and] QUERY
  count the rows whose full-text indexed column F (or any of several) matches QUERY
  --database DB      the database
  --table T          the table
  --field F          the indexed text column
  --operator OP      how the query's tokens combine: or (default) or and`,
  databases: `strata databases list
strata databases create NAME [--bucket B] [--prefix P]   register a database on a local folder (bucket NAME)
strata databases verify NAME                            prove the storage grant; the database becomes active
strata databases delete NAME [--purge]                  unregister it; --purge also deletes its tables' files`,
  tables: `strata tables list --database DB
strata tables schema T --database DB                    its columns and index declarations
strata tables drop T --database DB [--purge]            drop it; --purge also deletes its files`,
  upkeep: `strata upkeep status|pause|resume [--admin-key KEY]
  whether index upkeep is paused on the node at --url, or pause or resume it there (each node on its own: behind a
  load balancer, address each node by its URL). A pause starts no upkeep step until resumed, and answers once the
  passes under way have ended (or after 30 s). Takes the node's admin key (STRATA_ADMIN_KEY), not an API key.
  --admin-key KEY    the node's admin key (STRATA_ADMIN_KEY)`,
};

/** The usage of one command, with the client options where they apply. */
export function usageOf(command: string): string {
  const own = USAGES[command];
  if (own === undefined) return allUsage();
  const client = command !== 'serve' && command !== 'keys';
  return `usage:\n${indent(own)}${client ? `\n${CLIENT_OPTIONS}` : ''}\n`;
}

/** Every command's first lines: what a bare `strata` prints. */
export function allUsage(): string {
  const lines = Object.values(USAGES).flatMap((usage) => usage.split('\n').filter((line) => line.startsWith('strata')));
  return `usage:\n${indent(lines.join('\n'))}\n${CLIENT_OPTIONS}\n\`strata COMMAND --help\` says more about one command.\n`;
}

const indent = (text: string) =>
  text
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n');

/** Whether a command's arguments ask for its usage (before `--`, where `--help` is an argument). */
export function wantsHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end < 0 ? args : args.slice(0, end)).some((arg) => arg === '--help' || arg === '-h');
}
