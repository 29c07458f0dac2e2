import {
  type DuckDBArrayType,
  type DuckDBDecimalType,
  type DuckDBListType,
  type DuckDBType,
  DuckDBTypeId,
} from '@duckdb/node-api';
import { type ColumnType, type FieldSpec, SCALAR_TYPES, type ScalarType } from '@strata/client';
import type { DataType, Schema } from 'apache-arrow';
import { arrow } from '../arrow/arrow.js';
import { describeSchema } from '../engine/tables/schema.js';
import { arrowType, quoteIdent } from '../sql/types.js';

const { TimeUnit } = arrow;

/**
 * How `strata load` reads a column DuckDB found in a file so that the service can store it as it is: the SQL
 * expression and the Arrow type the values are sent as. The spelling `--create` gives the service is then the
 * service's own (`describeSchema`, the table of spellings its replies use), so the two cannot drift.
 */
export interface ColumnRead {
  /** The SQL expression over the file's column. */
  sql: string;
  /** The Arrow type sent: one the service has a spelling for. */
  type: DataType;
  /** What the service has no type for and how the column is loaded instead (docs/cli.md, Loading files). */
  note?: string;
}

/** Decimal digits a double holds exactly: a DECIMAL of up to 15 digits comes back as the same decimal text. */
export const DOUBLE_DIGITS = 15;

const utc = (unit: number) => new arrow.Timestamp(unit, 'UTC');

/** What is known of a column beyond its type. */
export interface ColumnFacts {
  /** The dimension the user declared it a vector of. */
  vectorDim?: number;
  /** A DECIMAL column whose values all have at most 15 significant digits: f64 holds each exactly. */
  decimalsFitDouble?: boolean;
}

/** How a column of DuckDB type `type` is read. */
export function columnRead(name: string, type: DuckDBType, facts: ColumnFacts = {}): ColumnRead {
  const { vectorDim } = facts;
  const column = quoteIdent(name);
  // Read as a list and checked row by row when encoded, so a vector of the wrong length is named with its row.
  if (vectorDim !== undefined) {
    return {
      sql: `CAST(${column} AS FLOAT[])`,
      type: new arrow.FixedSizeList(vectorDim, new arrow.Field('item', new arrow.Float32(), true)),
    };
  }
  const read = valueRead(type, facts.decimalsFitDouble === true);
  return { ...read, sql: read.sql(column) };
}

type Read = Omit<ColumnRead, 'sql'> & { sql: (value: string) => string };

const as = (sqlType: string) => (value: string) => `CAST(${value} AS ${sqlType})`;
const itself = (value: string) => value;
const text = (what: string): Read => ({
  sql: as('VARCHAR'),
  type: new arrow.Utf8(),
  note: `${what}: the service has no such type; loaded as its text (utf8)`,
});

