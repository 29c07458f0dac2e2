import { parseArgs } from 'node:util';
import { type Database, type FieldSpec, Strata, StrataError } from '@strata/client';
import type { Table } from 'apache-arrow';
import { arrow } from '../arrow/arrow.js';
import { type FileKind, kindOf, loadKeyPrefix, openFile, serviceType } from './files.js';
import { FORMATS, type Format, render } from './output.js';
import { Progress } from './progress.js';

export const CLIENT_USAGE = `  strata load FILE... --database DB --table T [--create] [--fts COL]... [--vector COL:METRIC]...
      [--batch-rows N (10000)] [--concurrency N (3)]        load Parquet, CSV, TSV, JSON Lines or Arrow IPC files
  strata sql --database DB "SELECT ..."                     run one read-only SQL statement
  strata search --database DB --table T [--text Q --text-field F] [--vector JSON --vector-field F] [-k N] [--filter P]
  strata count --database DB --table T --field F QUERY      count full-text matches
  strata databases list | create NAME [--bucket B] | verify NAME | delete NAME [--purge]
  strata tables list --database DB | schema T --database DB | drop T --database DB [--purge]
  client commands take --url (STRATA_URL, default http://127.0.0.1:8080), --api-key (STRATA_API_KEY) and
  --format table|json|csv|arrow (a table on a terminal, JSON lines otherwise)`;

/** Bad usage: exit code 2, with the usage. */
export class UsageError extends Error {}

const COMMON = {
  url: { type: 'string' },
  'api-key': { type: 'string' },
  database: { type: 'string' },
  table: { type: 'string' },
  format: { type: 'string' },
} as const;

type Parsed = { values: Record<string, string | boolean | string[] | undefined>; positionals: string[] };

