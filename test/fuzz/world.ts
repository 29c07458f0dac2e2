import { randomBytes } from 'node:crypto';
import type { Schema } from 'apache-arrow';
import { schemaOnlyStream } from '../../src/arrow/ipc.js';
import { schemaFromFields } from '../../src/engine/tables/schema.js';
import { activeLocalDatabase, type Client, startStrata, type TestServer } from '../support/strata.js';
import { tablesOf } from '../support/tables.js';
import { ALL_TYPES, FULL_ROW, NESTED_SCHEMA, NULL_ROW } from '../support/types.js';

/** A table of the fuzzed database: its columns (for generators) and the body that created it. */
export interface WorldTable {
  name: string;
  schema: Schema;
  fts: string[];
  vectors: { column: string; dim: number }[];
}

/**
 * Everything the fuzzer aims at: a real Strata in this process, two accounts, account A's active database with
 * tables of every type spelling, its unverified database, and account B's database, which A must never see.
 */
export interface World {
  strata: TestServer;
  /** The Authorization header of each account's key. */
  keys: { A: string; B: string };
  database: string;
  unverifiedDatabase: string;
  foreignDatabase: string;
  tables: WorldTable[];
  foreignTables: string[];
  /** Table names the fuzzer may create and drop; the tables above are never dropped. */
  scratchTables: string[];
  /** Database names the fuzzer may register, verify and delete (local buckets of its own). */
  scratchDatabases: string[];
  scratchBuckets: string[];
  /** Database names registered with S3 bindings: never verified, so no request leaves the machine. */
  s3Databases: string[];
  close(): Promise<void>;
}

const MiB = 1024 * 1024;

/** A value only account B's database holds: seen in an answer to anyone else, it leaked. */
export const FOREIGN_CANARY = 'only B may read this';

/** The server's settings for fuzzing: limits low enough to be reached, the rate limits out of the way. */
export const FUZZ_ENV = {
  STRATA_RATE_LIMIT_PER_MINUTE: '1000000',
  STRATA_AUTH_FAILURES_PER_MINUTE: '1000000',
  STRATA_SQL_TIMEOUT_MS: '2000',
  STRATA_SQL_MEMORY_MB: '256',
  STRATA_SQL_THREADS: '1',
  STRATA_MAX_BODY_BYTES: String(4 * MiB),
  STRATA_MAX_RESULT_BYTES: String(32 * MiB),
  STRATA_WORKER_IDLE_MS: '20000',
  STRATA_UPKEEP_INTERVAL_MS: '1000',
  // A body that stops arriving is given up on soon, so raw cases that leave one unfinished get an answer.
  STRATA_BODY_IDLE_MS: '3000',
  STRATA_ANN_MIN_ROWS: '300',
  // Nothing listens there: an STS call fails at once instead of leaving the machine.
  STRATA_STS_ENDPOINT: 'http://127.0.0.1:9',
  // Only faults are logged: the log is kept in memory, and a 500's stack is found in it by request id.
  STRATA_LOG_LEVEL: 'error',
};

const WORDS = ['apple', 'banana', 'cherry', 'date', 'elder', 'fig', 'grape', 'Über', 'Café', 'e-mail', 'U.S.A.'];

const DOCS_FIELDS = [
  { name: 'id', type: 'i64', nullable: false },
  { name: 'title', type: 'utf8', nullable: false },
  { name: 'body', type: 'large_utf8' },
  { name: 'emb', type: 'vector', dim: 8 },
  { name: 'score', type: 'f64' },
  { name: 'published', type: 'date32' },
  { name: 'seen', type: 'timestamp_ms' },
  { name: 'tags', type: 'list', item: 'utf8' },
  { name: 'flag', type: 'bool', nullable: false },
];

const docRow = (i: number) => ({
  id: i,
  title: `${WORDS[i % WORDS.length]} ${WORDS[(i * 3) % WORDS.length]}`,
  body: i % 5 === 0 ? null : Array.from({ length: 1 + (i % 6) }, (_, j) => WORDS[(i + j * j) % WORDS.length]).join(' '),
  emb: Array.from({ length: 8 }, (_, j) => Math.sin(i + j)),
  score: i % 4 === 0 ? 'NaN' : i / 3,
  published: `20${10 + (i % 15)}-0${1 + (i % 9)}-1${i % 10}`,
  seen: 1_700_000_000_000 + i * 1000,
  tags: i % 3 === 0 ? null : WORDS.slice(i % 4, (i % 4) + (i % 3)),
  flag: i % 2 === 0,
});

const ODD_FIELDS = [
  { name: 'x-y', type: 'i64', nullable: false },
  { name: 'My Col', type: 'utf8' },
  { name: 'select', type: 'i32' },
  { name: 'Ünï', type: 'f32' },
  { name: "a'b", type: 'utf8' },
  { name: '"q"', type: 'date32' },
];

const oddRow = (i: number) => ({
  'x-y': i,
  'My Col': `${WORDS[i % WORDS.length]} row ${i}`,
  select: i % 3 === 0 ? null : i * 1000,
  Ünï: i / 7,
  "a'b": "it's `quoted`",
  '"q"': '2000-01-01',
});

