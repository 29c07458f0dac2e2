import {
  type DuckDBArrayType,
  type DuckDBDecimalType,
  type DuckDBListType,
  type DuckDBStructType,
  type DuckDBType,
  DuckDBTypeId,
} from '@duckdb/node-api';
import type { DataType, Field } from 'apache-arrow';
import { arrow } from '../arrow/arrow.js';

// Arrow types as DuckDB types (loading), and DuckDB types as Arrow types (results).

const { Type, TimeUnit, Precision } = arrow;

/** DuckDB's widest decimal; wider Arrow decimals are loaded as their exact decimal text. */
export const MAX_DECIMAL_PRECISION = 38;

/** An SQL identifier, quoted. */
export const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** The DuckDB column type that holds an Arrow type without loss (docs/api.md: vectors are SQL arrays of floats). */
export function duckdbType(type: DataType): string {
  switch (type.typeId) {
    case Type.Bool:
      return 'BOOLEAN';
    case Type.Int: {
      const t = type as InstanceType<typeof arrow.Int>;
      const name = { 8: 'TINYINT', 16: 'SMALLINT', 32: 'INTEGER', 64: 'BIGINT' }[t.bitWidth] ?? 'BIGINT';
      return t.isSigned ? name : `U${name}`;
    }
    case Type.Float:
      return (type as InstanceType<typeof arrow.Float>).precision === Precision.DOUBLE ? 'DOUBLE' : 'FLOAT';
    case Type.Utf8:
    case Type.LargeUtf8:
      return 'VARCHAR';
    case Type.Binary:
    case Type.LargeBinary:
    case Type.FixedSizeBinary:
      return 'BLOB';
    case Type.Date:
      return 'DATE';
    case Type.Timestamp:
      // By unit, zone or not: table timestamps are UTC instants, and TIMESTAMPTZ would round to microseconds.
      return (
        ['TIMESTAMP_S', 'TIMESTAMP_MS', 'TIMESTAMP', 'TIMESTAMP_NS'][
          (type as InstanceType<typeof arrow.Timestamp>).unit
        ] ?? 'TIMESTAMP'
      );
    case Type.Time:
      return (type as InstanceType<typeof arrow.Time>).unit === TimeUnit.NANOSECOND ? 'TIME_NS' : 'TIME';
    case Type.Duration:
      return 'INTERVAL';
    case Type.Decimal: {
      const t = type as InstanceType<typeof arrow.Decimal>;
      return t.precision > MAX_DECIMAL_PRECISION ? 'VARCHAR' : `DECIMAL(${t.precision}, ${t.scale})`;
    }
    case Type.Dictionary:
      return duckdbType((type as InstanceType<typeof arrow.Dictionary>).dictionary);
    case Type.List:
      return `${duckdbType(listChild(type).type)}[]`;
    case Type.FixedSizeList: {
      const t = type as InstanceType<typeof arrow.FixedSizeList>;
      return `${duckdbType(listChild(type).type)}[${t.listSize}]`;
    }
    case Type.Struct:
      return `STRUCT(${(type.children as Field[]).map((f) => `${quoteIdent(f.name)} ${duckdbType(f.type)}`).join(', ')})`;
    default:
      // The table schemas docs/api.md allows never reach here; a schema_ipc of another type is refused earlier.
      throw new Error(`no SQL type for Arrow ${String(type)}`);
  }
}

const listChild = (type: DataType): Field => (type.children as Field[])[0] as Field;

/**
 * The Arrow type of a DuckDB result column. Types Arrow JS or docs/api.md cannot carry as themselves
 * (INTERVAL, UUID, ENUM, MAP, UNION, BIT, TIME WITH TIME ZONE, BIGNUM, UHUGEINT, …) come back as their
 * DuckDB text; HUGEINT (what `sum` of integers returns) is a 38-digit decimal, or i64 when every value fits.
 */
export function arrowType(type: DuckDBType): DataType {
  switch (type.typeId) {
    case DuckDBTypeId.BOOLEAN:
      return new arrow.Bool();
    case DuckDBTypeId.TINYINT:
      return new arrow.Int8();
    case DuckDBTypeId.SMALLINT:
      return new arrow.Int16();
    case DuckDBTypeId.INTEGER:
      return new arrow.Int32();
    case DuckDBTypeId.BIGINT:
      return new arrow.Int64();
    case DuckDBTypeId.UTINYINT:
      return new arrow.Uint8();
    case DuckDBTypeId.USMALLINT:
      return new arrow.Uint16();
    case DuckDBTypeId.UINTEGER:
      return new arrow.Uint32();
    case DuckDBTypeId.UBIGINT:
      return new arrow.Uint64();
    case DuckDBTypeId.FLOAT:
      return new arrow.Float32();
    case DuckDBTypeId.DOUBLE:
      return new arrow.Float64();
    case DuckDBTypeId.DATE:
      return new arrow.DateDay();
    case DuckDBTypeId.TIMESTAMP_S:
      return new arrow.Timestamp(TimeUnit.SECOND);
    case DuckDBTypeId.TIMESTAMP_MS:
      return new arrow.Timestamp(TimeUnit.MILLISECOND);
    case DuckDBTypeId.TIMESTAMP:
      return new arrow.Timestamp(TimeUnit.MICROSECOND);
    case DuckDBTypeId.TIMESTAMP_NS:
      return new arrow.Timestamp(TimeUnit.NANOSECOND);
    case DuckDBTypeId.TIMESTAMP_TZ:
      return new arrow.Timestamp(TimeUnit.MICROSECOND, 'UTC');
    case DuckDBTypeId.TIME:
      return new arrow.TimeMicrosecond();
    case DuckDBTypeId.TIME_NS:
      return new arrow.TimeNanosecond();
    case DuckDBTypeId.BLOB:
      return new arrow.Binary();
    case DuckDBTypeId.HUGEINT:
      return new arrow.Decimal(0, 38, 128);
    case DuckDBTypeId.DECIMAL: {
      const t = type as DuckDBDecimalType;
      return new arrow.Decimal(t.scale, t.width, 128);
    }
    case DuckDBTypeId.SQLNULL:
      return new arrow.Null();
    case DuckDBTypeId.LIST:
      return new arrow.List(itemField((type as DuckDBListType).valueType));
    case DuckDBTypeId.ARRAY: {
      const t = type as DuckDBArrayType;
      return new arrow.FixedSizeList(t.length, itemField(t.valueType));
    }
    case DuckDBTypeId.STRUCT: {
      const t = type as DuckDBStructType;
      return new arrow.Struct(
        t.entryNames.map((name, i) => new arrow.Field(name, arrowType(t.entryTypes[i] as DuckDBType))),
      );
    }
    default:
      return new arrow.Utf8();
  }
}

const itemField = (type: DuckDBType) => new arrow.Field('item', arrowType(type), true);
