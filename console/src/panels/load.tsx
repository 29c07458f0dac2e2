import type { AppendReport, ColumnDescriptor, Strata, UpsertReport } from '@strata/client';
import { useRef, useState } from 'preact/hooks';
import { ErrorNote } from '../components/error';
import { type ReadFile, readFile } from '../files/source';
import { duration } from '../format';

/** Rows per request: small enough to show progress on a file of a few thousand rows, and to stay under the body limit. */
const REQUEST_ROWS = 5000;
const REQUEST_BYTES = 8 * 1024 * 1024;

/** Appends add rows; on a table with a primary key, upserts replace the rows whose keys it holds. */
type Mode = 'append' | 'upsert';

/**
 * Each request's idempotency key is derived from the table and the file's name, size and time, so that loading the
 * same file again after a failure sends the same keys, and the server skips what already landed (the count of
 * requests it replayed is shown).
 */
async function keyPrefixOf(db: string, table: string, file: File, mode: Mode): Promise<string> {
  // An upsert of a file and an append of it are different writes: their keys must never meet.
  const text = `${mode}\n${db}\n${table}\n${file.name}\n${file.size}\n${file.lastModified}`;
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)));
  return `console-${[...digest.slice(0, 12)].map((byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}

export function LoadFile({
  strata,
  db,
  table,
  schema,
  onLoaded,
}: {
  strata: Strata;
  db: string;
  table: string;
  schema: ColumnDescriptor[];
  onLoaded: () => void;
}) {
  const input = useRef<HTMLInputElement>(null);
  const [file, setFile] = useState<File | undefined>(undefined);
  const [read, setRead] = useState<ReadFile | undefined>(undefined);
  const [sent, setSent] = useState(0);
  const [report, setReport] = useState<{ done: AppendReport | UpsertReport; ms: number } | undefined>(undefined);
  const key = schema.find((column) => column.primary_key === true)?.name;
  const [mode, setMode] = useState<Mode>('append');
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const abort = useRef<AbortController | undefined>(undefined);
  const choose = async (chosen: File | undefined) => {
    setFile(chosen);
    setRead(undefined);
    setReport(undefined);
    setError(undefined);
    setSent(0);
    if (chosen === undefined) return;
    try {
      setRead(await readFile(chosen, schema));
    } catch (err) {
      setError(err);
    }
  };
  const load = async () => {
    if (file === undefined || read === undefined) return;
    setBusy(true);
    setError(undefined);
    setReport(undefined);
    setSent(0);
    const controller = new AbortController();
    abort.current = controller;
    const started = performance.now();
    try {
      const options = {
        maxRows: REQUEST_ROWS,
        maxBytes: REQUEST_BYTES,
        // One request at a time keeps the file's rows in its order, which is the order pages show them in, and
        // lets the file's last row of a key win an upsert.
        concurrency: 1,
        keyPrefix: await keyPrefixOf(db, table, file, mode),
        signal: controller.signal,
        onProgress: (progress: { rows: number }) => setSent(progress.rows),
      };
      const target = strata.database(db).table(table);
      const done =
        mode === 'upsert' && key !== undefined
          ? await target.upsert(read.source, options)
          : await target.append(read.source, options);
      setReport({ done, ms: performance.now() - started });
      onLoaded();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
      abort.current = undefined;
    }
  };
  return (
    <section class="load" aria-labelledby="load-title">
      <h2 id="load-title">Load a file into {table}</h2>
      <p class="muted">
        CSV or TSV (with a header row), JSON Lines, Parquet (decoded in this browser) or Arrow IPC. The rows go in
        requests of up to {REQUEST_ROWS.toLocaleString()} rows, each with an idempotency key: loading the same file
        again after a failure skips what already landed.
      </p>
      <div class="field">
        <label for="load-file">File</label>
        <input
          id="load-file"
          ref={input}
          type="file"
          accept=".csv,.tsv,.jsonl,.ndjson,.parquet,.arrow,.arrows,.ipc"
          onChange={(event) => void choose(event.currentTarget.files?.[0])}
        />
      </div>
      {read === undefined ? null : (
        <p class="file-summary">
          {file?.name}: {read.kind}, {read.rows.toLocaleString()} rows
        </p>
      )}
      {key === undefined ? null : (
        <label class="check">
          <input
            id="load-upsert"
            type="checkbox"
            checked={mode === 'upsert'}
            onChange={(event) => setMode(event.currentTarget.checked ? 'upsert' : 'append')}
          />{' '}
          Upsert by the primary key <code>{key}</code>: a row whose key the table holds replaces it (an append refuses
          it)
        </label>
      )}
      <div class="actions">
        <button type="button" disabled={read === undefined || busy} onClick={() => void load()}>
          Load
        </button>
        {busy ? (
          <button type="button" onClick={() => abort.current?.abort(new Error('load stopped by the user'))}>
            Stop
          </button>
        ) : null}
      </div>
      {read === undefined || (!busy && report === undefined && sent === 0) ? null : (
        <div class="progress">
          <progress max={read.rows} value={sent} aria-label="Rows loaded" />
          <span aria-live="polite">
            {sent.toLocaleString()} of {read.rows.toLocaleString()} rows
          </span>
        </div>
      )}
      {report === undefined ? null : (
        <p class="ok load-report" role="status">
          Loaded {report.done.rows.toLocaleString()} rows in {report.done.requests} requests ({report.done.replayed}{' '}
          already there) in {duration(report.ms)}
          {'inserted' in report.done ? `: ${report.done.inserted} inserted, ${report.done.updated} updated` : ''}; table
          version {report.done.version ?? '?'}.
        </p>
      )}
      <ErrorNote error={error} />
    </section>
  );
}
