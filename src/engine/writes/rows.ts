import type { Data, Field, RecordBatch, Schema, Table } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { castData, nullData } from '../../arrow/cast.js';
import { dataFromJson, ValueError } from '../../arrow/from-json.js';
import { checkIpcStream, maxRowsFor } from '../../arrow/ipc-check.js';
import { minRowsBytes } from '../../arrow/row-size.js';
import { BadRequest } from '../../errors.js';
import { ROW_KEY } from '../tables/schema.js';

/** A rows body as it arrived: the bytes of JSON rows (`{data: [...]}`) or of an Arrow IPC stream. */
export type RowsBody = { kind: 'json' | 'arrow'; bytes: Uint8Array };

function rowError(err: unknown, rowBase = 0): never {
  if (err instanceof ValueError) {
    throw new BadRequest(`row ${rowBase + Math.max(0, err.index)}, column "${err.path}": ${err.message}`);
  }
  throw err;
}

/** The row keys of a query result, in result order. */
export function rowKeysOf(result: Table): BigInt64Array {
  const keys = new BigInt64Array(result.numRows);
  let at = 0;
  for (const chunk of result.getChild(ROW_KEY)?.data ?? []) {
    keys.set((chunk.values as BigInt64Array).subarray(0, chunk.length), at);
    at += chunk.length;
  }
  return keys;
}

/** One record batch of exactly `schema` from column data. */
export function batchOf(schema: Schema, length: number, columns: Data[]): RecordBatch {
  const struct = arrow.makeData({
    type: new arrow.Struct(schema.fields),
    length,
    nullCount: 0,
    children: columns,
  });
  return new arrow.RecordBatch(schema, struct);
}

/** A row's value of a column; a name the row lacks is missing even when objects inherit it (`constructor`). */
const ownValue = (row: Record<string, unknown>, name: string): unknown =>
  Object.hasOwn(row, name) ? row[name] : undefined;

/** JSON rows → one batch of the table's columns; the first bad row rejects them all (docs/api.md). */
export function batchFromJson(schema: Schema, rows: readonly unknown[]): RecordBatch {
  const names = new Set(schema.fields.map((f) => f.name));
  rows.forEach((row, i) => {
    if (row === null || typeof row !== 'object' || Array.isArray(row)) {
      throw new BadRequest(`row ${i} must be a JSON object keyed by column name`);
    }
    for (const key of Object.keys(row)) {
      if (!names.has(key)) throw new BadRequest(`row ${i}: unknown column "${key}"`);
    }
  });
  try {
    const columns = schema.fields.map((field: Field) =>
      dataFromJson(
        field,
        rows.map((row) => ownValue(row as Record<string, unknown>, field.name)),
      ),
    );
    return batchOf(schema, rows.length, columns);
  } catch (err) {
    return rowError(err);
  }
}

/**
 * Bytes the rows of a body may take once they are the table's columns. Casts widen values (an `i8` column into
 * `i64`: 8×) and left-out nullable columns are filled (a left-out 1,536-byte vector per row), so a small body
 * could claim gigabytes; at least 256 MiB, or 16 bytes per byte of body, is always allowed.
 */
const convertedBytesLimit = (bodyBytes: number): number => Math.max(256 * 1024 * 1024, 16 * bodyBytes);

/** Refuses rows that would take more than `convertedBytesLimit` as the table's columns, before any is made. */
export function checkConvertedSize(schema: Schema, rows: number, bodyBytes: number): void {
  // Each row also gets its 8-byte row key, which a body of no (or only Null-typed) columns does not pay for.
  const needed = minRowsBytes(schema.fields, rows) + 8 * rows;
  const limit = convertedBytesLimit(bodyBytes);
  if (needed > limit) {
    throw new BadRequest(
      `the body's ${rows} rows would take at least ${Math.ceil(needed)} bytes as the table's columns (left-out columns filled with nulls), over the ${limit}-byte limit for a body of ${bodyBytes} bytes; send fewer rows per request, or the left-out columns`,
      { code: 'body_too_complex' },
    );
  }
}

/** Rows ready to write, and the body itself when it already is exactly those rows as an IPC stream. */
export interface ParsedRows {
  batches: RecordBatch[];
  /** Set when the body's schema is the table's, field for field: the reply can echo it unchanged. */
  stream?: Uint8Array;
}

const sameSchema = (a: Schema, b: Schema): boolean =>
  a.fields.length === b.fields.length &&
  a.fields.every((f, i) => {
    const g = b.fields[i];
    return g !== undefined && f.name === g.name && f.nullable === g.nullable && String(f.type) === String(g.type);
  });

/** An Arrow IPC stream → batches of the table's columns, matched by name, cast only without loss. */
export function batchesFromArrow(schema: Schema, bytes: Uint8Array): ParsedRows {
  let batches: RecordBatch[];
  let bodySchema: Schema;
  // Arrow JS trusts every length in a stream; a hostile body must be refused before it decodes one.
  checkIpcStream(bytes, { maxRows: maxRowsFor(bytes) });
  try {
    const reader = arrow.RecordBatchReader.from(bytes);
    reader.open();
    bodySchema = reader.schema;
    batches = reader.readAll();
  } catch (err) {
    throw new BadRequest(`the body is not an Arrow IPC stream: ${(err as Error).message}`);
  }
  if (bodySchema === undefined) throw new BadRequest('the body is not an Arrow IPC stream: it holds no schema');
  const known = new Set(schema.fields.map((f) => f.name));
  for (const field of bodySchema.fields) {
    if (!known.has(field.name)) throw new BadRequest(`the body has unknown column "${field.name}"`);
  }
  const present = new Map(bodySchema.fields.map((f, i) => [f.name, i] as const));
  for (const field of schema.fields) {
    if (!present.has(field.name) && !field.nullable) {
      throw new BadRequest(`the body lacks column "${field.name}", which is not nullable`);
    }
  }
  checkConvertedSize(
    schema,
    batches.reduce((n, batch) => n + batch.numRows, 0),
    bytes.byteLength,
  );
  let rowBase = 0;
  // A stream of no rows (schema only, or empty batches) is an append of nothing, as `{"data": []}` is; Arrow JS
  // invents a batch without columns for a stream that has none.
  const withRows = batches.filter((batch) => batch.numRows > 0);
  if (withRows.length === 0) {
    return {
      batches: [
        batchOf(
          schema,
          0,
          schema.fields.map((field) => nullData(field.type, 0)),
        ),
      ],
    };
  }
  const converted = withRows.map((batch) => {
    try {
      const columns = schema.fields.map((field) => {
        const at = present.get(field.name);
        if (at === undefined) {
          return nullData(field.type, batch.numRows);
        }
        return castData(batch.data.children[at] as Data, field);
      });
      const out = batchOf(schema, batch.numRows, columns);
      rowBase += batch.numRows;
      return out;
    } catch (err) {
      return rowError(err, rowBase);
    }
  });
  return sameSchema(bodySchema, schema) ? { batches: converted, stream: bytes } : { batches: converted };
}