const nestedRow = (i: number) => ({
  id: i,
  address: i % 4 === 0 ? null : { city: WORDS[i % WORDS.length] ?? null, zip: i % 3 === 0 ? null : 10_000 + i },
  scores: [i, i / 2],
  v64: [1, i, -i, 0.5],
});

interface TableSetup {
  table: WorldTable;
  create: { table_name: string } & Record<string, unknown>;
  rows: unknown[];
}

function tableSetups(): TableSetup[] {
  const fromFields = (
    name: string,
    fields: Record<string, unknown>[],
    indexes: { fts: unknown[]; vector: { column: string; metric: string }[] },
    rows: unknown[],
  ): TableSetup => {
    const schema = schemaFromFields(fields as never);
    return {
      table: {
        name,
        schema,
        fts: indexes.fts.map((e) => (typeof e === 'string' ? e : (e as { column: string }).column)),
        vectors: indexes.vector.map((v) => ({
          column: v.column,
          dim: Number((fields.find((f) => f.name === v.column) as { dim: number }).dim),
        })),
      },
      create: { table_name: name, schema: fields, indexes },
      rows,
    };
  };
  const nestedIpc = Buffer.from(schemaOnlyStream(NESTED_SCHEMA)).toString('base64');
  return [
    fromFields(
      'docs',
      DOCS_FIELDS,
      { fts: ['title', { column: 'body', analyzer: 'standard' }], vector: [{ column: 'emb', metric: 'l2' }] },
      Array.from({ length: 40 }, (_, i) => docRow(i)),
    ),
    fromFields(
      'all_types',
      ALL_TYPES,
      { fts: ['s', { column: 'ls', analyzer: 'standard' }], vector: [{ column: 'v', metric: 'cosine' }] },
      [FULL_ROW, NULL_ROW, { ...NULL_ROW, id: 1, s: 'apple pie', ls: 'Über alles', v: [0, 0, 1] }],
    ),
    fromFields(
      'odd-names',
      ODD_FIELDS,
      { fts: ['My Col'], vector: [] },
      Array.from({ length: 12 }, (_, i) => oddRow(i)),
    ),
    {
      table: { name: 'nested', schema: NESTED_SCHEMA, fts: [], vectors: [{ column: 'v64', dim: 4 }] },
      create: { table_name: 'nested', schema_ipc: nestedIpc, indexes: { vector: [{ column: 'v64', metric: 'dot' }] } },
      rows: Array.from({ length: 10 }, (_, i) => nestedRow(i)),
    },
  ];
}

async function createTables(api: Client, database: string, setups: TableSetup[]): Promise<void> {
  const tables = tablesOf(api, database);
  for (const setup of setups) {
    const name = setup.create.table_name;
    const created = await tables.create(setup.create);
    if (created.status !== 200) throw new Error(`create ${name}: ${JSON.stringify(created.json)}`);
    const appended = await tables.append(name, setup.rows);
    if (appended.status !== 200) throw new Error(`append ${name}: ${JSON.stringify(appended.json)}`);
  }
}

/** Starts Strata and builds the world; `close` stops it and removes its data. */
export async function startWorld(): Promise<World> {
  const strata = await startStrata(FUZZ_ENV);
  try {
    const a = await strata.as('fuzz-a');
    const b = await strata.as('fuzz-b');
    // Bucket folders no generated request names, so no fuzzed binding lands on the fixtures' data.
    const tag = randomBytes(6).toString('hex');
    await activeLocalDatabase(a, 'alpha', `fixture-alpha-${tag}`);
    await activeLocalDatabase(b, 'beta', `fixture-beta-${tag}`);
    const unverified = await a.post('/v1/databases', {
      name: 'alpha_unverified',
      storage: { provider: 'local', bucket: `fixture-unverified-${tag}` },
    });
    if (unverified.status !== 201) throw new Error(`register alpha_unverified: ${JSON.stringify(unverified.json)}`);
    const setups = tableSetups();
    await createTables(a, 'alpha', setups);
    await createTables(b, 'beta', [
      setups[0] as TableSetup,
      {
        ...(setups[0] as TableSetup),
        create: {
          table_name: 'secret',
          schema: [
            { name: 'id', type: 'i64' },
            { name: 's', type: 'utf8' },
          ],
        },
        rows: [{ id: 1, s: FOREIGN_CANARY }],
      },
    ]);
    return {
      strata,
      keys: { A: a.auth.authorization ?? '', B: b.auth.authorization ?? '' },
      database: 'alpha',
      unverifiedDatabase: 'alpha_unverified',
      foreignDatabase: 'beta',
      tables: setups.map((s) => s.table),
      foreignTables: ['docs', 'secret'],
      scratchTables: Array.from({ length: 12 }, (_, i) => `fz_t${i}`),
      scratchDatabases: Array.from({ length: 6 }, (_, i) => `fzdb${i}`),
      scratchBuckets: Array.from({ length: 4 }, (_, i) => `fzb${i}`),
      s3Databases: Array.from({ length: 3 }, (_, i) => `fzs3_${i}`),
      close: () => strata.close(),
    };
  } catch (err) {
    await strata.close();
    throw err;
  }
}