function parse(
  args: string[],
  extra: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }>,
): Parsed {
  try {
    return parseArgs({ args, options: { ...COMMON, ...extra }, allowPositionals: true, strict: true }) as Parsed;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function required(parsed: Parsed, name: string): string {
  const value = parsed.values[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

function clientOf(parsed: Parsed): Strata {
  const url = (parsed.values.url as string | undefined) ?? process.env.STRATA_URL ?? 'http://127.0.0.1:8080';
  const apiKey = (parsed.values['api-key'] as string | undefined) ?? process.env.STRATA_API_KEY;
  if (apiKey === undefined || apiKey === '')
    throw new UsageError('an API key is required: --api-key or STRATA_API_KEY');
  // A load outlasts a restart of the service: a dead node's hold on a request's key lapses within seconds.
  return new Strata({ url, apiKey, retry: { retries: 30, baseDelayMs: 250, maxDelayMs: 5000 } });
}

function formatOf(parsed: Parsed): Format {
  const format = parsed.values.format as string | undefined;
  if (format === undefined) return process.stdout.isTTY ? 'table' : 'json';
  if (!(FORMATS as readonly string[]).includes(format))
    throw new UsageError(`--format must be one of ${FORMATS.join(', ')}`);
  return format as Format;
}

function print(table: Table, format: Format): void {
  process.stdout.write(render(table, format));
}

function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, process.stdout.isTTY ? 2 : undefined)}\n`);
}

/** Runs a client command; undefined when `command` is not one. */
export async function runClientCommand(command: string, args: string[]): Promise<number | undefined> {
  const run = COMMANDS[command];
  if (run === undefined) return undefined;
  try {
    return await run(args);
  } catch (err) {
    if (err instanceof StrataError) {
      process.stderr.write(`strata: ${err.message}${err.code === undefined ? '' : ` (${err.code})`}\n`);
      return 1;
    }
    throw err;
  }
}

const COMMANDS: Readonly<Record<string, (args: string[]) => Promise<number>>> = {
  load,
  sql: async (args) => {
    const parsed = parse(args, {});
    const query = parsed.positionals.join(' ');
    if (query.trim() === '') throw new UsageError('sql needs a statement');
    print((await clientOf(parsed).database(required(parsed, 'database')).sql(query)) as Table, formatOf(parsed));
    return 0;
  },
  search: async (args) => {
    const parsed = parse(args, {
      text: { type: 'string' },
      'text-field': { type: 'string' },
      vector: { type: 'string' },
      'vector-field': { type: 'string' },
      k: { type: 'string', short: 'k' },
      filter: { type: 'string' },
      operator: { type: 'string' },
    });
    const v = parsed.values;
    let vector: number[] | undefined;
    if (typeof v.vector === 'string') {
      vector = JSON.parse(v.vector) as number[];
      if (!Array.isArray(vector)) throw new UsageError('--vector must be a JSON array of numbers');
    }
    const k = Number(v.k ?? 10);
    if (!Number.isInteger(k) || k < 0) throw new UsageError('-k must be a whole number');
    const table = clientOf(parsed).database(required(parsed, 'database')).table(required(parsed, 'table'));
    const found = await table.search({
      text: v.text as string | undefined,
      textField: v['text-field'] as string | undefined,
      vector,
      vectorField: v['vector-field'] as string | undefined,
      filter: v.filter as string | undefined,
      operator: v.operator as 'or' | 'and' | undefined,
      k,
    });
    print(found as Table, formatOf(parsed));
    return 0;
  },
  count: async (args) => {
    const parsed = parse(args, { field: { type: 'string' }, operator: { type: 'string' } });
    const query = parsed.positionals.join(' ');
    const table = clientOf(parsed).database(required(parsed, 'database')).table(required(parsed, 'table'));
    process.stdout.write(
      `${await table.count(required(parsed, 'field'), query, parsed.values.operator as 'or' | undefined)}\n`,
    );
    return 0;
  },
  databases: async (args) => {
    const parsed = parse(args, {
      bucket: { type: 'string' },
      prefix: { type: 'string' },
      purge: { type: 'boolean' },
    });
    const [verb, name] = parsed.positionals;
    const client = clientOf(parsed);
    if (verb === 'list') {
      printJson(await client.databases.list());
      return 0;
    }
    if (name === undefined) throw new UsageError(`databases ${verb ?? ''} needs a database name`);
    if (verb === 'create') {
      const bucket = (parsed.values.bucket as string | undefined) ?? name;
      const prefix = parsed.values.prefix as string | undefined;
      printJson(await client.databases.create({ name, storage: { provider: 'local', bucket, prefix } }));
    } else if (verb === 'verify') printJson(await client.databases.verify(name));
    else if (verb === 'delete') printJson(await client.databases.delete(name, { purge: parsed.values.purge === true }));
    else throw new UsageError('databases takes list, create, verify or delete');
    return 0;
  },
  tables: async (args) => {
    const parsed = parse(args, { purge: { type: 'boolean' } });
    const [verb, name] = parsed.positionals;
    const db = clientOf(parsed).database(required(parsed, 'database'));
    if (verb === 'list') printJson(await db.listTables());
    else if (verb === 'schema' && name !== undefined) printJson(await db.table(name).schema());
    else if (verb === 'drop' && name !== undefined)
      printJson(await db.dropTable(name, { purge: parsed.values.purge === true }));
    else throw new UsageError('tables takes list, schema NAME or drop NAME');
    return 0;
  },
};

/** Parses `COL:METRIC` declarations of `--vector`. */
function vectorDeclarations(values: string[]): { column: string; metric: string }[] {
  return values.map((value) => {
    const at = value.lastIndexOf(':');
    if (at <= 0) throw new UsageError(`--vector takes COLUMN:METRIC (cosine, l2 or dot), got "${value}"`);
    return { column: value.slice(0, at), metric: value.slice(at + 1) };
  });
}

/** The vector columns of the target table, and their dimensions, so that list columns load as vectors. */
async function vectorColumns(
  db: Database,
  table: string,
  create: boolean,
  declared: { column: string }[],
  path: string,
  kind: FileKind,
): Promise<Map<string, number>> {
  if (!create) {
    const columns = await db.table(table).schema();
    return new Map(
      columns.flatMap((c) => (c.type === 'vector' && c.dim !== undefined ? [[c.name, c.dim] as const] : [])),
    );
  }
  if (declared.length === 0) return new Map();
  // The dimension of each declared column, from the file itself.
  const probe = await openFile(path, kind, new Map());
  try {
    const dims = new Map<string, number>();
    for await (const group of probe.groups(1)) {
      const row = arrow.tableFromIPC(group.ipc);
      for (const { column } of declared) {
        const value = row.getChild(column)?.get(0) as { length: number } | string | null | undefined;
        const length = typeof value === 'string' ? (JSON.parse(value) as unknown[]).length : value?.length;
        if (length === undefined) throw new UsageError(`--vector ${column}: the file's first row has no value in it`);
        dims.set(column, length);
      }
      break;
    }
    return dims;
  } finally {
    probe.close();
  }
}

