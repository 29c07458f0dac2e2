import {
  type AnalyzerName,
  type Database,
  type FtsIndexSpec,
  METRIC_ALIASES,
  METRICS,
  type MetricInput,
  SCALAR_INDEX_TYPES,
  type ScalarIndexSpec,
  type ScalarIndexType,
  StrataError,
  type StrataTable,
} from '@strata/client';
import { arrow } from '../arrow/arrow.js';
import { clientOf, type Parsed, parse, required, text, texts, urlOf, wholeNumber } from './args.js';
import { fieldSpecs } from './column-types.js';
import { LoadError, UsageError } from './errors.js';
import { type EncodedGroup, type FileKind, kindOf, type LoadFile, loadKeyPrefix, openFile } from './files.js';
import { type LoadRecord, readRecord, recordPath, writeRecord } from './load-record.js';
import { Progress } from './progress.js';

const DEFAULT_BATCH_ROWS = 10_000;
/** Three requests in flight: one committing while two are read and checked (docs/performance.md, Loading files). */
const DEFAULT_CONCURRENCY = 3;

/** Exit code of a load stopped by Ctrl-C (128 + SIGINT), as shells report it. */
const INTERRUPTED = 130;

/** Parses `COL:METRIC` declarations of `--vector`. */
const isMetric = (text: string): text is MetricInput =>
  (METRICS as readonly string[]).includes(text) || Object.hasOwn(METRIC_ALIASES, text);

function vectorDeclarations(values: string[]): { column: string; metric: MetricInput }[] {
  return values.map((value) => {
    const at = value.lastIndexOf(':');
    const metric = value.slice(at + 1).toLowerCase();
    if (at <= 0 || !isMetric(metric)) {
      throw new UsageError(`--vector takes COLUMN:METRIC (cosine, l2sq (l2) or negdot (dot)), got "${value}"`);
    }
    return { column: value.slice(0, at), metric };
  });
}

/**
 * Parses `COL`, `COL:ANALYZER` and `COL:ANALYZER:positions` declarations of `--fts` (`COL::positions` keeps the
 * default analyzer); the service checks the analyzer's name.
 */
function ftsDeclarations(values: string[]): FtsIndexSpec[] {
  return values.map((value) => {
    const [column = '', analyzer = '', positions, ...rest] = value.split(':');
    if (column === '' || rest.length > 0 || (positions !== undefined && positions !== 'positions')) {
      throw new UsageError(`--fts takes COLUMN, COLUMN:ANALYZER or COLUMN:ANALYZER:positions, got "${value}"`);
    }
    if (analyzer === '' && positions === undefined) return column;
    return {
      column,
      ...(analyzer === '' ? {} : { analyzer: analyzer as AnalyzerName }),
      ...(positions === undefined ? {} : { positions: true }),
    };
  });
}

/** Parses `COL` or `COL:KIND` declarations of `--scalar`. */
function scalarDeclarations(values: string[]): ScalarIndexSpec[] {
  return values.map((value) => {
    const at = value.lastIndexOf(':');
    if (at < 0) return value;
    const kind = value.slice(at + 1).toLowerCase();
    if (at === 0 || !(SCALAR_INDEX_TYPES as readonly string[]).includes(kind)) {
      throw new UsageError(`--scalar takes COLUMN or COLUMN:KIND (${SCALAR_INDEX_TYPES.join(', ')}), got "${value}"`);
    }
    return { column: value.slice(0, at), kind: kind as ScalarIndexType };
  });
}

/**
 * The vector columns of the target table, and their dimensions, so that list columns load as vectors: the table's
 * own when it exists (a run again of a `--create` load encodes its rows as the first run did), else those declared.
 */
async function vectorColumns(
  db: Database,
  table: string,
  create: boolean,
  declared: { column: string }[],
  path: string,
  kind: FileKind,
): Promise<Map<string, number>> {
  const columns = await db
    .table(table)
    .schema()
    .catch((err: unknown) => {
      if (create && err instanceof StrataError && err.code === 'unknown_table') return undefined;
      throw err;
    });
  if (columns !== undefined) {
    return new Map(
      columns.flatMap((c) => (c.type === 'vector' && c.dim !== undefined ? [[c.name, c.dim] as const] : [])),
    );
  }
  if (declared.length === 0) return new Map();
  // The dimension of each declared column, from the file's first row.
  const probe = await openFile(path, kind, new Map());
  try {
    const dims = new Map<string, number>();
    for await (const group of probe.groups(1)) {
      const row = arrow.tableFromIPC(group.ipc);
      for (const { column } of declared) {
        if (row.getChild(column) === null) throw new LoadError(`--vector ${column}: ${path} has no such column`);
        const value = row.getChild(column)?.get(0) as { length: number } | string | null | undefined;
        const length = typeof value === 'string' ? (JSON.parse(value) as unknown[]).length : value?.length;
        if (length === undefined)
          throw new LoadError(`--vector ${column}: the first row of ${path} has no value in it`);
        dims.set(column, length);
      }
      break;
    }
    return dims;
  } finally {
    probe.close();
  }
}

