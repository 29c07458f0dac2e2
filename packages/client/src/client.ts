import { type Schema, Table, tableFromIPC, tableToIPC } from 'apache-arrow';
import { type ChunkLimits, chunksOf, type RowsSource } from './batches.js';
import { ARROW_STREAM, Http, JSON_TYPE, jsonOf, type Request, type Response, type RetryOptions } from './http.js';
import type {
  AppendReport,
  ColumnDescriptor,
  DatabaseSummary,
  DeleteDatabaseReply,
  DropTableReply,
  ExactMatchRequest,
  FieldSpec,
  IndexSpec,
  MatchRequest,
  Receipt,
  RegisterDatabaseRequest,
  RowCounts,
  SearchExplain,
  SearchRequest,
  TableDescription,
  TableListing,
  UpkeepState,
  UpsertReport,
  VerifyReply,
} from './types.js';

export interface StrataOptions {
  /** The service, e.g. `http://127.0.0.1:8080`. */
  url: string;
  apiKey: string;
  retry?: Partial<RetryOptions>;
  fetch?: typeof fetch;
  /** Each attempt's bound, from sending the request to the last byte of its answer: 5 minutes by default. */
  timeoutMs?: number;
  /** The longest answer the client reads: 512 MiB by default, the service's own largest reply. */
  maxResponseBytes?: number;
}

export interface AppendOptions extends Partial<ChunkLimits> {
  /** Requests in flight at once. */
  concurrency?: number;
  /**
   * Each request's idempotency key is this prefix and the request's number. Given the same prefix and the
   * same rows, an append run again sends the same keys, and the service skips what already landed. A random
   * prefix by default.
   */
  keyPrefix?: string;
  /** Told after each request, with the rows sent so far. */
  onProgress?: (sent: { rows: number; requests: number; bytes: number }) => void;
  /** Aborting it stops the append: no further request starts, and those in flight end with its reason. */
  signal?: AbortSignal;
}

/** Reads answer an Arrow table, or plain rows with `{ rows: true }`. */
export interface ReadOptions {
  rows?: boolean;
  /** Aborting it ends the read, and any wait before a retry, with its reason. */
  signal?: AbortSignal;
}

const DEFAULT_LIMITS: ChunkLimits = { maxBytes: 16 * 1024 * 1024, maxRows: 50_000 };
const newKey = () => globalThis.crypto.randomUUID();
const base64 = (bytes: Uint8Array) => {
  let text = '';
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text);
};

/** A Strata service. `client.databases` manages databases; `client.database(name)` works in one. */
/** The transport of a client: its bearer token, and the options' defaults. */
function httpOf(options: Omit<StrataOptions, 'apiKey'>, token: string): Http {
  return new Http({
    url: options.url,
    apiKey: token,
    retry: {
      retries: 8,
      baseDelayMs: 200,
      maxDelayMs: 5000,
      maxWaitMs: 60_000,
      behindWaitMs: 600_000,
      ...options.retry,
    },
    fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
    timeoutMs: options.timeoutMs ?? 5 * 60_000,
    maxResponseBytes: options.maxResponseBytes ?? 512 * 1024 * 1024,
  });
}

export class Strata {
  private readonly http: Http;
  readonly databases: Databases;

  constructor(options: StrataOptions) {
    this.http = httpOf(options, options.apiKey);
    this.databases = new Databases(this.http);
  }

  database(name: string): Database {
    return new Database(this.http, name);
  }
}

export interface StrataAdminOptions extends Omit<StrataOptions, 'apiKey'> {
  /** The node's admin key (its `STRATA_ADMIN_KEY`), not an account's API key. */
  adminKey: string;
}

/**
 * A node's admin routes (the service's docs/api.md, Admin), under its admin key: each call acts on the node that
 * answers, so behind a load balancer, address each node by its own URL.
 */
export class StrataAdmin {
  private readonly http: Http;

  constructor(options: StrataAdminOptions) {
    this.http = httpOf(options, options.adminKey);
  }

  /** Whether upkeep is paused on the node, and how many of its databases have a pass under way. */
  async upkeep(): Promise<UpkeepState> {
    return jsonOf(await this.http.send({ method: 'GET', path: '/v1/admin/upkeep' }));
  }