async function load(args: string[]): Promise<number> {
  const parsed = parse(args, {
    create: { type: 'boolean' },
    fts: { type: 'string', multiple: true },
    vector: { type: 'string', multiple: true },
    'batch-rows': { type: 'string' },
    concurrency: { type: 'string' },
  });
  const database = required(parsed, 'database');
  const tableName = required(parsed, 'table');
  const files = parsed.positionals;
  if (files.length === 0) throw new UsageError('load needs at least one file');
  const kinds = files.map((file) => {
    const kind = kindOf(file);
    if (kind === undefined) throw new UsageError(`${file}: not a .parquet, .csv, .tsv, .jsonl or .arrow file`);
    return kind;
  });
  const groupRows = Number(parsed.values['batch-rows'] ?? 10_000);
  if (!Number.isInteger(groupRows) || groupRows < 1) throw new UsageError('--batch-rows must be a whole number');
  // Three requests in flight: one committing while two are read and checked (docs/performance.md, Loading files).
  const concurrency = Number(parsed.values.concurrency ?? 3);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new UsageError('--concurrency must be a whole number');
  const create = parsed.values.create === true;
  const declared = vectorDeclarations((parsed.values.vector as string[] | undefined) ?? []);
  const db = clientOf(parsed).database(database);
  const vectors = await vectorColumns(db, tableName, create, declared, files[0] as string, kinds[0] as FileKind);

  const opened = await Promise.all(files.map((file, i) => openFile(file, kinds[i] as FileKind, vectors)));
  try {
    if (create) {
      const first = opened[0];
      const schema = (first?.schema.fields ?? []).map((field): FieldSpec => {
        const spelled = serviceType(field);
        if (spelled === undefined) throw new UsageError(`column "${field.name}": type ${field.type} cannot be loaded`);
        return { name: field.name, ...spelled };
      });
      const fts = (parsed.values.fts as string[] | undefined) ?? [];
      await db.createTable(tableName, schema, { fts, vector: declared }).catch((err: unknown) => {
        // Run again after an interrupted load: the table is there already.
        if (!(err instanceof StrataError && err.code === 'table_exists')) throw err;
      });
    }
    const total = opened.every((f) => f.totalRows !== undefined)
      ? opened.reduce((n, f) => n + (f.totalRows ?? 0), 0)
      : undefined;
    const progress = new Progress(total);
    const table = db.table(tableName);
    let replayed = 0;
    for (const [i, file] of opened.entries()) {
      const [rowsBefore, bytesBefore] = [progress.rows, progress.bytes];
      const report = await table.append(file.groups(groupRows), {
        concurrency,
        keyPrefix: loadKeyPrefix(files[i] as string, database, tableName, groupRows),
        onProgress: (sent) => progress.update(rowsBefore + sent.rows, bytesBefore + sent.bytes),
      });
      replayed += report.replayed;
    }
    progress.finish(replayed);
    return 0;
  } finally {
    for (const file of opened) file.close();
  }
}