/** A file's load: where it goes, under which keys, in groups of how many rows. */
interface Plan {
  path: string;
  kind: FileKind;
  keyPrefix: string;
  record: string;
  batchRows: number;
  /** Whether an earlier run of this load landed its first group (by this machine's record). */
  resumed: boolean;
  /** Whether rows are written by the table's primary key (`--upsert`) rather than appended. */
  upsert: boolean;
}

/**
 * How long the service remembers a request's key by default (`STRATA_IDEMPOTENCY_TTL_MS`): a load run again later
 * than this would not be recognised, and would send its rows again.
 */
const KEY_LIFETIME_MS = 24 * 60 * 60 * 1000;

/**
 * Each file's load plan. A file loaded into this table before (by this machine's record) keeps the --batch-rows its
 * first run used: other groups would carry other rows under the keys of the ones that landed.
 */
function plans(
  parsed: Parsed,
  files: string[],
  kinds: FileKind[],
  database: string,
  table: string,
  upsert: boolean,
): Plan[] {
  const given = parsed.values['batch-rows'] === undefined ? undefined : wholeNumber(parsed, 'batch-rows', 0);
  return files.map((path, i) => {
    const keyPrefix = loadKeyPrefix(path, database, table, upsert);
    const record = recordPath(urlOf(parsed), keyPrefix);
    const recorded = readRecord(record);
    const earlier = recorded?.batchRows;
    if (recorded !== undefined && Date.now() - recorded.startedMs > KEY_LIFETIME_MS) {
      throw new LoadError(
        `${path} was first loaded into ${database}.${table} on ${new Date(recorded.startedMs).toISOString()} ` +
          `(${record}). The service remembers which rows a load sent for 24 hours, so a run again now could load ` +
          'rows twice. If that load finished, nothing needs doing; to load the file again on purpose, delete the ' +
          'record. Nothing was sent.',
      );
    }
    if (given !== undefined && earlier !== undefined && given !== earlier) {
      throw new LoadError(
        `${path} was loaded into ${database}.${table} with --batch-rows ${earlier} before (${record}). A load run ` +
          `again skips what landed only when it groups the rows the same way: run it with --batch-rows ${earlier}, ` +
          'or without --batch-rows. Nothing was sent. (If that table was dropped since, delete the record.)',
      );
    }
    const batchRows = given ?? earlier ?? DEFAULT_BATCH_ROWS;
    return {
      path,
      kind: kinds[i] as FileKind,
      keyPrefix,
      record,
      batchRows,
      resumed: recorded !== undefined,
      upsert,
    };
  });
}

/** What Ctrl-C asked for: stop sending; a second Ctrl-C quits at once. */
class Interrupt {
  stopping = false;
  private readonly onSignal = () => {
    if (this.stopping) process.exit(INTERRUPTED);
    this.stopping = true;
    process.stderr.write(
      '\nstopping: waiting for the requests in flight to be answered (Ctrl-C again quits at once)\n',
    );
  };

  constructor() {
    process.on('SIGINT', this.onSignal);
  }

  dispose(): void {
    process.off('SIGINT', this.onSignal);
  }
}