  /**
   * Pauses upkeep on the node: it starts no step until resumed, and this answers once the passes under way have
   * ended (or after 30 s: `passes_under_way` then says how many still run).
   */
  async pauseUpkeep(): Promise<UpkeepState> {
    return jsonOf(await this.http.send({ method: 'PUT', path: '/v1/admin/upkeep', json: { paused: true } }));
  }

  /** Resumes upkeep on the node, starting a pass at once. */
  async resumeUpkeep(): Promise<UpkeepState> {
    return jsonOf(await this.http.send({ method: 'PUT', path: '/v1/admin/upkeep', json: { paused: false } }));
  }
}

export class Databases {
  constructor(private readonly http: Http) {}

  async create(request: RegisterDatabaseRequest): Promise<DatabaseSummary> {
    return jsonOf(await this.http.send({ method: 'POST', path: '/v1/databases', json: request }));
  }

  async list(): Promise<DatabaseSummary[]> {
    return jsonOf<{ databases: DatabaseSummary[] }>(await this.http.send({ method: 'GET', path: '/v1/databases' }))
      .databases;
  }

  async verify(name: string): Promise<VerifyReply> {
    const path = `/v1/databases/${encodeURIComponent(name)}/storage/verify`;
    return jsonOf(await this.http.send({ method: 'POST', path }));
  }

  async delete(name: string, options: { purge?: boolean } = {}): Promise<DeleteDatabaseReply> {
    const query = { purge: options.purge === undefined ? undefined : String(options.purge) };
    return jsonOf(await this.http.send({ method: 'DELETE', path: `/v1/databases/${encodeURIComponent(name)}`, query }));
  }
}

export class Database {
  constructor(
    private readonly http: Http,
    readonly name: string,
  ) {}

  private path(route: string): string {
    return `/v1/${route}/${encodeURIComponent(this.name)}`;
  }

  /**
   * Creates a table from an Arrow schema or the JSON field list, with optional indexes and a primary key (the
   * column `upsert` finds rows by).
   */
  async createTable(
    name: string,
    schema: Schema | FieldSpec[],
    indexes?: IndexSpec,
    options: { primaryKey?: string } = {},
  ): Promise<TableDescription> {
    const keyed = options.primaryKey === undefined ? {} : { primary_key: options.primaryKey };
    const body = Array.isArray(schema)
      ? { table_name: name, schema, indexes, ...keyed }
      : { table_name: name, schema_ipc: base64(tableToIPC(new Table(schema), 'stream')), indexes, ...keyed };
    return jsonOf(await this.http.send({ method: 'POST', path: this.path('create_table'), json: body }));
  }

  async dropTable(name: string, options: { purge?: boolean } = {}): Promise<DropTableReply> {
    const json = { table_name: name, ...(options.purge === undefined ? {} : { purge: options.purge }) };
    return jsonOf(await this.http.send({ method: 'POST', path: this.path('drop_table'), json }));
  }

  async listTables(): Promise<TableListing[]> {
    return jsonOf<{ tables: TableListing[] }>(await this.http.send({ method: 'POST', path: this.path('list_tables') }))
      .tables;
  }

  table(name: string): StrataTable {
    return new StrataTable(this.http, this.name, name);
  }

  /** One read-only SQL statement over the database's tables. */
  async sql(query: string, options: ReadOptions = {}): Promise<Table | Record<string, unknown>[]> {
    return readRows(this.http, { method: 'POST', path: this.path('query_sql'), json: { query } }, options);
  }
}

async function readRows(http: Http, req: Request, options: ReadOptions): Promise<Table | Record<string, unknown>[]> {
  return (await readReceipted(http, req, options)).rows;
}

/** A search's answer beside its rows: its receipt, and its `explain` when it was asked to explain itself. */
export interface SearchAnswer {
  rows: Table | Record<string, unknown>[];
  receipt: Receipt;
  explain?: SearchExplain;
}

/** Rows of a read, with the receipt a search answers in its headers and what it says beside them. */
async function readReceipted(http: Http, req: Request, options: ReadOptions): Promise<SearchAnswer> {
  const { signal } = options;
  if (options.rows === true) {
    const res = await http.send({ ...req, accept: JSON_TYPE, signal });
    const { data, explain } = jsonOf<{ data: Record<string, unknown>[]; explain?: SearchExplain }>(res);
    return { rows: data, receipt: receiptOf(res), ...(explain === undefined ? {} : { explain }) };
  }
  const res = await http.send({ ...req, accept: ARROW_STREAM, signal });
  const rows = tableFromIPC(res.bytes);
  const explain = rows.schema.metadata.get('strata.explain');
  return {
    rows,
    receipt: receiptOf(res),
    ...(explain === undefined ? {} : { explain: JSON.parse(explain) as SearchExplain }),
  };
}

