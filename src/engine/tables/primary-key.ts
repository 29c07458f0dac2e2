import type { DataType, Field, RecordBatch, Schema } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { intRange } from '../../arrow/from-json.js';
import { BadRequest, Conflict } from '../../errors.js';
import { FreshGone, type FreshRows } from '../fresh/rows.js';
import { chosenFor, INTEGERS, type ScalarIndex, TEXTS } from '../indexes/scalar.js';
import { integerLiteral, stringLiteral } from '../predicate/literals.js';
import type { RowReads } from '../rows/source.js';
import { describeField, ROW_KEY } from './schema.js';
import type { UnindexedRows } from './unindexed.js';

const { Type } = arrow;

/**
 * The types a primary key may have (docs/api.md, Primary keys): values compared exactly, whose literals Lance's
 * filters read back unchanged. Floats (NaN, -0), dates and times (time zones, units) are left out.
 */
const KEY_TYPES = [...INTEGERS, ...TEXTS, 'binary', 'large_binary'];

/**
 * The scalar index a primary key gets when none is declared on it: a BTREE, but a BITMAP for binary and large_utf8
 * keys (Lance's BTREE takes neither).
 */
export function keyIndexOf(field: Field): ScalarIndex {
  return { column: field.name, type: chosenFor(describeField(field).type, false) };
}

/**
 * A create_table body's `primary_key`, checked against the schema: the schema back with that column made
 * non-null (a key is never null), or a 400 naming the column.
 */
export function withPrimaryKey(schema: Schema, column: string, declaredNullable: boolean | undefined): Schema {
  const field = schema.fields.find((f) => f.name === column);
  if (field === undefined) throw new BadRequest(`primary_key: column "${column}" is not in the schema`);
  const { type } = describeField(field);
  if (!KEY_TYPES.includes(type)) {
    throw new BadRequest(
      `primary_key: column "${column}" is ${type}; a primary key is an integer, string or binary column`,
    );
  }
  if (declaredNullable === true) {
    throw new BadRequest(`primary_key: column "${column}" is declared nullable; a primary key is never null`);
  }
  return new arrow.Schema(
    schema.fields.map((f) => (f === field ? new arrow.Field(f.name, f.type, false, f.metadata) : f)),
    schema.metadata,
  );
}

/** One key value as the map keys of a lookup spell it: a number's decimal digits, a string itself, bytes as hex. */
type KeyText = string;

/** A key value as a map key and as a SQL literal of the column's type. */
interface KeyValue {
  text: KeyText;
  literal: string;
  /** How a message shows it: JSON of the value (bytes as base64). */
  shown: string;
}

/** The primary key column of a table, from its catalog declarations (`primary_key` beside the indexes). */
export function primaryKeyOf(declarations: string, schema: Schema): Field | undefined {
  const column = (JSON.parse(declarations) as { primary_key?: string }).primary_key;
  return column === undefined ? undefined : schema.fields.find((f) => f.name === column);
}

/** Reads one key value of a column: numbers and bigints for integers, strings, bytes. */
function keyValueOf(type: DataType, value: unknown): KeyValue {
  switch (type.typeId) {
    case Type.Int: {
      const v = BigInt(value as number | bigint);
      const text = v.toString();
      return { text, literal: integerLiteral(v), shown: text };
    }
    case Type.Utf8:
    case Type.LargeUtf8: {
      const s = value as string;
      return { text: s, literal: stringLiteral(s), shown: JSON.stringify(s) };
    }
    default: {
      const bytes = Buffer.from(value as Uint8Array);
      const hex = bytes.toString('hex');
      return { text: hex, literal: `X'${hex}'`, shown: JSON.stringify(bytes.toString('base64')) };
    }
  }
}

/** The key values of a body's rows, in row order. */
export interface BodyKeys {
  field: Field;
  values: KeyValue[];
}

/**
 * The primary key values of a write's rows, in order; a null key is a 400 naming the row. Two rows with one key
 * are refused as `duplicate` says: a 400 for an upsert (the body contradicts itself), a 409 for an append.
 */
