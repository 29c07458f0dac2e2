import { arrow } from '../../src/arrow/arrow.js';

/** Every scalar type spelling a JSON `schema` takes (docs/api.md), `string` (an alias of utf8) aside. */
export const SCALAR_SPELLINGS = [
  'bool',
  'i8',
  'i16',
  'i32',
  'i64',
  'u8',
  'u16',
  'u32',
  'u64',
  'f16',
  'f32',
  'f64',
  'utf8',
  'large_utf8',
  'binary',
  'large_binary',
  'date32',
  'timestamp_ms',
  'timestamp_us',
] as const;

/** A schema only `schema_ipc` can create: a struct, a list of floats and a fixed-size list of f64. */
export const NESTED_SCHEMA = new arrow.Schema([
  new arrow.Field('id', new arrow.Int64(), false),
  new arrow.Field(
    'address',
    new arrow.Struct([
      new arrow.Field('city', new arrow.Utf8(), true),
      new arrow.Field('zip', new arrow.Int32(), true),
    ]),
    true,
  ),
  new arrow.Field('scores', new arrow.List(new arrow.Field('item', new arrow.Float64(), true)), true),
  new arrow.Field('v64', new arrow.FixedSizeList(4, new arrow.Field('item', new arrow.Float64(), true)), true),
]);

/** A table with a column of every JSON type spelling (docs/api.md), a row using each to its limits, and a row of nulls. */
export const ALL_TYPES = [
  { name: 'id', type: 'i64', nullable: false },
  { name: 'b', type: 'bool' },
  { name: 'i8', type: 'i8' },
  { name: 'i16', type: 'i16' },
  { name: 'i32', type: 'i32' },
  { name: 'u8', type: 'u8' },
  { name: 'u16', type: 'u16' },
  { name: 'u32', type: 'u32' },
  { name: 'u64', type: 'u64' },
  { name: 'f16', type: 'f16' },
  { name: 'f32', type: 'f32' },
  { name: 'f64', type: 'f64' },
  { name: 's', type: 'utf8' },
  { name: 'ls', type: 'large_utf8' },
  { name: 'bin', type: 'binary' },
  { name: 'lbin', type: 'large_binary' },
  { name: 'd', type: 'date32' },
  { name: 'tms', type: 'timestamp_ms' },
  { name: 'tus', type: 'timestamp_us' },
  { name: 'v', type: 'vector', dim: 3 },
  { name: 'tags', type: 'list', item: 'utf8' },
];

export const FULL_ROW = {
  id: '9223372036854775807',
  b: true,
  i8: -128,
  i16: 32767,
  i32: -2147483648,
  u8: 255,
  u16: 65535,
  u32: 4294967295,
  u64: '18446744073709551615',
  f16: 1.5,
  f32: 0.25,
  f64: 'NaN',
  s: 'Café 🚀',
  ls: 'large',
  bin: 'AAECAwQ=',
  lbin: '',
  d: '2024-02-29',
  tms: '2024-01-02T03:04:05.678Z',
  tus: '1969-12-31T23:59:59.999999Z',
  v: [1, -2.5, 3],
  tags: ['a', '', 'c'],
};

export const NULL_ROW = Object.fromEntries(ALL_TYPES.map((c) => [c.name, c.name === 'id' ? -1 : null]));