/** A match's column as the service takes it: `field_name` for one, `text_fields` for several. */
const fieldsOf = (field: MatchRequest['field']) =>
  typeof field === 'string' ? { field_name: field } : { text_fields: field };

/** A search's receipt headers; NaN where a server too old to send them did not. */
function receiptOf(res: Response): Receipt {
  return {
    version: Number(res.headers.get('x-strata-table-version') ?? Number.NaN),
    freshRows: Number(res.headers.get('x-strata-fresh-rows') ?? Number.NaN),
  };
}

export class StrataTable {
  constructor(
    private readonly http: Http,
    readonly database: string,
    readonly name: string,
  ) {}

  private path(route: string): string {
    return `/v1/${route}/${encodeURIComponent(this.database)}`;
  }

  /**
   * Appends rows in requests of bounded size, `concurrency` at a time, each with its own idempotency key: a
   * request retried (or the whole append run again with the same `keyPrefix`) never lands twice. Each request is
   * atomic; the append as a whole is not.
   */
  async append(source: RowsSource, options: AppendOptions = {}): Promise<AppendReport> {
    // Answered with no body: the rows as stored would be what was just sent (a service that does not honour the
    // preference sends them as an Arrow stream, the body echoed, rather than made into JSON).
    return this.sendRows('append', source, options, { prefer: 'return=minimal' }, ARROW_STREAM, () => undefined);
  }

  /**
   * Writes rows by the table's primary key, in requests as `append` makes them: each row whose key the table holds
   * replaces that row, the others are inserted. Each request is one atomic commit. A key that two rows of one
   * request share is refused (400); a key in two requests in flight at once ends with either row: send with
   * `concurrency: 1` for the source's last row of a key to win.
   */
  async upsert(source: RowsSource, options: AppendOptions = {}): Promise<UpsertReport> {
    let inserted = 0;
    let updated = 0;
    const report = await this.sendRows('upsert', source, options, {}, JSON_TYPE, (res) => {
      const counts = jsonOf<{ inserted: number; updated: number }>(res);
      inserted += counts.inserted;
      updated += counts.updated;
    });
    return { ...report, inserted, updated };
  }