function valueRead(type: DuckDBType, decimalsFit = false): Read {
  switch (type.typeId) {
    case DuckDBTypeId.BOOLEAN:
    case DuckDBTypeId.TINYINT:
    case DuckDBTypeId.SMALLINT:
    case DuckDBTypeId.INTEGER:
    case DuckDBTypeId.BIGINT:
    case DuckDBTypeId.UTINYINT:
    case DuckDBTypeId.USMALLINT:
    case DuckDBTypeId.UINTEGER:
    case DuckDBTypeId.UBIGINT:
    case DuckDBTypeId.FLOAT:
    case DuckDBTypeId.DOUBLE:
    case DuckDBTypeId.VARCHAR:
    case DuckDBTypeId.BLOB:
    case DuckDBTypeId.DATE:
      return { sql: itself, type: arrowType(type) };
    // The service's timestamps are UTC instants; a timestamp without a zone is read as UTC.
    case DuckDBTypeId.TIMESTAMP:
    case DuckDBTypeId.TIMESTAMP_TZ:
      return { sql: itself, type: utc(TimeUnit.MICROSECOND) };
    case DuckDBTypeId.TIMESTAMP_MS:
      return { sql: itself, type: utc(TimeUnit.MILLISECOND) };
    case DuckDBTypeId.TIMESTAMP_S:
      return { sql: as('TIMESTAMP_MS'), type: utc(TimeUnit.MILLISECOND) };
    case DuckDBTypeId.TIMESTAMP_NS:
      return {
        sql: as('TIMESTAMP'),
        type: utc(TimeUnit.MICROSECOND),
        note: 'TIMESTAMP_NS: the service keeps microseconds; loaded as timestamp_us, the nanoseconds cut',
      };
    case DuckDBTypeId.DECIMAL: {
      const { width, scale } = type as DuckDBDecimalType;
      // The service has no decimal type. A double gives back the same decimal text for values of up to 15
      // significant digits (the declared width is often wider than any value: DuckDB's 1.5 * BIGINT is
      // DECIMAL(21,1)); wider values would lose digits as doubles, so they keep their exact text.
      return width <= DOUBLE_DIGITS || decimalsFit
        ? {
            sql: as('DOUBLE'),
            type: new arrow.Float64(),
            note: `DECIMAL(${width},${scale}): the service has no decimal type; loaded as f64, which holds each of its values (at most ${DOUBLE_DIGITS} digits) exactly`,
          }
        : text(`DECIMAL(${width},${scale}) with values of more than ${DOUBLE_DIGITS} digits, which f64 would round`);
    }
    case DuckDBTypeId.HUGEINT:
    case DuckDBTypeId.UHUGEINT:
      return text(`${type.toString()} (wider than 64 bits)`);
    case DuckDBTypeId.LIST:
      return listRead(type, (type as DuckDBListType).valueType) ?? json(type);
    case DuckDBTypeId.ARRAY: {
      const item = (type as DuckDBArrayType).valueType;
      const list = listRead(type, item);
      // A fixed-size array not declared a vector is a list of its items.
      return list === undefined ? json(type) : { ...list, sql: (value) => list.sql(`CAST(${value} AS ${item}[])`) };
    }
    case DuckDBTypeId.STRUCT:
    case DuckDBTypeId.MAP:
    case DuckDBTypeId.UNION:
      return json(type);
    default:
      // TIME, INTERVAL, UUID, ENUM, BIT, a column of nulls, …: their DuckDB text.
      return text(type.toString());
  }
}

/** A list of scalars, its items read as the service stores them; undefined for lists of lists or structs. */
function listRead(type: DuckDBType, valueType: DuckDBType): Read | undefined {
  const item = valueRead(valueType);
  if (item.sql === toJson || [arrow.Type.List, arrow.Type.FixedSizeList].includes(item.type.typeId)) {
    return undefined;
  }
  return {
    sql: (value) => (item.sql === itself ? value : `list_transform(${value}, v -> ${item.sql('v')})`),
    type: new arrow.List(new arrow.Field('item', item.type, true)),
    note: item.note === undefined ? undefined : `${type}: items of ${item.note}`,
  };
}

const toJson = (value: string) => `CAST(to_json(${value}) AS VARCHAR)`;
const json = (type: DuckDBType): Read => ({
  sql: toJson,
  type: new arrow.Utf8(),
  note: `${type}: the service has no nested type but lists of scalars; loaded as its JSON text (utf8)`,
});

/** The columns of `schema` as `--create` gives them: the service's own spellings of the types sent. */
export function fieldSpecs(schema: Schema): FieldSpec[] {
  return describeSchema(schema).map((column) => {
    const type = spelled(column.type, column.name);
    return {
      name: column.name,
      type,
      ...(column.dim === undefined ? {} : { dim: column.dim }),
      ...(column.item === undefined ? {} : { item: spelled(column.item, column.name) as ScalarType }),
    };
  });
}

/** A type the JSON schema form spells; the reads above only make such types, so any other is a fault here. */
function spelled(type: string, column: string): ColumnType {
  if ((SCALAR_TYPES as readonly string[]).includes(type) || type === 'vector' || type === 'list') {
    return type as ColumnType;
  }
  throw new Error(`column "${column}": type ${type} has no spelling in the service's JSON schema form`);
}
