import type { ColumnDescriptor, Strata, TableListing } from '@strata/client';
import { useEffect, useState } from 'preact/hooks';
import { ErrorNote } from '../components/error';
import { useFocusOnShow } from '../components/focus';
import { duration, jsonText } from '../format';
import { type IndexHealth, probeHealth, READ_WORDS } from '../health';
import { hrefOf } from '../route';
import { CreateTableForm } from './create-table';

/** A database's tables with their row counts; each opens to its columns, indexes and index health. */
export function DatabasePanel({ strata, db }: { strata: Strata; db: string }) {
  const database = strata.database(db);
  const [tables, setTables] = useState<TableListing[] | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [dropping, setDropping] = useState<string | undefined>(undefined);
  const reload = async () => {
    try {
      setTables(await database.listTables());
      setError(undefined);
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => {
    void reload();
  }, [db]);
  return (
    <section class="panel" aria-labelledby="database-title">
      <div class="panel-head">
        <h1 id="database-title">Tables of {db}</h1>
        <button type="button" onClick={() => void reload()}>
          Refresh
        </button>
      </div>
      <ErrorNote error={error} />
      {tables === undefined ? null : tables.length === 0 ? (
        <p class="muted">No table yet: create one below.</p>
      ) : (
        tables.map((listing) => (
          <TableSummary
            key={listing.table_name}
            strata={strata}
            db={db}
            listing={listing}
            onDrop={() => setDropping(listing.table_name)}
          />
        ))
      )}
      {dropping === undefined ? null : (
        <DropTable
          strata={strata}
          db={db}
          table={dropping}
          onDone={() => {
            setDropping(undefined);
            void reload();
          }}
        />
      )}
      <CreateTableForm strata={strata} db={db} onCreated={() => void reload()} />
    </section>
  );
}

function TableSummary({
  strata,
  db,
  listing,
  onDrop,
}: {
  strata: Strata;
  db: string;
  listing: TableListing;
  onDrop: () => void;
}) {
  const name = listing.table_name;
  const [schema, setSchema] = useState<ColumnDescriptor[] | undefined>(undefined);
  const [health, setHealth] = useState<IndexHealth[] | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    const table = strata.database(db).table(name);
    table
      .schema()
      .then(async (columns) => {
        setSchema(columns);
        setHealth(await probeHealth(table, columns));
      })
      .catch(setError);
  }, [db, name, listing.num_rows]);
  const primaryKey = (schema ?? []).filter((column) => column.primary_key === true);
  return (
    <article class="table-card" data-table={name} aria-labelledby={`table-${name}`}>
      <div class="panel-head">
        <h2 id={`table-${name}`}>
          <a href={hrefOf({ view: 'table', db, table: name })}>{name}</a>{' '}
          <span class="muted rows-count">{listing.num_rows.toLocaleString()} rows</span>{' '}
          <span class="muted last-upkeep">
            {listing.last_upkeep_ms === null
              ? 'no upkeep yet'
              : `last upkeep ${new Date(listing.last_upkeep_ms).toISOString().replace('T', ' ').slice(0, 19)} UTC`}
          </span>
        </h2>
        <div class="actions">
          <a class="button" href={hrefOf({ view: 'table', db, table: name })}>
            Browse & load
          </a>
          <button type="button" class="danger" onClick={onDrop}>
            Drop…
          </button>
        </div>
      </div>
      <ErrorNote error={error} />
      {schema === undefined ? null : (
        <div class="grid-wrap">
          <table class="grid schema">
            <thead>
              <tr>
                <th scope="col">Column</th>
                <th scope="col">Type</th>
                <th scope="col">Nullable</th>
                <th scope="col">Indexes</th>
              </tr>
            </thead>
            <tbody>
              {schema.map((column) => (
                <tr key={column.name}>
                  <td>{column.name}</td>
                  <td>
                    {column.type}
                    {column.dim === undefined ? '' : `(${column.dim})`}
                    {column.item === undefined ? '' : `<${column.item}>`}
                  </td>
                  <td>{column.nullable ? 'yes' : 'no'}</td>
                  <td>
                    {(column.indexes ?? [])
                      .map((index) =>
                        index.kind === 'fts'
                          ? `full-text (${typeof index.analyzer === 'string' ? index.analyzer : jsonText(index.analyzer)})`
                          : index.kind === 'vector'
                            ? `vector (${index.metric})`
                            : `scalar (${index.type})`,
                      )
                      .join(', ')}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <p class="muted primary-key">
        Primary key:{' '}
        {primaryKey.length === 0
          ? 'none (appends only; no upsert)'
          : `${primaryKey.map((c) => c.name).join(', ')} (one row per key; loads may upsert)`}
      </p>
      {health === undefined || health.length === 0 ? null : <HealthTable health={health} />}
    </article>
  );
}

function HealthTable({ health }: { health: IndexHealth[] }) {
  return (
    <div class="grid-wrap">
      <table class="grid health">
        <caption>Search index health (as a search now would find it)</caption>
        <thead>
          <tr>
            <th scope="col">Index</th>
            <th scope="col">Rows not yet in the index</th>
            <th scope="col">How a search reads</th>
            <th scope="col">Probe time</th>
            <th scope="col">Table version</th>
          </tr>
        </thead>
        <tbody>
          {health.map((index) => (
            <tr key={`${index.kind}:${index.column}`} data-index={`${index.kind}:${index.column}`}>
              <td>
                {index.kind === 'fts' ? 'full-text' : 'vector'} on {index.column}
              </td>
              <td class={`num ${index.outsideIndex > 0 ? 'warn' : 'ok'}`}>{index.outsideIndex.toLocaleString()}</td>
              <td>{READ_WORDS[index.read]}</td>
              <td class="num">{duration(index.ms)}</td>
              <td class="num">{index.version}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Dropping asks for the table's name typed out, as deleting a database does. */
function DropTable({ strata, db, table, onDone }: { strata: Strata; db: string; table: string; onDone: () => void }) {
  const confirmInput = useFocusOnShow<HTMLInputElement>();
  const [typed, setTyped] = useState('');
  const [purge, setPurge] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [result, setResult] = useState<string | undefined>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    try {
      const reply = await strata.database(db).dropTable(table, { purge });
      setResult(
        reply.purged
          ? `Dropped ${table}; its files were deleted.`
          : `Dropped ${table}; its files stay at ${reply.location}.`,
      );
    } catch (err) {
      setError(err);
    }
  };
  if (result !== undefined)
    return (
      <div class="confirm" role="status">
        <p>{result}</p>
        <button type="button" onClick={onDone}>
          OK
        </button>
      </div>
    );
  return (
    <form class="confirm" onSubmit={submit} aria-labelledby="drop-title">
      <h2 id="drop-title">Drop table {table}</h2>
      <label for="drop-confirm">
        Type <code>{table}</code> to confirm
      </label>
      <input
        id="drop-confirm"
        ref={confirmInput}
        autocomplete="off"
        value={typed}
        onInput={(event) => setTyped(event.currentTarget.value)}
      />
      <label class="check">
        <input type="checkbox" checked={purge} onChange={(event) => setPurge(event.currentTarget.checked)} /> Also
        delete its files from the bucket
      </label>
      <div class="actions">
        <button type="submit" class="danger" disabled={typed !== table}>
          Drop {table}
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
      <ErrorNote error={error} />
    </form>
  );
}