  /** Sends a source's rows to a write route in bounded requests, `concurrency` at a time, each under its own key. */
  private async sendRows(
    route: 'append' | 'upsert',
    source: RowsSource,
    options: AppendOptions,
    headers: Record<string, string>,
    accept: string,
    answered: (res: Response) => void,
  ): Promise<AppendReport> {
    const limits = {
      maxBytes: options.maxBytes ?? DEFAULT_LIMITS.maxBytes,
      maxRows: options.maxRows ?? DEFAULT_LIMITS.maxRows,
    };
    const concurrency = Math.max(1, options.concurrency ?? 4);
    const prefix = options.keyPrefix ?? newKey();
    const report: AppendReport = { rows: 0, requests: 0, replayed: 0, version: undefined };
    let bytes = 0;
    const inFlight = new Set<Promise<void>>();
    let failed: unknown;
    let number = 0;
    for await (const chunk of chunksOf(source, limits)) {
      options.signal?.throwIfAborted();
      if (failed !== undefined) break;
      const key = `${prefix}-${number++}`;
      const req: Request = {
        method: 'POST',
        path: this.path(route),
        query: { table: this.name },
        headers: { 'idempotency-key': key, ...headers },
        accept,
        signal: options.signal,
        ...(chunk.kind === 'arrow' ? { arrow: chunk.bytes } : { json: { data: chunk.data } }),
      };
      const sending = this.http.send(req).then(
        (res) => {
          answered(res);
          report.rows += chunk.rows;
          report.requests++;
          bytes += chunk.kind === 'arrow' ? chunk.bytes.length : 0;
          if (res.headers.get('idempotent-replayed') === 'true') report.replayed++;
          report.version = Math.max(report.version ?? 0, Number(res.headers.get('x-strata-table-version') ?? 0));
          options.onProgress?.({ rows: report.rows, requests: report.requests, bytes });
        },
        (err: unknown) => {
          failed ??= err;
        },
      );
      const tracked = sending.finally(() => inFlight.delete(tracked));
      inFlight.add(tracked);
      if (inFlight.size >= concurrency) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    options.signal?.throwIfAborted();
    if (failed !== undefined) throw failed;
    return report;
  }

  /** Replaces the rows `predicate` matches with `rows` (as many), in one atomic commit. */
  async update(predicate: string, rows: Table | readonly Record<string, unknown>[]): Promise<RowCounts> {
    const body = rows instanceof Table ? { arrow: tableToIPC(rows, 'stream') } : { json: { data: rows } };
    const res = await this.http.send({
      method: 'POST',
      path: this.path('update'),
      query: { table: this.name, predicate },
      headers: { 'idempotency-key': newKey() },
      accept: JSON_TYPE,
      ...body,
    });
    return jsonOf(res);
  }

  async delete(predicate: string): Promise<RowCounts> {
    const res = await this.http.send({
      method: 'POST',
      path: this.path('delete'),
      query: { table: this.name, predicate },
      headers: { 'idempotency-key': newKey() },
    });
    return jsonOf(res);
  }

  /** BM25 and vector search fused by reciprocal rank; either leg alone works too. */
  async search(req: SearchRequest, options: ReadOptions = {}): Promise<Table | Record<string, unknown>[]> {
    return (await this.searchWithReceipt(req, options)).rows;
  }

  /**
   * `search`, with its receipt (the table version it started from and the rows it read outside the indexes), and
   * with `explain: true` the request's explain.
   */
  async searchWithReceipt(req: SearchRequest, options: ReadOptions = {}): Promise<SearchAnswer> {
    const json = {
      table_name: this.name,
      text_query: req.text,
      text_field: req.textField,
      text_fields: req.textFields,
      prefix: req.prefix,
      fuzziness: req.fuzziness,
      vector_query: req.vector,
      vector_field: req.vectorField,
      filter: req.filter,
      k: req.k,
      offset: req.offset,
      window: req.window,
      operator: req.operator,
      projection: req.projection,
      rrf_k: req.rrfK,
      text_weight: req.textWeight,
      vector_weight: req.vectorWeight,
      consistency: req.consistency,
      explain: req.explain,
    };
    return readReceipted(this.http, { method: 'POST', path: this.path('hybrid_search'), json }, options);
  }

  /** How many rows match a full-text query in a column, or in any of several. */
  async count(field: MatchRequest['field'], query: string, operator?: MatchRequest['operator']): Promise<number> {
    return (await this.countWithReceipt(field, query, operator)).count;
  }

  /** `count`, with its receipt. */
  async countWithReceipt(
    field: MatchRequest['field'],
    query: string,
    operator?: MatchRequest['operator'],
  ): Promise<{ count: number; receipt: Receipt }> {
    const json = { table_name: this.name, ...fieldsOf(field), query, operator };
    const res = await this.http.send({ method: 'POST', path: this.path('count'), json });
    return { count: jsonOf<{ count: number }>(res).count, receipt: receiptOf(res) };
  }

  async tokenMatch(req: MatchRequest, options: ReadOptions = {}): Promise<Table | Record<string, unknown>[]> {
    const json = {
      table_name: this.name,
      ...fieldsOf(req.field),
      query: req.query,
      operator: req.operator,
      prefix: req.prefix,
      fuzziness: req.fuzziness,
      projection: req.projection,
      limit: req.limit,
    };
    return readRows(this.http, { method: 'POST', path: this.path('token_match'), json }, options);
  }

  async exactMatch(req: ExactMatchRequest, options: ReadOptions = {}): Promise<Table | Record<string, unknown>[]> {
    const json = {
      table_name: this.name,
      field_name: req.field,
      value: req.value,
      projection: req.projection,
      limit: req.limit,
    };
    return readRows(this.http, { method: 'POST', path: this.path('exact_match'), json }, options);
  }

  /** The table's columns. */
  async schema(): Promise<ColumnDescriptor[]> {
    const res: Response = await this.http.send({
      method: 'POST',
      path: this.path('schema'),
      json: { table_name: this.name },
    });
    return jsonOf(res);
  }
}
