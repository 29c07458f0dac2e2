import fc from 'fast-check';
import { beforeAll, describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { serveFile } from './support/server.js';
import { ARROW, readTable, tablesOf } from './support/tables.js';

/**
 * Generated row sets of every column type (fast-check, 60 runs each) against a server in this process: valid ones
 * come back as sent through JSON, Arrow and the bucket; one invalid value refuses the whole set. Slow: about
 * 16–25 s, a table created and written for every run.
 */

let tableNo = 0;

const { strata, api } = serveFile({}, { database: 'prop' });
const db = tablesOf(api, 'prop');

beforeAll(async () => {});

type Gen = fc.Arbitrary<unknown>;
interface ColumnKind {
  field: (name: string, nullable: boolean) => Record<string, unknown>;
  /** Values in their canonical JSON form: what the service answers for them. */
  valid: Gen;
  invalid: Gen;
}

const noNegZero = (x: number) => (Object.is(x, -0) ? 0 : x);
const canonicalFloat = (x: number): number | string =>
  Number.isNaN(x) ? 'NaN' : x === Infinity ? 'Infinity' : x === -Infinity ? '-Infinity' : noNegZero(x);
const canonicalBig = (v: bigint): number | string =>
  v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= -BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
const ints = (min: number, max: number): Pick<ColumnKind, 'valid' | 'invalid'> => ({
  valid: fc.integer({ min, max }),
  invalid: fc.constantFrom(max + 1, min - 1, 1.5, 'seven', true),
});
const scalar = (type: string, kind: Pick<ColumnKind, 'valid' | 'invalid'>): ColumnKind => ({
  field: (name, nullable) => ({ name, type, nullable }),
  ...kind,
});
const MS_MIN = Date.UTC(1, 0, 1);
const MS_MAX = Date.UTC(9999, 11, 31);

const KINDS: Record<string, ColumnKind> = {
  bool: scalar('bool', { valid: fc.boolean(), invalid: fc.constantFrom('true', 1, 'yes') }),
  i8: scalar('i8', ints(-128, 127)),
  i16: scalar('i16', ints(-32768, 32767)),
  i32: scalar('i32', ints(-(2 ** 31), 2 ** 31 - 1)),
  u8: scalar('u8', ints(0, 255)),
  u16: scalar('u16', ints(0, 65535)),
  u32: scalar('u32', ints(0, 2 ** 32 - 1)),
  i64: scalar('i64', {
    valid: fc.bigInt(-(2n ** 63n), 2n ** 63n - 1n).map(canonicalBig),
    invalid: fc.constantFrom('9223372036854775808', 2 ** 60, '1e3', 0.5),
  }),
  u64: scalar('u64', {
    valid: fc.bigInt(0n, 2n ** 64n - 1n).map(canonicalBig),
    invalid: fc.constantFrom('-1', '18446744073709551616', -1),
  }),
  f16: scalar('f16', {
    valid: fc.integer({ min: 0, max: 65535 }).map((bits) => canonicalFloat(arrow.util.uint16ToFloat64(bits))),
    invalid: fc.constantFrom('nan', 'one', [1]),
  }),
  f32: scalar('f32', { valid: fc.float().map(canonicalFloat), invalid: fc.constantFrom('inf', {}, false) }),
  f64: scalar('f64', { valid: fc.double().map(canonicalFloat), invalid: fc.constantFrom('x', [], true) }),
  utf8: scalar('utf8', {
    valid: fc.string({ unit: 'binary', maxLength: 30 }),
    invalid: fc.constantFrom(5, true, ['a']),
  }),
  large_utf8: scalar('large_utf8', {
    valid: fc.string({ unit: 'binary', maxLength: 30 }),
    invalid: fc.constantFrom(0, {}),
  }),
  binary: scalar('binary', {
    valid: fc.uint8Array({ maxLength: 24 }).map((b) => Buffer.from(b).toString('base64')),
    invalid: fc.constantFrom('***', 'abc', 12),
  }),
  large_binary: scalar('large_binary', {
    valid: fc.uint8Array({ maxLength: 24 }).map((b) => Buffer.from(b).toString('base64')),
    invalid: fc.constantFrom('a=b', 1),
  }),
  date32: scalar('date32', {
    valid: fc
      .integer({ min: MS_MIN / 86_400_000, max: MS_MAX / 86_400_000 })
      .map((d) => new Date(d * 86_400_000).toISOString().slice(0, 10)),
    invalid: fc.constantFrom('2023-02-29', '2024-1-1', 19000, 'today'),
  }),
  timestamp_ms: scalar('timestamp_ms', {
    valid: fc.integer({ min: MS_MIN, max: MS_MAX }).map((ms) => new Date(ms).toISOString()),
    invalid: fc.constantFrom('2024-01-01', '2024-01-01T00:00:00.0001Z', 'noon', 1.5),
  }),
  timestamp_us: scalar('timestamp_us', {
    valid: fc
      .tuple(fc.integer({ min: MS_MIN / 1000, max: MS_MAX / 1000 }), fc.integer({ min: 0, max: 999_999 }))
      .map(([s, us]) => `${new Date(s * 1000).toISOString().slice(0, 19)}.${String(us).padStart(6, '0')}Z`),
    invalid: fc.constantFrom('2024-01-01T00:00:00.0000001Z', '2024-13-01T00:00:00Z', false),
  }),
  vector3: {
    field: (name, nullable) => ({ name, type: 'vector', dim: 3, nullable }),
    valid: fc.array(fc.float({ noNaN: true, noDefaultInfinity: true }).map(noNegZero), { minLength: 3, maxLength: 3 }),
    invalid: fc.constantFrom([1, 2], [1, 2, 3, 4], [1, 'NaN', 2], 'vec'),
  },
  list_i32: {
    field: (name, nullable) => ({ name, type: 'list', item: 'i32', nullable }),
    valid: fc.array(fc.option(fc.integer({ min: -1000, max: 1000 }), { nil: null }), { maxLength: 4 }),
    invalid: fc.constantFrom('list', [1.5], [2 ** 40], {}),
  },
};

const kindNames = Object.keys(KINDS);

/** A table of 1–5 columns of random kinds, and rows of canonical values for it. */
const tableAndRows = fc
  .uniqueArray(fc.tuple(fc.constantFrom(...kindNames), fc.boolean()), {
    minLength: 1,
    maxLength: 5,
    selector: ([k]) => k,
  })
  .chain((columns) => {
    const named = columns.map(([kind, nullable], i) => ({
      name: `c${i}_${kind}`,
      kind: KINDS[kind] as ColumnKind,
      nullable,
    }));
    const row = fc.record(
      Object.fromEntries(
        named.map((c) => [c.name, c.nullable ? fc.option(c.kind.valid, { nil: null }) : c.kind.valid]),
      ),
    );
    return fc.tuple(fc.constant(named), fc.array(row, { minLength: 1, maxLength: 12 }));
  });

describe('rows round-trip unchanged (property)', () => {
  test('any valid row set comes back as sent, through JSON, through Arrow, and from the bucket', async () => {
    await fc.assert(
      fc.asyncProperty(tableAndRows, async ([columns, rows]) => {
        const name = `p${tableNo++}`;
        const schema = columns.map((c) => c.kind.field(c.name, c.nullable));
        expect((await db.create({ table_name: name, schema })).status).toBe(200);
        expect((await db.create({ table_name: `${name}_arrow`, schema })).status).toBe(200);

        const viaJson = await db.append(name, rows);
        expect(viaJson.status).toBe(200);
        expect(viaJson.json.data).toEqual(rows);

        const reply = await api.raw('POST', `/v1/append/prop?table=${name}_arrow`, { data: rows }, { accept: ARROW });
        const viaArrow = await db.appendArrow(`${name}_arrow`, new Uint8Array(await reply.arrayBuffer()));
        expect(viaArrow.json.data).toEqual(rows);

        expect(await readTable(strata, 'acme', 'prop', name)).toEqual(rows);
      }),
      { numRuns: 60 },
    );
  });

  test('any row set with one invalid value is refused whole, naming that row and column', async () => {
    await fc.assert(
      fc.asyncProperty(tableAndRows, fc.nat(), fc.nat(), async ([columns, rows], rowPick, colPick) => {
        const name = `q${tableNo++}`;
        const schema = columns.map((c) => c.kind.field(c.name, c.nullable));
        await db.create({ table_name: name, schema });
        await db.append(name, rows);
        const at = rowPick % rows.length;
        const column = columns[colPick % columns.length] as (typeof columns)[number];
        const bad = fc.sample(column.kind.invalid, { numRuns: 1, seed: rowPick })[0];
        const broken = rows.map((row, i) => (i === at ? { ...row, [column.name]: bad } : row));

        const res = await db.append(name, broken);

        expect(res.status).toBe(400);
        expect(res.json.error).toMatch(new RegExp(`^row ${at}, column "${column.name}(\\[\\])?"`));
        expect(await db.count(name)).toBe(rows.length);
      }),
      { numRuns: 60 },
    );
  });
});