export function keysOfBody(
  field: Field,
  batches: readonly RecordBatch[],
  duplicate: (message: string) => Error,
): BodyKeys {
  const values: KeyValue[] = [];
  for (const batch of batches) {
    const column = batch.getChild(field.name);
    for (let i = 0; i < batch.numRows; i++) {
      const value = column?.get(i);
      if (value === null || value === undefined) {
        throw new BadRequest(`row ${values.length}, column "${field.name}": the primary key must not be null`);
      }
      values.push(keyValueOf(field.type, value));
    }
  }
  const first = new Map<KeyText, number>();
  values.forEach((v, row) => {
    const earlier = first.get(v.text);
    if (earlier !== undefined) {
      throw duplicate(`rows ${earlier} and ${row} both have ${field.name} = ${v.shown}; a primary key names one row`);
    }
    first.set(v.text, row);
  });
  return { field, values };
}

/** Literals of the canonical predicate: a decimal integer (a negative one parenthesized), a string without backslashes. */
const INTEGER_LITERAL = /\(-\d+\)|\d+/y;
const STRING_LITERAL = /'(?:[^'\\]|'')*'/y;
/**
 * The one integer literal Lance refuses although its value fits an i64: it reads the digits before the minus, one
 * past the largest i64, as a float (a 400 from the predicate's read, which a key lookup must not turn into a match).
 */
const REFUSED_INTEGER = '(-9223372036854775808)';

/**
 * The key values a predicate (as `checkPredicate` writes it) names when it is exactly `key = v` or `key IN (v, …)`
 * over literals of the key's own type; undefined for every other predicate. Such a predicate matches exactly the
 * rows holding those values, which a keyed write then finds as it finds its own keys (`rowsHoldingKeys`), without
 * scanning the rows no index covers.
 */
export function keysNamedBy(predicate: string, field: Field): BodyKeys | undefined {
  const integer = field.type.typeId === Type.Int;
  if (!integer && field.type.typeId !== Type.Utf8 && field.type.typeId !== Type.LargeUtf8) return undefined;
  const column = `(\`${field.name.replaceAll('`', '``')}\``;
  if (!predicate.startsWith(column)) return undefined;
  const rest = predicate.slice(column.length);
  const list = rest.startsWith(' IN (');
  if (!list && !rest.startsWith(' = ')) return undefined;
  const literal = integer ? INTEGER_LITERAL : STRING_LITERAL;
  const [low, high] = integer ? intRange(field.type) : [0n, 0n];
  const values = new Map<KeyText, KeyValue>();
  let at = list ? 5 : 3;
  for (;;) {
    literal.lastIndex = at;
    const found = literal.exec(rest);
    if (found === null) return undefined;
    const text = found[0];
    let value: bigint | string;
    if (integer) {
      if (text === REFUSED_INTEGER) return undefined;
      value = BigInt(text.replace(/[()]/g, ''));
      if (value < low || value > high) return undefined;
    } else value = text.slice(1, -1).replaceAll("''", "'");
    const key = keyValueOf(field.type, value);
    values.set(key.text, key);
    at += text.length;
    if (list && rest.startsWith(', ', at)) {
      at += 2;
      continue;
    }
    return rest.slice(at) === (list ? '))' : ')') ? { field, values: [...values.values()] } : undefined;
  }
}

/**
 * Longest IN list one lookup sends. In process at 1M rows, LanceDB found 10,000 integer keys through a BTREE in
 * 25 ms as one list and 35–44 ms as ten of 1,000.
 */
const LOOKUP_CHUNK = 10_000;

/**
 * Integer keys that span at most this many values per key are read as one range and picked out here: a load's
 * keys usually run in order, and LanceDB read a range of 70,000 through a BTREE in 7 ms where a list of 10,000 of
 * them took 25.
 */
const DENSE_SPAN = 8;

