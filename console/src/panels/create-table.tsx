import {
  ANALYZERS,
  type ColumnType,
  type FieldSpec,
  type FtsIndexSpec,
  type IndexSpec,
  METRICS,
  SCALAR_INDEX_TYPES,
  SCALAR_TYPES,
  type ScalarIndexSpec,
  type ScalarType,
  type Strata,
  type VectorIndexSpec,
} from '@strata/client';
import { useState } from 'preact/hooks';
import { ErrorNote } from '../components/error';

/** One index per column is what the form offers; the API takes more (a scalar and a full-text one, say). */
const INDEX_CHOICES = [
  { value: '', label: 'none' },
  ...ANALYZERS.map((analyzer) => ({ value: `fts:${analyzer}`, label: `full-text (${analyzer})` })),
  ...METRICS.map((metric) => ({ value: `vector:${metric}`, label: `vector (${metric})` })),
  ...SCALAR_INDEX_TYPES.map((kind) => ({ value: `scalar:${kind}`, label: `scalar (${kind})` })),
];

const TYPES: readonly ColumnType[] = [...SCALAR_TYPES, 'vector', 'list'];

interface ColumnRow {
  name: string;
  type: ColumnType;
  dim: string;
  item: ScalarType;
  nullable: boolean;
  index: string;
}

const blank = (): ColumnRow => ({ name: '', type: 'utf8', dim: '', item: 'utf8', nullable: true, index: '' });

/** The rows of the form as the API's schema and index declarations. */
export function declarationOf(rows: readonly ColumnRow[]): { schema: FieldSpec[]; indexes: IndexSpec } {
  const schema: FieldSpec[] = [];
  const fts: FtsIndexSpec[] = [];
  const vector: VectorIndexSpec[] = [];
  const scalar: ScalarIndexSpec[] = [];
  for (const row of rows) {
    const name = row.name.trim();
    if (name === '') continue;
    schema.push({
      name,
      type: row.type,
      nullable: row.nullable,
      ...(row.type === 'vector' ? { dim: Number(row.dim) } : {}),
      ...(row.type === 'list' ? { item: row.item } : {}),
    });
    const [kind, detail] = row.index.split(':');
    const analyzer = ANALYZERS.find((a) => a === detail);
    if (kind === 'fts' && analyzer !== undefined) fts.push({ column: name, analyzer });
    const metric = METRICS.find((m) => m === detail);
    if (kind === 'vector' && metric !== undefined) vector.push({ column: name, metric });
    const scalarKind = SCALAR_INDEX_TYPES.find((s) => s === detail);
    if (kind === 'scalar' && scalarKind !== undefined) scalar.push({ column: name, kind: scalarKind });
  }
  return { schema, indexes: { fts, vector, scalar } };
}

export function CreateTableForm({ strata, db, onCreated }: { strata: Strata; db: string; onCreated: () => void }) {
  const [name, setName] = useState('');
  const [primaryKey, setPrimaryKey] = useState('');
  const [rows, setRows] = useState<ColumnRow[]>([{ ...blank(), name: 'id', type: 'i64', nullable: false }, blank()]);
  const [error, setError] = useState<unknown>(undefined);
  const [created, setCreated] = useState<string | undefined>(undefined);
  const change = (at: number, patch: Partial<ColumnRow>) =>
    setRows(rows.map((row, index) => (index === at ? { ...row, ...patch } : row)));
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    setCreated(undefined);
    try {
      const { schema, indexes } = declarationOf(rows);
      const keyed = primaryKey === '' ? {} : { primaryKey };
      const reply = await strata.database(db).createTable(name.trim(), schema, indexes, keyed);
      setCreated(reply.table_name);
      setName('');
      setPrimaryKey('');
      setRows([{ ...blank(), name: 'id', type: 'i64', nullable: false }, blank()]);
      onCreated();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form class="create-table" onSubmit={submit} aria-labelledby="create-title">
      <h2 id="create-title">Create a table</h2>
      <div class="field">
        <label for="create-name">Table name</label>
        <input
          id="create-name"
          autocomplete="off"
          value={name}
          onInput={(event) => setName(event.currentTarget.value)}
        />
      </div>
      <fieldset>
        <legend>Columns</legend>
        {rows.map((row, at) => (
          <div class="column-row" key={at}>
            <input
              aria-label={`Column ${at + 1} name`}
              placeholder="name"
              autocomplete="off"
              value={row.name}
              onInput={(event) => change(at, { name: event.currentTarget.value })}
            />
            <select
              aria-label={`Column ${at + 1} type`}
              value={row.type}
              onChange={(event) => change(at, { type: TYPES.find((t) => t === event.currentTarget.value) ?? 'utf8' })}
            >
              {TYPES.map((type) => (
                <option key={type} value={type}>
                  {type}
                </option>
              ))}
            </select>
            {row.type === 'vector' ? (
              <input
                aria-label={`Column ${at + 1} dimensions`}
                class="short"
                inputMode="numeric"
                placeholder="dim"
                value={row.dim}
                onInput={(event) => change(at, { dim: event.currentTarget.value })}
              />
            ) : null}
            {row.type === 'list' ? (
              <select
                aria-label={`Column ${at + 1} item type`}
                value={row.item}
                onChange={(event) =>
                  change(at, { item: SCALAR_TYPES.find((t) => t === event.currentTarget.value) ?? 'utf8' })
                }
              >
                {SCALAR_TYPES.map((type) => (
                  <option key={type} value={type}>
                    {type}
                  </option>
                ))}
              </select>
            ) : null}
            <label class="check">
              <input
                type="checkbox"
                checked={row.nullable}
                onChange={(event) => change(at, { nullable: event.currentTarget.checked })}
              />{' '}
              nullable
            </label>
            <select
              aria-label={`Column ${at + 1} index`}
              value={row.index}
              onChange={(event) => change(at, { index: event.currentTarget.value })}
            >
              {INDEX_CHOICES.map((choice) => (
                <option key={choice.value} value={choice.value}>
                  {choice.label}
                </option>
              ))}
            </select>
            <button
              type="button"
              aria-label={`Remove column ${at + 1}`}
              onClick={() => setRows(rows.filter((_, index) => index !== at))}
            >
              ×
            </button>
          </div>
        ))}
        <button type="button" onClick={() => setRows([...rows, blank()])}>
          Add column
        </button>
      </fieldset>
      <div class="field">
        <label for="create-primary-key">Primary key (an integer, string or binary column; lets loads upsert)</label>
        <select
          id="create-primary-key"
          value={primaryKey}
          onChange={(event) => setPrimaryKey(event.currentTarget.value)}
        >
          <option value="">none</option>
          {rows
            .map((row) => row.name.trim())
            .filter((column) => column !== '')
            .map((column) => (
              <option key={column} value={column}>
                {column}
              </option>
            ))}
        </select>
      </div>
      <button type="submit">Create table</button>
      <ErrorNote error={error} />
      {created === undefined ? null : (
        <p class="ok" role="status">
          Created {created}.
        </p>
      )}
    </form>
  );
}