export async function load(args: string[]): Promise<number> {
  const parsed = parse(args, {
    create: { type: 'boolean' },
    fts: { type: 'string', multiple: true },
    vector: { type: 'string', multiple: true },
    scalar: { type: 'string', multiple: true },
    'primary-key': { type: 'string' },
    upsert: { type: 'boolean' },
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
  const concurrency = wholeNumber(parsed, 'concurrency', DEFAULT_CONCURRENCY);
  const create = parsed.values.create === true;
  const upsert = parsed.values.upsert === true;
  const primaryKey = text(parsed, 'primary-key');
  if (primaryKey !== undefined && !create) throw new UsageError('--primary-key declares a key with --create');
  const declared = vectorDeclarations(texts(parsed, 'vector'));
  const scalar = scalarDeclarations(texts(parsed, 'scalar'));
  const db = clientOf(parsed).database(database);
  const planned = plans(parsed, files, kinds, database, tableName, upsert);
  const vectors = await vectorColumns(db, tableName, create, declared, files[0] as string, kinds[0] as FileKind);

  const opened: LoadFile[] = [];
  const interrupt = new Interrupt();
  try {
    for (const plan of planned) opened.push(await openFile(plan.path, plan.kind, vectors));
    if (create) {
      const first = opened[0] as LoadFile;
      await first.checkNotWidened();
      for (const note of first.notes) process.stderr.write(`note: ${note}\n`);
      const indexes = { fts: ftsDeclarations(texts(parsed, 'fts')), vector: declared, scalar };
      await db.createTable(tableName, fieldSpecs(first.schema), indexes, { primaryKey }).catch((err: unknown) => {
        // Run again after an interrupted load: the table is there already.
        if (!(err instanceof StrataError && err.code === 'table_exists')) throw err;
      });
    }
    const total = opened.every((f) => f.totalRows !== undefined)
      ? opened.reduce((n, f) => n + (f.totalRows ?? 0), 0)
      : undefined;
    const progress = new Progress(total);
    const table = db.table(tableName);
    for (const [i, plan] of planned.entries()) {
      const record: LoadRecord = {
        file: plan.path,
        url: urlOf(parsed),
        database,
        table: tableName,
        batchRows: plan.batchRows,
        startedMs: Date.now(),
      };
      // Recorded once the first group landed: a load refused at its first group left nothing to resume.
      const remember = () => {
        if (readRecord(plan.record) === undefined && !writeRecord(plan.record, record)) {
          process.stderr.write(`note: could not write ${plan.record}; a run again must repeat --batch-rows\n`);
        }
      };
      const done = await sendFile(table, opened[i] as LoadFile, plan, { concurrency, progress, interrupt, remember });
      if (!done) {
        progress.interrupted();
        return INTERRUPTED;
      }
    }
    progress.finish();
    return 0;
  } finally {
    interrupt.dispose();
    for (const file of opened) file.close();
  }
}

/** One group as a request of its own, under a key naming the file row it starts at. */
async function sendGroup(table: StrataTable, plan: Plan, group: EncodedGroup): Promise<boolean> {
  async function* one() {
    yield group;
  }
  // The client adds the request's number (-0) to the prefix: the key is then `<prefix>-<first row>-0`.
  const options = { keyPrefix: `${plan.keyPrefix}-${group.start}`, concurrency: 1 };
  const report = plan.upsert ? await table.upsert(one(), options) : await table.append(one(), options);
  return report.replayed > 0;
}

/**
 * A load run again whose first group the service wrote anew: it no longer knew the earlier run's keys (they
 * expired, or the table was made again), so every group would be written again. Stopped after that one.
 */
function forgotten(plan: Plan, table: StrataTable, rows: number): LoadError {
  return new LoadError(
    `the service no longer knew the earlier load of ${plan.path} into ${table.database}.${table.name} (its keys ` +
      `expired, or the table was made again): the first ${rows} rows were written again, and nothing more was sent. ` +
      `If the table was made again on purpose, delete ${plan.record} and run the load again; otherwise delete ` +
      'those rows, or the table, before loading the file again.',
  );
}

/** What the service's refusal of a re-sent group means to the user of the CLI. */
function refusal(err: unknown, plan: Plan, table: StrataTable): unknown {
  if (!(err instanceof StrataError && err.code === 'idempotency_key_reused')) return err;
  return new LoadError(
    `an earlier load of ${plan.path} into ${table.database}.${table.name} sent its rows in groups of another size ` +
      `(--batch-rows; ${plan.batchRows} now), and this machine has no record of which: run it again with the ` +
      '--batch-rows that load used. Nothing was sent twice.',
  );
}

/**
 * Sends a file's groups, `concurrency` at a time, the first one alone: no other group is ever sent before the
 * first landed, so a run with another --batch-rows meets the first group's key and is refused before it sends
 * anything that could overlap rows that landed. False when Ctrl-C stopped it.
 */
async function sendFile(
  table: StrataTable,
  file: LoadFile,
  plan: Plan,
  how: { concurrency: number; progress: Progress; interrupt: Interrupt; remember: () => void },
): Promise<boolean> {
  const { concurrency, progress, interrupt } = how;
  const inFlight = new Set<Promise<void>>();
  let failed: unknown;
  let first = true;
  let stopped = false;
  for await (const group of file.groups(plan.batchRows)) {
    stopped = interrupt.stopping;
    if (stopped || failed !== undefined) break;
    const sending = sendGroup(table, plan, group).then(
      (replayed) => {
        if (group.start === 0) how.remember();
        progress.landed(group.rows, group.ipc.length, replayed);
        if (group.start === 0 && plan.resumed && !replayed) failed ??= forgotten(plan, table, group.rows);
      },
      (err: unknown) => {
        failed ??= refusal(err, plan, table);
      },
    );
    const tracked = sending.finally(() => inFlight.delete(tracked));
    inFlight.add(tracked);
    if (first || inFlight.size >= concurrency) await Promise.race(inFlight);
    first = false;
  }
  await Promise.all(inFlight);
  if (failed !== undefined) throw failed;
  return !stopped;
}