/** The predicates that read every stored row holding one of `keys`' values (and, for a range, others beside). */
function lookups(keys: BodyKeys): string[] {
  const name = `\`${keys.field.name}\``;
  if (keys.field.type.typeId === Type.Int && keys.values.length > 1) {
    const ints = keys.values.map((v) => BigInt(v.text));
    let [low, high] = [ints[0] as bigint, ints[0] as bigint];
    for (const v of ints) {
      if (v < low) low = v;
      if (v > high) high = v;
    }
    if (high - low < BigInt(DENSE_SPAN * keys.values.length)) {
      const literal = (v: bigint) => keyValueOf(keys.field.type, v).literal;
      return [`${name} >= ${literal(low)} AND ${name} <= ${literal(high)}`];
    }
  }
  const out: string[] = [];
  for (let at = 0; at < keys.values.length; at += LOOKUP_CHUNK) {
    const chunk = keys.values.slice(at, at + LOOKUP_CHUNK);
    out.push(`${name} IN (${chunk.map((v) => v.literal).join(', ')})`);
  }
  return out;
}

/**
 * The row keys of the stored rows holding each of `keys`' values, by value; values no row holds are absent. Where
 * this node holds the rows it wrote since the key's index last covered every row (`FreshRows`), the index is read
 * alone and those beside it: Lance would otherwise scan every fragment the index does not cover for them.
 */
export async function rowsHoldingKeys(
  table: { rows: RowReads; fresh: FreshRows; unindexed: UnindexedRows },
  keys: BodyKeys,
): Promise<Map<KeyText, bigint>> {
  const read = table.unindexed.keyIndexBuilt ? table.fresh.begin('key') : undefined;
  if (read === undefined) return readRowsHolding(table.rows, keys, false);
  try {
    const values = keys.values.map((v) => v.text);
    const holding = table.fresh.holdingKeys(read, values).catch((err: unknown) => {
      // Let go of meanwhile, or an earlier commit's rows could not be counted in (a text only Lance tokenizes,
      // which failed): Lance's own way until the next fold, as a search would.
      if (!(err instanceof FreshGone)) table.fresh.unsettled();
      return undefined;
    });
    const [found, held] = await Promise.all([readRowsHolding(table.rows, keys, true), holding]);
    if (held === undefined) return await readRowsHolding(table.rows, keys, false);
    // A held row is the latest to hold its value: one the index has too is the same row, or one it replaced.
    for (const [value, key] of held) found.set(value, key);
    return found;
  } finally {
    table.fresh.end(read);
  }
}

/** The stored rows holding `keys`' values, by value: every row, or only those the indexes cover. */
async function readRowsHolding(rows: RowReads, keys: BodyKeys, indexedOnly: boolean): Promise<Map<KeyText, bigint>> {
  const { field } = keys;
  const wanted = new Set(keys.values.map((v) => v.text));
  const found = new Map<KeyText, bigint>();
  for (const where of lookups(keys)) {
    const read = await rows.rowsWhere(where, [ROW_KEY, field.name], { indexedOnly });
    const column = read.getChild(field.name);
    const rowKeys = read.getChild(ROW_KEY);
    for (let i = 0; i < read.numRows; i++) {
      const text = keyValueOf(field.type, column?.get(i)).text;
      if (wanted.has(text)) found.set(text, rowKeys?.get(i) as bigint);
    }
  }
  return found;
}

/**
 * Refuses a write whose rows would give a key a second row (409 `duplicate_key`, naming the first such row):
 * `found` are the stored rows holding the body's keys, `replacing` the row keys the write itself replaces.
 */
export function assertKeysFree(
  keys: BodyKeys,
  found: ReadonlyMap<KeyText, bigint>,
  replacing: ReadonlySet<bigint> = new Set(),
): void {
  keys.values.forEach((v, row) => {
    const holder = found.get(v.text);
    if (holder !== undefined && !replacing.has(holder)) {
      throw duplicateKey(
        `row ${row} has ${keys.field.name} = ${v.shown}, which another row of the table holds already (send it with /v1/upsert to replace that row)`,
      );
    }
  });
}

/** The 409 a write gets for a key the table holds already, or holds twice in the write's own rows. */
export const duplicateKey = (message: string): Conflict =>
  new Conflict(`${message}; nothing was written`, { code: 'duplicate_key' });
