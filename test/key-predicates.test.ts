import type { DataType } from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { canonicalPredicate } from '../src/engine/predicate/parser.js';
import { keysNamedBy } from '../src/engine/tables/primary-key.js';

/**
 * `keysNamedBy`: the key values a predicate names when it is exactly `key = v` or `key IN (…)`, which a keyed write
 * then finds through the key's index (upsert.test.ts has the writes themselves).
 */

const INTEGER_TYPES: [DataType, bigint, bigint][] = [
  [new arrow.Int8(), -128n, 127n],
  [new arrow.Uint8(), 0n, 255n],
  [new arrow.Int32(), -(2n ** 31n), 2n ** 31n - 1n],
  [new arrow.Int64(), -(2n ** 63n), 2n ** 63n - 1n],
  [new arrow.Uint64(), 0n, 2n ** 64n - 1n],
];

/** Fields of the table the predicates are read over, the key among them. */
const fieldsWith = (type: DataType) => [new arrow.Field('id', type, false), new arrow.Field('note', new arrow.Utf8())];

const named = (predicate: string, type: DataType) => {
  const fields = fieldsWith(type);
  return keysNamedBy(canonicalPredicate(predicate, fields), fields[0] as (typeof fields)[0])?.values.map((v) => v.text);
};

const column = fc.constantFrom('id', 'ID', '`id`', '(id)');
/** An equality or an IN list over the values, as a client may write it. */
const spelled = (name: string, literals: string[], form: number): string => {
  if (literals.length === 1 && form % 3 === 0) return `${name} = ${literals[0]}`;
  if (literals.length === 1 && form % 3 === 1) return `(${name} == ${literals[0]})`;
  return `${name}  IN (${literals.join(' ,')})`;
};

describe('keysNamedBy', () => {
  test('names the values of an equality or IN list of integers in the key type’s range (property)', () => {
    const typed = fc.constantFrom(...INTEGER_TYPES).chain(([type, low, high]) =>
      fc.record({
        type: fc.constant(type),
        values: fc.array(fc.bigInt({ min: low === -(2n ** 63n) ? low + 1n : low, max: high }), {
          minLength: 1,
          maxLength: 6,
        }),
      }),
    );
    fc.assert(
      fc.property(typed, column, fc.nat(), ({ type, values }, name, form) => {
        const predicate = spelled(name, values.map(String), form);
        expect(named(predicate, type)).toEqual([...new Set(values.map(String))]);
      }),
    );
  });

  test('names string values exactly, doubled quotes read back as one (property)', () => {
    const text = fc.string({ maxLength: 12 }).filter((s) => !s.includes('\\'));
    fc.assert(
      fc.property(fc.array(text, { minLength: 1, maxLength: 5 }), column, fc.nat(), (values, name, form) => {
        const literals = values.map((s) => `'${s.replaceAll("'", "''")}'`);
        expect(named(spelled(name, literals, form), new arrow.Utf8())).toEqual([...new Set(values)]);
      }),
    );
  });

  test.each([
    ['id = 5 OR id = 6', new arrow.Int64()],
    ['id > 5', new arrow.Int64()],
    ['id != 5', new arrow.Int64()],
    ['NOT id IN (5)', new arrow.Int64()],
    ['id NOT IN (5)', new arrow.Int64()],
    ['5 = id', new arrow.Int64()],
    ['id = 5 AND note = 5', new arrow.Int64()],
    ['note = 5', new arrow.Int64()],
    ['id = 5.0', new arrow.Int64()],
    ['id = 1e3', new arrow.Int64()],
    ['id = -(5)', new arrow.Int64()],
    ['id = 1 + 1', new arrow.Int64()],
    ["id = '5'", new arrow.Int64()],
    ['id = 128', new arrow.Int8()],
    ['id IN (1, 300)', new arrow.Uint8()],
    ['id = -1', new arrow.Uint64()],
    ['id = 18446744073709551616', new arrow.Uint64()],
    ['id IN (1, id)', new arrow.Int64()],
    ['id = 5', new arrow.Float64()],
    ['id = 5', new arrow.Binary()],
    ["id = 'a\\b'", new arrow.Utf8()],
    ['id = 5', new arrow.Utf8()],
    ["id = 'a' || 'b'", new arrow.Utf8()],
    ["id LIKE 'a'", new arrow.Utf8()],
  ])('names nothing for %s (a %s key)', (predicate, type) => {
    expect(named(predicate, type)).toBeUndefined();
  });

  test('reads a negative literal and the largest i64, and leaves the smallest to Lance, which refuses it', () => {
    const i64 = new arrow.Int64();
    expect(named('id = -7', i64)).toEqual(['-7']);
    expect(named('id IN (-9223372036854775807, 9223372036854775807)', i64)).toEqual([
      '-9223372036854775807',
      '9223372036854775807',
    ]);
    expect(named('id = -9223372036854775808', i64)).toBeUndefined();
    expect(named('id IN (1, -9223372036854775808)', i64)).toBeUndefined();
  });
});
