import { DuckDBInstance, type DuckDBType } from '@duckdb/node-api';
import { expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { columnRead, fieldSpecs } from '../src/cli/column-types.js';
import { schemaFromFields } from '../src/engine/tables/schema.js';

/**
 * Every column type DuckDB can give `strata load` (from Parquet, CSV, JSON, or as it computes) is read as a type
 * the service has a spelling for, and the service's own schema check takes that spelling. No server: the table of
 * spellings is the service's (`describeSchema`, `schemaFromFields`).
 */

const TYPES = [
  'BOOLEAN',
  'TINYINT',
  'SMALLINT',
  'INTEGER',
  'BIGINT',
  'HUGEINT',
  'UTINYINT',
  'USMALLINT',
  'UINTEGER',
  'UBIGINT',
  'UHUGEINT',
  'FLOAT',
  'DOUBLE',
  'DECIMAL(4,1)',
  'DECIMAL(9,2)',
  'DECIMAL(18,3)',
  'DECIMAL(38,10)',
  'VARCHAR',
  'JSON',
  'BLOB',
  'BIT',
  'UUID',
  'DATE',
  'TIME',
  'TIME WITH TIME ZONE',
  'TIMESTAMP',
  'TIMESTAMP_S',
  'TIMESTAMP_MS',
  'TIMESTAMP_NS',
  'TIMESTAMP WITH TIME ZONE',
  'INTERVAL',
  "ENUM('a', 'b')",
  'INTEGER[]',
  'VARCHAR[]',
  'DECIMAL(9,2)[]',
  'TIMESTAMP_NS[]',
  'INTEGER[3]',
  'INTEGER[][]',
  'STRUCT(a INTEGER, b VARCHAR)',
  'MAP(VARCHAR, INTEGER)',
  'UNION(n INTEGER, s VARCHAR)',
] as const;

test.each(TYPES)('DuckDB %s loads under a spelling the service takes', async (sqlType) => {
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  try {
    const probe = await connection.run(`SELECT NULL::${sqlType} AS c`);
    const read = columnRead('c', probe.columnTypes()[0] as DuckDBType);
    // The read runs in DuckDB and gives the type it says.
    await connection.run(`SELECT ${read.sql} FROM (SELECT NULL::${sqlType} AS c)`);
    const specs = fieldSpecs(new arrow.Schema([new arrow.Field('c', read.type, true)]));

    expect(() => schemaFromFields(specs)).not.toThrow();
    expect(specs[0]?.type).toMatch(/^(bool|[iu](8|16|32|64)|f(32|64)|utf8|binary|date32|timestamp_(ms|us)|list)$/);
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
});
