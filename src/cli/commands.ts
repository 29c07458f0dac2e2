import { StrataError, type TextFieldSpec } from '@strata/client';
import type { Table } from 'apache-arrow';
import { adminOf, clientOf, type Parsed, parse, required, text, texts } from './args.js';
import { LoadError, UsageError } from './errors.js';
import { load } from './load.js';
import { FORMATS, type Format, render, renderList } from './output.js';
import { usageOf, wantsHelp } from './usage.js';

function formatOf(parsed: Parsed): Format {
  const format = text(parsed, 'format');
  if (format === undefined) return process.stdout.isTTY ? 'table' : 'json';
  if (!(FORMATS as readonly string[]).includes(format))
    throw new UsageError(`--format must be one of ${FORMATS.join(', ')}`);
  return format as Format;
}

/** The format of a list the service answered: any but arrow, which is for rows of tables. */
function listFormatOf(parsed: Parsed): Exclude<Format, 'arrow'> {
  const format = formatOf(parsed);
  if (format === 'arrow') throw new UsageError('--format arrow is for rows (sql, search); take table, json or csv');
  return format;
}

function print(table: Table, format: Format): void {
  process.stdout.write(render(table, format));
}

/** One object the service answered (a database registered, a table dropped): JSON, indented on a terminal. */
function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, process.stdout.isTTY ? 2 : undefined)}\n`);
}

/**
 * Runs a client command; undefined when `command` is not one. Exit codes: 0 done, 1 the service or the data
 * refused (its message alone), 2 bad usage (with the command's usage).
 */
export async function runClientCommand(command: string, args: string[]): Promise<number | undefined> {
  const run = COMMANDS[command];
  if (run === undefined) return undefined;
  if (wantsHelp(args)) {
    process.stdout.write(usageOf(command));
    return 0;
  }
  try {
    return await run(args);
  } catch (err) {
    if (err instanceof StrataError) {
      process.stderr.write(`strata ${command}: ${err.message}${err.code === undefined ? '' : ` (${err.code})`}\n`);
      return 1;
    }
    if (err instanceof LoadError) {
      process.stderr.write(`strata ${command}: ${err.message}\n`);
      return 1;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`strata ${command}: ${err.message}\n${usageOf(command)}`);
      return 2;
    }
    throw err;
  }
}

type Json = Record<string, unknown>;

/**
 * A schema reply's columns, each with its index declarations in words ("fts (ascii_lower)", "vector (cosine)"):
 * beside each column as `/v1/schema` gives them, or from a table-wide `indexes` of create_table's shape.
 */
function describedColumns(reply: unknown): Json[] {
  const whole = (Array.isArray(reply) ? { columns: reply } : (reply as Json)) ?? {};
  const columns = (whole.columns ?? whole.schema ?? []) as Json[];
  const tableWide = (whole.indexes ?? {}) as { fts?: (string | Json)[]; vector?: Json[]; scalar?: Json[] };
  return columns.map((column) => {
    const own = Array.isArray(column.indexes) ? (column.indexes as Json[]) : [];
    const fts = (tableWide.fts ?? []).filter((f) => (typeof f === 'string' ? f : f.column) === column.name);
    const vector = (tableWide.vector ?? []).filter((v) => v.column === column.name);
    const scalar = (tableWide.scalar ?? []).filter((v) => v.column === column.name);
    // An analyzer spelled out (the object form) shows as its JSON.
    const shown = (value: unknown) =>
      typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
    const words = [
      ...own.map((index) => `${String(index.kind)} (${shown(index.analyzer ?? index.metric ?? index.type)})`),
      ...fts.map((f) => `fts (${typeof f === 'string' ? 'ascii_lower' : shown(f.analyzer ?? 'ascii_lower')})`),
      ...vector.map((v) => `vector (${String(v.metric)})`),
      ...scalar.map((v) => `scalar (${String(v.type)})`),
    ];
    const { indexes: _, ...rest } = column;
    return words.length === 0 ? rest : { ...rest, indexes: words.join(', ') };
  });
}

/** `--prefix` and `--fuzziness N` (0, 1 or 2), as a search asks for them. */
function widening(parsed: Parsed): { prefix?: boolean; fuzziness?: 0 | 1 | 2 } {
  const fuzziness = text(parsed, 'fuzziness');
  if (fuzziness !== undefined && !['0', '1', '2'].includes(fuzziness)) {
    throw new UsageError(`--fuzziness takes 0, 1 or 2, got "${fuzziness}"`);
  }
  return {
    ...(parsed.values.prefix === true ? { prefix: true } : {}),
    ...(fuzziness === undefined ? {} : { fuzziness: Number(fuzziness) as 0 | 1 | 2 }),
  };
}

/** `COL` or `COL:BOOST` values of a repeatable flag, as text fields. */
function textFieldsOf(values: readonly string[], flag: string): TextFieldSpec[] {
  return values.map((value) => {
    const match = /^(.*?)(?::(\d+(?:\.\d+)?))?$/.exec(value);
    const field = match?.[1] ?? '';
    if (field === '') throw new UsageError(`${flag} takes COLUMN or COLUMN:BOOST, got "${value}"`);
    return match?.[2] === undefined ? { field } : { field, boost: Number(match[2]) };
  });
}

const COMMANDS: Readonly<Record<string, (args: string[]) => Promise<number>>> = {
  load,
  sql: async (args) => {
    const parsed = parse(args, {});
    const query = parsed.positionals.join(' ');
    if (query.trim() === '') throw new UsageError('sql needs a statement');
    const format = formatOf(parsed);
    print((await clientOf(parsed).database(required(parsed, 'database')).sql(query)) as Table, format);
    return 0;
  },
  search: async (args) => {
    const parsed = parse(args, {
      text: { type: 'string' },
      'text-field': { type: 'string', multiple: true },
      prefix: { type: 'boolean' },
      fuzziness: { type: 'string' },
      vector: { type: 'string' },
      'vector-field': { type: 'string' },
      k: { type: 'string', short: 'k' },
      filter: { type: 'string' },
      operator: { type: 'string' },
      explain: { type: 'boolean' },
    });
    const v = parsed.values;
    let vector: number[] | undefined;
    if (typeof v.vector === 'string') {
      try {
        vector = JSON.parse(v.vector) as number[];
      } catch {
        vector = undefined;
      }
      if (!Array.isArray(vector)) throw new UsageError('--vector must be a JSON array of numbers, e.g. [0.1, 0.2]');
    }
    const k = Number(v.k ?? 10);
    if (!Number.isInteger(k) || k < 0) throw new UsageError('-k must be a whole number');
    const format = formatOf(parsed);
    const table = clientOf(parsed).database(required(parsed, 'database')).table(required(parsed, 'table'));
    const explain = v.explain === true;
    const fields = textFieldsOf(texts(parsed, 'text-field'), '--text-field');
    // One column without a boost goes as text_field, as before; a boost or several as text_fields.
    const plain = fields.length === 1 && fields[0]?.boost === undefined;
    const found = await table.searchWithReceipt({
      text: text(parsed, 'text'),
      ...(plain ? { textField: fields[0]?.field } : fields.length > 0 ? { textFields: fields } : {}),
      ...widening(parsed),
      vector,
      vectorField: text(parsed, 'vector-field'),
      filter: text(parsed, 'filter'),
      operator: text(parsed, 'operator') as 'or' | 'and' | undefined,
      k,
      explain,
    });
    print(found.rows as Table, format);
    // What the search did as a whole goes to stderr, so that stdout stays the rows alone.
    if (explain) process.stderr.write(`explain: ${JSON.stringify(found.explain)}\n`);
    return 0;
  },
  count: async (args) => {
    const parsed = parse(args, { field: { type: 'string', multiple: true }, operator: { type: 'string' } });
    const query = parsed.positionals.join(' ');
    const table = clientOf(parsed).database(required(parsed, 'database')).table(required(parsed, 'table'));
    const operator = text(parsed, 'operator') as 'or' | 'and' | undefined;
    const fields = textFieldsOf(texts(parsed, 'field'), '--field');
    if (fields.length === 0) throw new UsageError('--field is required');
    const field = fields.length === 1 ? (fields[0]?.field as string) : fields;
    process.stdout.write(`${await table.count(field, query, operator)}\n`);
    return 0;
  },
  databases: async (args) => {
    const parsed = parse(args, {
      bucket: { type: 'string' },
      prefix: { type: 'string' },
      purge: { type: 'boolean' },
    });
    const [verb, name] = parsed.positionals;
    if (verb === 'list') {
      const format = listFormatOf(parsed);
      const databases = await clientOf(parsed).databases.list();
      process.stdout.write(renderList(databases, ['name', 'state', 'created_ms', 'external_id'], format));
      return 0;
    }
    if (!['create', 'verify', 'delete'].includes(verb ?? '')) {
      throw new UsageError('databases takes list, create, verify or delete');
    }
    if (name === undefined) throw new UsageError(`databases ${verb} needs a database name`);
    const client = clientOf(parsed);
    if (verb === 'create') {
      const bucket = text(parsed, 'bucket') ?? name;
      const prefix = text(parsed, 'prefix');
      printJson(await client.databases.create({ name, storage: { provider: 'local', bucket, prefix } }));
    } else if (verb === 'verify') printJson(await client.databases.verify(name));
    else printJson(await client.databases.delete(name, { purge: parsed.values.purge === true }));
    return 0;
  },
  tables: async (args) => {
    const parsed = parse(args, { purge: { type: 'boolean' } });
    const [verb, name] = parsed.positionals;
    if (verb === 'list') {
      const format = listFormatOf(parsed);
      const tables = await clientOf(parsed).database(required(parsed, 'database')).listTables();
      process.stdout.write(renderList(tables, ['table_name', 'num_rows'], format));
      return 0;
    }
    if (verb === 'schema' && name !== undefined) {
      const format = listFormatOf(parsed);
      const reply: unknown = await clientOf(parsed).database(required(parsed, 'database')).table(name).schema();
      // JSON keeps the service's own form of the declarations; a table or CSV cell says them in words.
      const rows = format === 'json' && Array.isArray(reply) ? (reply as Json[]) : describedColumns(reply);
      process.stdout.write(renderList(rows, ['name', 'type', 'nullable', 'dim', 'item', 'indexes'], format));
      return 0;
    }
    if (verb === 'drop' && name !== undefined) {
      const db = clientOf(parsed).database(required(parsed, 'database'));
      printJson(await db.dropTable(name, { purge: parsed.values.purge === true }));
      return 0;
    }
    throw new UsageError('tables takes list, schema NAME or drop NAME');
  },
  upkeep: async (args) => {
    const parsed = parse(args, { 'admin-key': { type: 'string' } });
    const [verb] = parsed.positionals;
    const admin = adminOf(parsed);
    if (verb === 'status') printJson(await admin.upkeep());
    else if (verb === 'pause') printJson(await admin.pauseUpkeep());
    else if (verb === 'resume') printJson(await admin.resumeUpkeep());
    else throw new UsageError('upkeep takes status, pause or resume');
    return 0;
  },
};
