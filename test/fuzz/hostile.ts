import fc from 'fast-check';

/**
 * JSON text placed verbatim where a value goes: numbers JSON.stringify cannot write (`1e400`, 30-digit
 * integers, `-0.0`) and keys it would turn into something else (`__proto__`).
 */
export class RawJson {
  constructor(readonly text: string) {}
}

/** JSON text of a value that may hold `RawJson` pieces anywhere. */
export function jsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : jsonText(v))).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const parts = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${JSON.stringify(k)}:${jsonText(v)}`);
    return `{${parts.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** Weighted picks read more easily as `[weight, arbitrary]` pairs. */
export const weighted = <T>(...pairs: [number, fc.Arbitrary<T>][]): fc.Arbitrary<T> =>
  fc.oneof(...pairs.map(([weight, arbitrary]) => ({ weight, arbitrary })));

const I64_MIN = -(2n ** 63n);
const _I64_MAX = 2n ** 63n - 1n;

/** Numbers at the edges of every width the service converts to, and the JSON number edges. */
export const edgeNumbers = fc.constantFrom(
  0,
  -0,
  1,
  -1,
  0.5,
  -0.5,
  1.5,
  5e-324,
  127,
  128,
  -129,
  255,
  256,
  32768,
  65536,
  2 ** 31 - 1,
  2 ** 31,
  -(2 ** 31) - 1,
  2 ** 32,
  2 ** 53 - 1,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 53) - 2,
  2 ** 63,
  -(2 ** 63),
  2 ** 64,
  1e308,
  -1e308,
  Number.MAX_VALUE,
  3.4028235e38,
  3.5e38,
  65504,
  65520,
  4096,
  4097,
  10_000,
  10_001,
  100_000_000,
);

/** Number literals JSON.stringify cannot produce. */
export const rawNumbers = fc
  .constantFrom(
    '1e400',
    '-1e400',
    '123456789012345678901234567890',
    '-9223372036854775809',
    '9223372036854775808',
    '18446744073709551616',
    '1.0',
    '10000.0',
    '1E2',
    '-0.0',
    '0.0000000000000000000000001',
    `1${'0'.repeat(400)}`,
    '1e-400',
    '4.9e-325',
  )
  .map((text) => new RawJson(text));

/** Decimal strings where an i64/u64 (or any number) may be spelled as text. */
export const numericStrings = fc.oneof(
  fc.constantFrom(
    '9223372036854775807',
    '-9223372036854775808',
    '9223372036854775808',
    '-9223372036854775809',
    '18446744073709551615',
    '18446744073709551616',
    '-1',
    '-0',
    '0x10',
    '1e3',
    '1.5',
    ' 5',
    '5 ',
    '+5',
    '1_000',
    '０',
    '٣',
    'NaN',
    'Infinity',
    '-Infinity',
    'inf',
    '',
    '00000000000000000000000000001',
  ),
  fc.bigInt(I64_MIN - 10n, 2n ** 64n + 10n).map(String),
);

const LONE_SURROGATE = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
const CONTROL = fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c));

export const specialStrings = fc.constantFrom(
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\t\n\r',
  '\u001b[31m',
  '\uD800',
  '\uDFFF',
  'a\uD83D',
  '\uDE00b',
  '\uFEFF',
  '\u202Eabc',
  '\u200B',
  'İ',
  'ß',
  'ﬀ',
  'e\u0301',
  'Ω',
  '🚀',
  '👩‍👩‍👧‍👦',
  '`',
  'a`b',
  '``',
  '"',
  'a"b',
  "'",
  "a'b",
  "''",
  '\\',
  '[x]',
  '{}',
  '$\u{7b}x}',
  '%s%n',
  '%00',
  '%2e%2e',
  '..',
  '../..',
  '/',
  'a/b',
  'a b',
  'NaN',
  'null',
  'true',
  '-',
  '--',
  '/*',
  ';',
  "'; DROP TABLE docs; --",
  'constructor',
  '__proto__',
  'toString',
  '_rowkey',
  '_score',
  '_distance',
  '_bm25',
  'rowid',
  '_rowid',
  'a'.repeat(128),
  'a'.repeat(129),
  'Ä'.repeat(128),
);

