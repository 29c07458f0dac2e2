import type { Strata } from '@strata/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ErrorNote } from '../components/error';
import { Grid } from '../components/grid';
import { columnsOf, duration, toCsv } from '../format';

interface Result {
  rows: Record<string, unknown>[];
  ms: number;
  query: string;
}

/** One read-only statement over the database's tables; Ctrl+Enter (⌘+Enter) runs it. */
export function SqlPanel({ strata, db }: { strata: Strata; db: string }) {
  const [query, setQuery] = useState('SHOW TABLES');
  const [result, setResult] = useState<Result | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const [download, setDownload] = useState<string | undefined>(undefined);
  const editor = useRef<HTMLTextAreaElement>(null);
  useEffect(() => editor.current?.focus(), []);
  // The object URL holds the CSV in memory until it is let go.
  useEffect(() => () => (download === undefined ? undefined : URL.revokeObjectURL(download)), [download]);
  const run = async () => {
    if (busy) return;
    setBusy(true);
    setError(undefined);
    const started = performance.now();
    try {
      const rows = (await strata.database(db).sql(query, { rows: true })) as Record<string, unknown>[];
      setResult({ rows, ms: performance.now() - started, query });
      setDownload(URL.createObjectURL(new Blob([toCsv(columnsOf(rows), rows)], { type: 'text/csv' })));
    } catch (err) {
      setResult(undefined);
      setDownload(undefined);
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="panel" aria-labelledby="sql-title">
      <h1 id="sql-title">SQL on {db}</h1>
      <form
        class="sql-form"
        onSubmit={(event) => {
          event.preventDefault();
          void run();
        }}
      >
        <label for="sql-editor">
          One read-only statement; tables by name. <kbd>Ctrl</kbd>+<kbd>Enter</kbd> runs it.
        </label>
        <textarea
          id="sql-editor"
          ref={editor}
          class="sql-editor"
          rows={6}
          spellcheck={false}
          autocomplete="off"
          value={query}
          onInput={(event) => setQuery(event.currentTarget.value)}
          onKeyDown={(event) => {
            if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
              event.preventDefault();
              void run();
            }
          }}
        />
        <div class="actions">
          <button type="submit" disabled={busy}>
            {busy ? 'Running…' : 'Run'}
          </button>
          {download === undefined || result === undefined ? null : (
            <a class="button" href={download} download={`${db}-query.csv`}>
              Download CSV
            </a>
          )}
        </div>
      </form>
      <ErrorNote error={error} />
      {result === undefined ? null : (
        <div class="results">
          <p class="muted result-summary" aria-live="polite">
            {result.rows.length.toLocaleString()} rows in {duration(result.ms)}
          </p>
          <Grid rows={result.rows} caption="Result" />
        </div>
      )}
    </section>
  );
}
