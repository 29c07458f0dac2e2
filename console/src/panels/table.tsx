import type { ColumnDescriptor, Strata } from '@strata/client';
import { useEffect, useState } from 'preact/hooks';
import { ErrorNote } from '../components/error';
import { Grid } from '../components/grid';
import { LoadFile } from './load';

const PAGE_SIZES = [10, 25, 50, 100];

/**
 * One table: its rows a page at a time, and loading a file into it. Pages are filter-only searches (docs/api.md,
 * hybrid_search): rows in row order, `offset` to `offset + k`, so pages of a table nobody writes meanwhile never
 * overlap or skip a row.
 */
export function TablePanel({ strata, db, table }: { strata: Strata; db: string; table: string }) {
  const handle = strata.database(db).table(table);
  const [schema, setSchema] = useState<ColumnDescriptor[] | undefined>(undefined);
  const [filter, setFilter] = useState('true');
  const [applied, setApplied] = useState('true');
  const [pageSize, setPageSize] = useState(25);
  const [offset, setOffset] = useState(0);
  /** The page shown, with the offset it was read from: what it says must match the rows it shows. */
  const [page, setPage] = useState<{ offset: number; rows: Record<string, unknown>[] } | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loads, setLoads] = useState(0);
  useEffect(() => {
    handle.schema().then(setSchema).catch(setError);
  }, [db, table]);
  useEffect(() => {
    setError(undefined);
    // A page asked for before this one may answer after it: only the last one asked for is shown.
    let current = true;
    handle
      .search({ filter: applied, k: pageSize, offset }, { rows: true })
      .then((rows) => {
        if (current) setPage({ offset, rows: (rows as Record<string, unknown>[]).map(withoutScores) });
      })
      .catch((err: unknown) => {
        if (!current) return;
        setPage(undefined);
        setError(err);
      });
    return () => {
      current = false;
    };
  }, [db, table, applied, pageSize, offset, loads]);
  const columns = (schema ?? []).map((column) => column.name);
  return (
    <section class="panel" aria-labelledby="table-title">
      <h1 id="table-title">Table {table}</h1>
      <form
        class="browse-controls"
        onSubmit={(event) => {
          event.preventDefault();
          setOffset(0);
          setApplied(filter.trim() === '' ? 'true' : filter);
        }}
      >
        <div class="field grow">
          <label for="browse-filter">Filter (a predicate; true for every row)</label>
          <input
            id="browse-filter"
            spellcheck={false}
            value={filter}
            onInput={(event) => setFilter(event.currentTarget.value)}
          />
        </div>
        <div class="field">
          <label for="browse-page-size">Rows a page</label>
          <select
            id="browse-page-size"
            value={String(pageSize)}
            onChange={(event) => {
              setOffset(0);
              setPageSize(Number(event.currentTarget.value));
            }}
          >
            {PAGE_SIZES.map((size) => (
              <option key={size} value={String(size)}>
                {size}
              </option>
            ))}
          </select>
        </div>
        <button type="submit">Apply</button>
      </form>
      <div class="pager">
        <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - pageSize))}>
          ← Previous
        </button>
        <span class="page-info" aria-live="polite">
          {page === undefined
            ? ''
            : page.rows.length === 0
              ? `no rows from ${page.offset + 1}`
              : `rows ${page.offset + 1}–${page.offset + page.rows.length}`}
        </span>
        <button
          type="button"
          disabled={page === undefined || page.rows.length < pageSize}
          onClick={() => setOffset(offset + pageSize)}
        >
          Next →
        </button>
      </div>
      <ErrorNote error={error} />
      {page === undefined ? null : (
        <Grid rows={page.rows} columns={columns} caption={`${table}, from row ${page.offset + 1}`} />
      )}
      {schema === undefined ? null : (
        <LoadFile strata={strata} db={db} table={table} schema={schema} onLoaded={() => setLoads(loads + 1)} />
      )}
    </section>
  );
}

/** A filter-only search answers `_score`, `_bm25` and `_distance` as null on every row: nothing to show. */
function withoutScores(row: Record<string, unknown>): Record<string, unknown> {
  const { _score, _bm25, _distance, ...columns } = row;
  return columns;
}