/** Strings of every kind: printable unicode, any code point, controls and lone surrogates mixed in. */
export const anyString: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: specialStrings },
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  {
    weight: 2,
    arbitrary: fc.string({
      unit: fc.oneof(fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }), LONE_SURROGATE, CONTROL),
      maxLength: 16,
    }),
  },
  { weight: 1, arbitrary: fc.constantFrom(1_000, 65_536, 1_000_000).map((n) => 'x'.repeat(n)) },
);

/** Names of tables, databases and columns that break the name rules in every way they can. */
export const hostileNames = fc.oneof(
  specialStrings,
  fc.constantFrom('_hidden', '-dash', 'UPPER', 'MiXeD', 'a.b', 'a:b', 'a@b', 'a%20b', 'x'.repeat(1000)),
  // Valid names at and around the router's own limit on a path parameter (100 by default) and the rule's 128.
  fc.constantFrom('n'.repeat(100), 'n'.repeat(101), 'n'.repeat(128)),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }),
);

/** Any JSON value, deep or wide ones included. */
export const anyJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { weight: 3, arbitrary: edgeNumbers },
    { weight: 1, arbitrary: rawNumbers },
    { weight: 3, arbitrary: anyString },
    { weight: 1, arbitrary: fc.constantFrom(null, true, false) },
    { weight: 1, arbitrary: fc.array(tie('value'), { maxLength: 4 }) },
    { weight: 1, arbitrary: fc.dictionary(anyString, tie('value'), { maxKeys: 3 }) },
  ),
})).value;

/** Values that no field of a plausible request expects. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: edgeNumbers },
  { weight: 2, arbitrary: rawNumbers },
  { weight: 2, arbitrary: numericStrings },
  { weight: 4, arbitrary: anyString },
  { weight: 2, arbitrary: fc.constantFrom(null, true, false, [], {}, [null], [[]], { '': 1 }) },
  { weight: 2, arbitrary: anyJson },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      new RawJson('{"__proto__":{"polluted":1}}'),
      new RawJson('{"constructor":{"prototype":{"polluted":1}}}'),
      new RawJson(`${'['.repeat(5000)}${']'.repeat(5000)}`),
      new RawJson(`[${'1,'.repeat(100_000)}1]`),
    ),
  },
);

/** Dates and timestamps at and past the ends of what each unit holds. */
export const dateStrings = fc.constantFrom(
  '2024-02-29',
  '2023-02-29',
  '2024-13-01',
  '2024-00-10',
  '0000-01-01',
  '0001-01-01',
  '9999-12-31',
  '10000-01-01',
  '+10000-01-01',
  '-0001-01-01',
  '-5877641-06-25',
  '-5877641-06-23',
  '5881580-07-11',
  '5881580-07-12',
  '1970-01-01',
  '2024-1-1',
  '2024-01-01T00:00:00Z',
  '20240101',
  'today',
);

export const timestampStrings = fc.constantFrom(
  '1970-01-01T00:00:00Z',
  '1969-12-31T23:59:59.999999Z',
  '2024-01-02T03:04:05.678Z',
  '2024-01-02T03:04:05.123456789Z',
  '2024-01-02T03:04:05+14:00',
  '2024-01-02T03:04:05-23:59',
  '2024-01-02T03:04:05+24:00',
  '2016-12-31T23:59:60Z',
  '2024-01-02 03:04:05',
  '2024-01-02T03:04:05',
  '0001-01-01T00:00:00Z',
  '9999-12-31T23:59:59.999999Z',
  '+275760-09-13T00:00:00Z',
  '-271821-04-20T00:00:00Z',
  '294247-01-10T04:00:54.775807Z',
  '-290308-12-21T19:59:05.224192Z',
  '+292278994-08-17T07:12:55.807Z',
  '2024-02-30T00:00:00Z',
  't',
);
