import type { DataType, Field, Schema } from 'apache-arrow';
import type { Static } from 'typebox';
import { arrow } from '../../arrow/arrow.js';
import { BASE64 } from '../../arrow/from-json.js';
import { schemaOnlyStream, streamHasBatches } from '../../arrow/ipc.js';
import { checkIpcStream, maxRowsFor } from '../../arrow/ipc-check.js';
import type { SchemaField } from '../../contract/tables.js';
import { BadRequest } from '../../errors.js';
import type { ColumnIndex } from '../indexes/registry.js';

/** One column of a JSON `schema` (docs/api.md). */
export type SchemaFieldInput = Static<typeof SchemaField>;

/** The JSON form of a column in responses. */
export interface ColumnDescriptor {
  name: string;
  type: string;
  nullable: boolean;
  dim?: number;
  item?: string;
  /** The column's declared indexes; present only where it has some. */
  indexes?: ColumnIndex[];
  /** Present (true) on the table's primary key column only. */
  primary_key?: true;
}

/** The service's own column: a unique i64 per row, assigned on write, never shown (docs/architecture.md). */
export const ROW_KEY = '_rowkey';

/** A predicate matching the rows of `keys`, among those `predicate` matches when one is given. */
export function withinRowKeys(keys: Iterable<bigint>, predicate?: string): string {
  const inKeys = `${ROW_KEY} IN (${[...keys].join(', ')})`;
  return predicate === undefined ? inKeys : `(${predicate}) AND (${inKeys})`;
}

const MAX_DIM = 4096;
const { Type, TimeUnit, Precision } = arrow;

const SCALARS: Readonly<Record<string, () => DataType>> = {
  bool: () => new arrow.Bool(),
  i8: () => new arrow.Int8(),
  i16: () => new arrow.Int16(),
  i32: () => new arrow.Int32(),
  i64: () => new arrow.Int64(),
  u8: () => new arrow.Uint8(),
  u16: () => new arrow.Uint16(),
  u32: () => new arrow.Uint32(),
  u64: () => new arrow.Uint64(),
  f16: () => new arrow.Float16(),
  f32: () => new arrow.Float32(),
  f64: () => new arrow.Float64(),
  utf8: () => new arrow.Utf8(),
  string: () => new arrow.Utf8(),
  large_utf8: () => new arrow.LargeUtf8(),
  binary: () => new arrow.Binary(),
  large_binary: () => new arrow.LargeBinary(),
  date32: () => new arrow.DateDay(),
  timestamp_ms: () => new arrow.Timestamp(TimeUnit.MILLISECOND, 'UTC'),
  timestamp_us: () => new arrow.Timestamp(TimeUnit.MICROSECOND, 'UTC'),
};

const SCALAR_NAMES = Object.keys(SCALARS).join(', ');

/** The spelling of a type, when it has one (`string` is an input alias of `utf8`). */
export function spellingOf(type: DataType): string | undefined {
  switch (type.typeId) {
    case Type.Bool:
      return 'bool';
    case Type.Int: {
      const t = type as InstanceType<typeof arrow.Int>;
      return `${t.isSigned ? 'i' : 'u'}${t.bitWidth}`;
    }
    case Type.Float: {
      const precision = (type as InstanceType<typeof arrow.Float>).precision;
      return precision === Precision.HALF ? 'f16' : precision === Precision.SINGLE ? 'f32' : 'f64';
    }
    case Type.Utf8:
      return 'utf8';
    case Type.LargeUtf8:
      return 'large_utf8';
    case Type.Binary:
      return 'binary';
    case Type.LargeBinary:
      return 'large_binary';
    case Type.Date:
      return (type as InstanceType<typeof arrow.Date_>).unit === arrow.DateUnit.DAY ? 'date32' : undefined;
    case Type.Timestamp: {
      const t = type as InstanceType<typeof arrow.Timestamp>;
      if (t.timezone !== 'UTC') return undefined;
      return t.unit === TimeUnit.MILLISECOND
        ? 'timestamp_ms'
        : t.unit === TimeUnit.MICROSECOND
          ? 'timestamp_us'
          : undefined;
    }
    default:
      return undefined;
  }
}

