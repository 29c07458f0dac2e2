import type { ColumnDescriptor, Receipt, SearchExplain, Strata, TableListing } from '@strata/client';
import { useEffect, useState } from 'preact/hooks';
import { CopyBlock } from '../components/copy';
import { ErrorNote } from '../components/error';
import { Grid } from '../components/grid';
import { duration } from '../format';
import { type BoostedField, type ConsoleSearch, clientCodeOf, curlOf } from '../search-request';
import { ExplainLegs, ExplainSummary } from './explain';

interface Form {
  table: string;
  text: string;
  fields: BoostedField[];
  vectorField: string;
  vector: string;
  filter: string;
  k: string;
  offset: string;
  operator: 'or' | 'and';
  textWeight: string;
  vectorWeight: string;
  consistency: 'strong' | 'eventual';
  explain: boolean;
}

const START: Form = {
  table: '',
  text: '',
  fields: [{ field: '', boost: 1 }],
  vectorField: '',
  vector: '',
  filter: '',
  k: '10',
  offset: '0',
  operator: 'or',
  textWeight: '1',
  vectorWeight: '1',
  consistency: 'strong',
  explain: true,
};

/** Numbers the form holds as text: an empty field is the server's default, anything else must be a number. */
function numberOf(text: string, label: string): number | undefined {
  if (text.trim() === '') return undefined;
  const number = Number(text);
  if (!Number.isFinite(number)) throw new Error(`${label} must be a number`);
  return number;
}

/** The form as the client's search request; throws, with words for the user, on what the form can tell is wrong. */
export function searchOf(form: Form): ConsoleSearch {
  const fields = form.fields.filter((field) => field.field !== '');
  let vector: number[] | undefined;
  if (form.vector.trim() !== '') {
    const parsed: unknown = JSON.parse(form.vector);
    if (!Array.isArray(parsed) || !parsed.every((item) => typeof item === 'number'))
      throw new Error('the vector must be a JSON array of numbers, e.g. [0.1, 0.2, 0.3]');
    vector = parsed;
  }
  const text = form.text.trim() === '' ? undefined : form.text;
  const textWeight = numberOf(form.textWeight, 'text weight');
  const vectorWeight = numberOf(form.vectorWeight, 'vector weight');
  return {
    text,
    ...(text !== undefined && fields.length === 1 ? { textField: fields[0]?.field } : {}),
    ...(text !== undefined && fields.length > 1 ? { textFields: fields } : {}),
    vector,
    vectorField: vector === undefined || form.vectorField === '' ? undefined : form.vectorField,
    filter: form.filter.trim() === '' ? undefined : form.filter,
    k: numberOf(form.k, 'k') ?? 10,
    offset: numberOf(form.offset, 'offset') || undefined,
    operator: text !== undefined && form.operator === 'and' ? 'and' : undefined,
    textWeight: textWeight === 1 ? undefined : textWeight,
    vectorWeight: vectorWeight === 1 ? undefined : vectorWeight,
    consistency: form.consistency === 'eventual' ? 'eventual' : undefined,
    explain: form.explain ? true : undefined,
  };
}

interface Answer {
  rows: Record<string, unknown>[];
  receipt: Receipt;
  explain?: SearchExplain;
  ms: number;
}

