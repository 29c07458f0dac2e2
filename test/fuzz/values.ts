import type { DataType, Field } from 'apache-arrow';
import fc from 'fast-check';
import { arrow } from '../../src/arrow/arrow.js';
import { dateStrings, edgeNumbers, hostileValue, numericStrings, timestampStrings } from './hostile.js';

const { Type } = arrow;

const DAY_MS = 86_400_000;
const MS_MIN = Date.UTC(1, 0, 1);
const MS_MAX = Date.UTC(9999, 11, 31);

const canonicalFloat = (x: number): number | string =>
  Number.isNaN(x) ? 'NaN' : x === Infinity ? 'Infinity' : x === -Infinity ? '-Infinity' : x;
const canonicalBig = (v: bigint): number | string =>
  v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= -BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
const iso = (ms: number) => new Date(ms).toISOString();

function intBounds(type: DataType): [bigint, bigint] {
  const t = type as InstanceType<typeof arrow.Int>;
  const bits = BigInt(t.bitWidth);
  return t.isSigned ? [-(2n ** (bits - 1n)), 2n ** (bits - 1n) - 1n] : [0n, 2n ** bits - 1n];
}

/** JSON values a column of `type` accepts (API.md §5), nulls included where the field allows them. */
export function validValue(field: Field): fc.Arbitrary<unknown> {
  const value = validOfType(field.type);
  return field.nullable ? fc.option(value, { freq: 8, nil: null }) : value;
}

function validOfType(type: DataType): fc.Arbitrary<unknown> {
  switch (type.typeId) {
    case Type.Bool:
      return fc.boolean();
    case Type.Int: {
      const [lo, hi] = intBounds(type);
      return fc.oneof(fc.bigInt(lo, hi), fc.constantFrom(lo, hi, 0n)).map(canonicalBig);
    }
    case Type.Float: {
      const half = (type as InstanceType<typeof arrow.Float>).precision === arrow.Precision.HALF;
      return half
        ? fc.double({ min: -65504, max: 65504, noNaN: true })
        : fc.oneof(fc.double().map(canonicalFloat), fc.integer());
    }
    case Type.Utf8:
    case Type.LargeUtf8:
      return fc.oneof(
        fc.constantFrom('apple banana', 'Café NAÏVE e-mail', 'Über foo_bar U.S.A.', 'cherry', ''),
        fc.string({ unit: 'grapheme', maxLength: 30 }),
        fc
          .array(fc.constantFrom('apple', 'banana', 'cherry', 'fig', 'grape', 'über'), { maxLength: 6 })
          .map((words) => words.join(' ')),
      );
    case Type.Binary:
    case Type.LargeBinary:
      return fc.uint8Array({ maxLength: 24 }).map((bytes) => Buffer.from(bytes).toString('base64'));
    case Type.Date:
      return fc
        .integer({ min: Math.ceil(MS_MIN / DAY_MS), max: Math.floor(MS_MAX / DAY_MS) })
        .map((days) => iso(days * DAY_MS).slice(0, 10));
    case Type.Timestamp:
      return fc.oneof(fc.integer({ min: MS_MIN, max: MS_MAX }).map(iso), fc.integer({ min: -(2 ** 40), max: 2 ** 40 }));
    case Type.FixedSizeList: {
      const list = type as InstanceType<typeof arrow.FixedSizeList>;
      const finite = fc.double({ min: -1e6, max: 1e6, noNaN: true });
      return fc.array(finite, { minLength: list.listSize, maxLength: list.listSize });
    }
    case Type.List: {
      const child = (type as InstanceType<typeof arrow.List>).children[0] as Field;
      return fc.array(validValue(child), { maxLength: 4 });
    }
    case Type.Struct: {
      const children = (type as InstanceType<typeof arrow.Struct>).children;
      return fc.record(Object.fromEntries(children.map((child) => [child.name, validValue(child)])));
    }
    default:
      return fc.constant(null);
  }
}

/** Values a column of `type` must refuse (or at least survive): wrong kinds and values past its edges. */
export function invalidValue(field: Field): fc.Arbitrary<unknown> {
  const type = field.type as DataType;
  const specific: fc.Arbitrary<unknown> = (() => {
    switch (type.typeId) {
      case Type.Bool:
        return fc.constantFrom('true', 1, 0, 'yes', 'TRUE');
      case Type.Int: {
        const [lo, hi] = intBounds(type);
        return fc.oneof(fc.constantFrom(String(hi + 1n), String(lo - 1n), 1.5, '1e3', 'seven'), numericStrings);
      }
      case Type.Float:
        return fc.oneof(fc.constantFrom('nan', 'inf', '1,5', '0x1p3', ''), numericStrings);
      case Type.Utf8:
      case Type.LargeUtf8:
        return fc.constantFrom(5, true, ['a'], { a: 1 }, '\uD800', 'a\uDFFFb');
      case Type.Binary:
      case Type.LargeBinary:
        return fc.constantFrom('not base64!', '====', 'AAA', 'AAECAw', '\u00ff', 'AA==AA==', 'A'.repeat(100_001));
      case Type.Date:
        return dateStrings;
      case Type.Timestamp:
        return fc.oneof(timestampStrings, fc.constantFrom('9223372036854775807', '-9223372036854775809', 1.5));
      case Type.FixedSizeList: {
        const size = (type as InstanceType<typeof arrow.FixedSizeList>).listSize;
        return fc.oneof(
          fc.array(fc.double(), { minLength: size, maxLength: size }),
          fc.array(fc.double({ noNaN: true }), { minLength: size + 1, maxLength: size + 2 }),
          fc.array(fc.constantFrom(1e39, -1e39, 3.5e38, Number.MAX_VALUE), { minLength: size, maxLength: size }),
          fc.constantFrom([], [null], ['1'], 'NaN', [[1]]),
        );
      }
      case Type.List:
        return fc.constantFrom('abc', [[[]]], { 0: 1 }, [{}]);
      case Type.Struct:
        return fc.constantFrom([], 'x', { nope: 1 }, { a: { b: [1] } });
      default:
        return edgeNumbers;
    }
  })();
  return fc.oneof({ weight: 3, arbitrary: specific }, { weight: 2, arbitrary: hostileValue });
}