/** A FixedSizeList of floats: the columns vector indexes and vector queries apply to. */
export function vectorWidth(type: DataType): number | undefined {
  if (type.typeId !== Type.FixedSizeList) return undefined;
  const list = type as InstanceType<typeof arrow.FixedSizeList>;
  return list.children[0]?.type.typeId === Type.Float ? list.listSize : undefined;
}

export function isTextType(type: DataType): boolean {
  return type.typeId === Type.Utf8 || type.typeId === Type.LargeUtf8;
}

export function describeField(field: Field): ColumnDescriptor {
  const base = { name: field.name, nullable: field.nullable };
  const type = field.type as DataType;
  if (type.typeId === Type.FixedSizeList) {
    const child = (type as InstanceType<typeof arrow.FixedSizeList>).children[0];
    if (child !== undefined && child.type.typeId === Type.Float && spellingOf(child.type) === 'f32') {
      return { ...base, type: 'vector', dim: (type as InstanceType<typeof arrow.FixedSizeList>).listSize };
    }
  }
  if (type.typeId === Type.List) {
    const item = spellingOf((type as InstanceType<typeof arrow.List>).children[0]?.type ?? type);
    if (item !== undefined) return { ...base, type: 'list', item };
  }
  return { ...base, type: spellingOf(type) ?? String(type) };
}

export function describeSchema(schema: Schema): ColumnDescriptor[] {
  return userFields(schema).map(describeField);
}