export function SearchPanel({ strata, db }: { strata: Strata; db: string }) {
  const database = strata.database(db);
  const [tables, setTables] = useState<TableListing[]>([]);
  const [schema, setSchema] = useState<ColumnDescriptor[]>([]);
  const [form, setForm] = useState(START);
  const [answer, setAnswer] = useState<Answer | undefined>(undefined);
  const [sent, setSent] = useState<ConsoleSearch | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const set = <K extends keyof Form>(name: K, value: Form[K]) => setForm((now) => ({ ...now, [name]: value }));
  useEffect(() => {
    database
      .listTables()
      .then((list) => {
        setTables(list);
        if (list[0] !== undefined) set('table', list[0].table_name);
      })
      .catch(setError);
  }, [db]);
  useEffect(() => {
    if (form.table === '') return;
    database
      .table(form.table)
      .schema()
      .then((columns) => {
        setSchema(columns);
        const text = columns.filter((c) => c.indexes?.some((index) => index.kind === 'fts'));
        const vector = columns.filter((c) => c.indexes?.some((index) => index.kind === 'vector'));
        setForm((now) => ({
          ...now,
          fields: [{ field: text[0]?.name ?? '', boost: 1 }],
          vectorField: vector[0]?.name ?? '',
        }));
      })
      .catch(setError);
  }, [form.table]);
  const textColumns = schema.filter((c) => c.indexes?.some((index) => index.kind === 'fts')).map((c) => c.name);
  const vectorColumns = schema.filter((c) => c.indexes?.some((index) => index.kind === 'vector')).map((c) => c.name);
  const run = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    setBusy(true);
    try {
      const search = searchOf(form);
      setSent(search);
      const started = performance.now();
      const reply = await database.table(form.table).searchWithReceipt(search, { rows: true });
      setAnswer({
        rows: reply.rows as Record<string, unknown>[],
        receipt: reply.receipt,
        ...(reply.explain === undefined ? {} : { explain: reply.explain }),
        ms: performance.now() - started,
      });
    } catch (err) {
      setAnswer(undefined);
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const setField = (at: number, patch: Partial<BoostedField>) =>
    set(
      'fields',
      form.fields.map((field, index) => (index === at ? { ...field, ...patch } : field)),
    );
  const firstColumns = ['_score', '_bm25', '_distance'];
  return (
    <section class="panel" aria-labelledby="search-title">
      <h1 id="search-title">Search {db}</h1>
      <form class="search-form" onSubmit={run}>
        <div class="fields">
          <div class="field">
            <label for="search-table">Table</label>
            <select id="search-table" value={form.table} onChange={(event) => set('table', event.currentTarget.value)}>
              {tables.map((table) => (
                <option key={table.table_name} value={table.table_name}>
                  {table.table_name}
                </option>
              ))}
            </select>
          </div>
          <div class="field grow">
            <label for="search-text">Text query</label>
            <input
              id="search-text"
              type="search"
              spellcheck={false}
              value={form.text}
              onInput={(event) => set('text', event.currentTarget.value)}
            />
          </div>
        </div>
        <fieldset class="text-fields">
          <legend>Text fields and boosts</legend>
          {form.fields.map((field, at) => (
            <div class="column-row" key={at}>
              <select
                aria-label={`Text field ${at + 1}`}
                value={field.field}
                onChange={(event) => setField(at, { field: event.currentTarget.value })}
              >
                <option value="">(none)</option>
                {textColumns.map((name) => (
                  <option key={name} value={name}>
                    {name}
                  </option>
                ))}
              </select>
              <input
                aria-label={`Boost of text field ${at + 1}`}
                class="short"
                type="number"
                step="any"
                min="0"
                value={String(field.boost)}
                onInput={(event) => setField(at, { boost: Number(event.currentTarget.value) })}
              />
              {form.fields.length > 1 ? (
                <button
                  type="button"
                  aria-label={`Remove text field ${at + 1}`}
                  onClick={() =>
                    set(
                      'fields',
                      form.fields.filter((_, index) => index !== at),
                    )
                  }
                >
                  ×
                </button>
              ) : null}
            </div>
          ))}
          <button type="button" onClick={() => set('fields', [...form.fields, { field: '', boost: 1 }])}>
            Add text field
          </button>
          <p class="muted">One field is sent as text_field; more than one as text_fields with their boosts.</p>
        </fieldset>
        <div class="fields">
          <div class="field">
            <label for="search-vector-field">Vector field</label>
            <select
              id="search-vector-field"
              value={form.vectorField}
              onChange={(event) => set('vectorField', event.currentTarget.value)}
            >
              <option value="">(none)</option>
              {vectorColumns.map((name) => (
                <option key={name} value={name}>
                  {name}
                </option>
              ))}
            </select>
          </div>
          <div class="field grow">
            <label for="search-vector">Vector (a JSON array)</label>
            <textarea
              id="search-vector"
              rows={2}
              spellcheck={false}
              placeholder="[0.1, 0.2, 0.3]"
              value={form.vector}
              onInput={(event) => set('vector', event.currentTarget.value)}
            />
          </div>
        </div>
        <div class="fields">
          <div class="field grow">
            <label for="search-filter">Filter</label>
            <input
              id="search-filter"
              spellcheck={false}
              placeholder="category = 'tools' AND price < 50"
              value={form.filter}
              onInput={(event) => set('filter', event.currentTarget.value)}
            />
          </div>
          {numberField('search-k', 'k', form.k, (value) => set('k', value))}
          {numberField('search-offset', 'Offset', form.offset, (value) => set('offset', value))}
          <div class="field">
            <label for="search-operator">Operator</label>
            <select
              id="search-operator"
              value={form.operator}
              onChange={(event) => set('operator', event.currentTarget.value === 'and' ? 'and' : 'or')}
            >
              <option value="or">or (any token)</option>
              <option value="and">and (every token)</option>
            </select>
          </div>
          {numberField('search-text-weight', 'Text weight', form.textWeight, (value) => set('textWeight', value))}
          {numberField('search-vector-weight', 'Vector weight', form.vectorWeight, (value) =>
            set('vectorWeight', value),
          )}
          <div class="field">
            <label for="search-consistency">Consistency</label>
            <select
              id="search-consistency"
              value={form.consistency}
              onChange={(event) => set('consistency', event.currentTarget.value === 'eventual' ? 'eventual' : 'strong')}
            >
              <option value="strong">strong</option>
              <option value="eventual">eventual</option>
            </select>
          </div>
          <label class="check">
            <input
              id="search-explain"
              type="checkbox"
              checked={form.explain}
              onChange={(event) => set('explain', event.currentTarget.checked)}
            />{' '}
            Explain
          </label>
        </div>
        <button type="submit" disabled={busy || form.table === ''}>
          {busy ? 'Searching…' : 'Search'}
        </button>
      </form>
      <ErrorNote error={error} />
      {answer === undefined ? null : (
        <div class="results" aria-live="polite">
          <p class="muted result-summary">
            {answer.rows.length} rows in {duration(answer.ms)} · table version {answer.receipt.version} · rows outside
            the indexes: {answer.receipt.freshRows}
          </p>
          {answer.explain === undefined ? null : <ExplainSummary explain={answer.explain} />}
          <Grid
            rows={answer.rows}
            columns={firstColumns}
            caption="Results: open a row to see it in full, and why it ranked there"
            detail={(row) => <ExplainLegs row={row} />}
          />
        </div>
      )}
      {sent === undefined ? null : (
        <details class="request">
          <summary>This request as curl and as @strata/client code</summary>
          <CopyBlock label="curl" text={curlOf(location.origin, db, form.table, sent)} />
          <CopyBlock label="@strata/client" text={clientCodeOf(location.origin, db, form.table, sent)} />
        </details>
      )}
    </section>
  );
}

function numberField(id: string, label: string, value: string, onValue: (value: string) => void) {
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input
        id={id}
        class="short"
        type="number"
        step="any"
        min="0"
        value={value}
        onInput={(event) => onValue(event.currentTarget.value)}
      />
    </div>
  );
}