/** The columns a user sees: everything but the service's own. */
function userFields(schema: Schema): Field[] {
  return schema.fields.filter((field) => field.name !== ROW_KEY);
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what the rule forbids
const CONTROL = /[\u0000-\u001f\u007f]/;

function checkColumnName(name: string, where: string): void {
  if (name.length < 1 || name.length > 128) throw new BadRequest(`${where}: column name must be 1–128 characters`);
  if (CONTROL.test(name)) throw new BadRequest(`${where}: column name "${name}" contains a control character`);
  // Predicates, filters and the engines' own generated SQL back-quote names; a name holding the quote
  // itself cannot be written in all of them alike.
  if (name.includes('`')) throw new BadRequest(`${where}: column name "${name}" must not contain a backtick (\`)`);
  // Lance reads a dot in a top-level name as a path into a struct.
  if (name.includes('.')) throw new BadRequest(`${where}: column name "${name}" must not contain a dot (.)`);
  if (name.startsWith('_')) {
    throw new BadRequest(`${where}: column name "${name}" must not start with _ (reserved for the service)`);
  }
}

function checkUniqueNames(names: readonly string[], where: string): void {
  const seen = new Map<string, string>();
  for (const name of names) {
    const earlier = seen.get(name.toLowerCase());
    if (earlier !== undefined) {
      throw new BadRequest(
        `${where}: column "${name}" repeats "${earlier}" (column names are unique regardless of case)`,
      );
    }
    seen.set(name.toLowerCase(), name);
  }
}

/** Types Lance cannot store, refused anywhere in a schema (nested ones included). */
function checkStorable(type: DataType, where: string): void {
  const refused: Partial<Record<number, string>> = {
    [Type.Union]: 'union',
    [Type.Interval]: 'interval',
    [Type.Map]: 'map',
    [Type.Null]: 'null',
  };
  const name = refused[type.typeId];
  if (name !== undefined) throw new BadRequest(`${where}: ${name} columns are not supported by the storage engine`);
  for (const child of type.children ?? []) {
    if (child.name === '' || CONTROL.test(child.name) || child.name.includes('`')) {
      throw new BadRequest(`${where}: nested field names must be non-empty, without control characters or backticks`);
    }
    checkStorable(child.type, `${where}.${child.name}`);
  }
}

/** A JSON `schema` → the Arrow schema it names, or a 400 naming the offending field. */
export function schemaFromFields(fields: readonly SchemaFieldInput[]): Schema {
  if (fields.length === 0) throw new BadRequest('schema must list at least one column');
  const out = fields.map((field, i) => {
    const where = `schema[${i}]`;
    checkColumnName(field.name, where);
    const nullable = field.nullable ?? true;
    const has = (value: unknown) => value !== undefined && value !== null;
    if (field.type !== 'vector' && has(field.dim)) {
      throw new BadRequest(`${where}.dim is only allowed on vector columns ("${field.name}" is ${field.type})`);
    }
    if (field.type !== 'list' && has(field.item)) {
      throw new BadRequest(`${where}.item is only allowed on list columns ("${field.name}" is ${field.type})`);
    }
    if (field.type === 'vector') {
      const dim = field.dim;
      if (dim === undefined || dim === null)
        throw new BadRequest(`${where}.dim is required for vector column "${field.name}"`);
      if (!Number.isInteger(dim) || dim < 1 || dim > MAX_DIM) {
        throw new BadRequest(`${where}.dim must be an integer from 1 to ${MAX_DIM}, got ${dim}`);
      }
      const item = new arrow.Field('item', new arrow.Float32(), true);
      return new arrow.Field(field.name, new arrow.FixedSizeList(dim, item), nullable);
    }
    if (field.type === 'list') {
      const item = field.item;
      if (item === undefined || item === null)
        throw new BadRequest(`${where}.item is required for list column "${field.name}"`);
      const make = SCALARS[item];
      if (make === undefined)
        throw new BadRequest(`${where}.item "${item}" is not a scalar type (one of ${SCALAR_NAMES})`);
      return new arrow.Field(field.name, new arrow.List(new arrow.Field('item', make(), true)), nullable);
    }
    const make = SCALARS[field.type];
    if (make === undefined) {
      throw new BadRequest(`${where}.type "${field.type}" is not a type (one of ${SCALAR_NAMES}, vector, list)`);
    }
    return new arrow.Field(field.name, make(), nullable);
  });
  checkUniqueNames(
    out.map((f) => f.name),
    'schema',
  );
  return new arrow.Schema(out);
}

/** `text` as bytes, refusing anything that is not strict base64 with a 400 naming `what`. */
function decodeBase64(text: string, what: string): Uint8Array {
  if (!BASE64.test(text)) throw new BadRequest(`${what} is not valid base64`);
  return Buffer.from(text, 'base64');
}

/** A base64 schema-only Arrow IPC stream → its schema; a stream carrying batches is refused. */
export function schemaFromIpc(base64: string): Schema {
  const bytes = decodeBase64(base64, 'schema_ipc');
  // Checked before Arrow JS reads it: a damaged stream could otherwise make the decoder hang or allocate at will.
  checkIpcStream(bytes, { maxRows: maxRowsFor(bytes), subject: 'schema_ipc' });
  let schema: Schema;
  let hasBatches: boolean;
  try {
    const reader = arrow.RecordBatchReader.from(bytes);
    reader.open();
    schema = reader.schema;
    hasBatches = streamHasBatches(bytes);
  } catch (err) {
    throw new BadRequest(`schema_ipc is not an Arrow IPC stream: ${(err as Error).message}`);
  }
  if (schema === undefined || schema.fields.length === 0) throw new BadRequest('schema_ipc holds no columns');
  if (hasBatches) throw new BadRequest('schema_ipc must hold only a schema message; it carries record batches');
  schema.fields.forEach((field, i) => {
    const where = `schema_ipc field ${i} ("${field.name}")`;
    checkColumnName(field.name, where);
    checkStorable(field.type, where);
  });
  checkUniqueNames(
    schema.fields.map((f) => f.name),
    'schema_ipc',
  );
  // Field metadata is kept; schema metadata is the service's to set.
  return new arrow.Schema(schema.fields);
}

/** The schema as a base64 schema-only IPC stream, which create_table accepts back unchanged. */
export function schemaToIpc(schema: Schema): string {
  return Buffer.from(schemaOnlyStream(new arrow.Schema(userFields(schema)))).toString('base64');
}

/** The stored schema: the user's columns, then the row key. */
export function storedSchema(schema: Schema): Schema {
  return new arrow.Schema([...userFields(schema), new arrow.Field(ROW_KEY, new arrow.Int64(), false)]);
}
