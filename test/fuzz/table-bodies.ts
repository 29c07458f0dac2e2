/**
 * JSON bodies of the table and search routes: each a request a well-behaved client would send, with the
 * values at or past each field's edges that `mutate` tries one field at a time.
 */
import type { DataType, Field } from 'apache-arrow';
import fc from 'fast-check';
import { arrow } from '../../src/arrow/arrow.js';
import { SCALAR_SPELLINGS } from '../support/types.js';
import { schemaIpcValue } from './arrow-bodies.js';
import { type Mutated, mutate } from './envelope.js';
import {
  anyString,
  dateStrings,
  hostileNames,
  hostileValue,
  numericStrings,
  timestampStrings,
  weighted,
} from './hostile.js';
import { plainPredicates, predicates } from './sql-grammar.js';
import { validValue } from './values.js';
import type { World, WorldTable } from './world.js';

const columnNames = (table: WorldTable) => table.schema.fields.map((f) => f.name);

/** Table names other than the one a body was made for: the other tables, the other account's, junk. */
function otherTableNames(world: World): fc.Arbitrary<string> {
  return fc.oneof(
    fc.constantFrom(...world.tables.map((t) => t.name), ...world.foreignTables, ...world.scratchTables),
    fc.constantFrom('nope', 'DOCS', 'Docs', 'docs ', '_docs'),
    hostileNames,
  );
}

const WORDS = ['apple', 'banana', 'cherry', 'Über', 'cafe', 'CAFÉ', 'e-mail', 'u.s.a', 'fig', 'grape'];
const textQueries = fc.array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 4 }).map((w) => w.join(' '));

const oddTextQueries = fc.oneof(
  fc.constantFrom('', ' ', '!!!', '"apple banana"', 'title:apple', 'apple*', 'a~2', '+apple -fig', 'AND OR NOT', '('),
  fc.constantFrom(10_000, 100_000).map((n) => 'apple '.repeat(n)),
  anyString,
);

const oddProjections = fc.oneof(
  fc.constantFrom<string[]>(['_score'], ['_distance', '_bm25'], ['nope'], [], ['id', 'id'], ['ID'], ['_rowkey']),
  fc.array(anyString, { maxLength: 3 }),
);

const limits = fc.integer({ min: 0, max: 20 });
const oddLimits = fc.constantFrom(-1, 1.5, 2 ** 31, 2 ** 53, 1e308);

export function searchBodies(world: World): fc.Arbitrary<Mutated> {
  return fc.constantFrom(...world.tables).chain((table) => {
    const fields = columnNames(table);
    const dim = table.vectors[0]?.dim ?? 3;
    const legs: Record<string, fc.Arbitrary<unknown>> = {};
    if (table.fts.length > 0) {
      legs.text_field = fc.constantFrom(...table.fts);
      legs.text_query = textQueries;
    }
    if (table.vectors.length > 0) {
      legs.vector_field = fc.constantFrom(...table.vectors.map((v) => v.column));
      legs.vector_query = fc.array(fc.double({ min: -10, max: 10, noNaN: true }), { minLength: dim, maxLength: dim });
    }
    const base = fc.record(
      {
        table_name: fc.constant(table.name),
        ...legs,
        k: fc.integer({ min: 0, max: 20 }),
        projection: fc.subarray(fields),
        operator: fc.constantFrom('or', 'and', 'AND', 'Or'),
        filter: plainPredicates(table),
        rrf_k: fc.constantFrom(1, 60, 10.5),
        offset: fc.integer({ min: 0, max: 10 }),
        text_weight: fc.constantFrom(0, 0.5, 1, 2),
        vector_weight: fc.constantFrom(0, 0.5, 1, 2),
        window: fc.constantFrom(100, 1000),
      },
      // The first leg the table has is always sent; the other, when the table has it, sometimes.
      { requiredKeys: ['table_name', 'k', ...Object.keys(legs).slice(0, 2)] as never[] },
    );
    return mutate(base, {
      table_name: otherTableNames(world),
      text_field: fc.constantFrom(...fields),
      text_query: oddTextQueries,
      vector_field: fc.constantFrom(...fields),
      vector_query: fc.oneof(
        fc.array(fc.double({ noNaN: true }), { minLength: dim, maxLength: dim }),
        fc.array(fc.constantFrom(1e39, -1e39, 0, 5e-324, 3.5e38), { minLength: dim, maxLength: dim }),
        fc.constantFrom([], [1], Array(dim + 1).fill(0), Array(4097).fill(1), Array(dim).fill(0), Array(dim).fill('1')),
      ),
      k: fc.constantFrom(0, 10_000, 10_001, -1, 1.5, 2 ** 31),
      projection: oddProjections,
      operator: fc.constantFrom('xor', '', 'AND ', 'not'),
      filter: predicates(table),
      rrf_k: fc.constantFrom(0.5, 0, -1, 1e308, 5e-324, 2 ** 53),
      offset: fc.constantFrom(9_999, 10_000, 2 ** 31, 2 ** 53, -1),
      text_weight: fc.constantFrom(1e308, 5e-324, -1, -0),
      vector_weight: fc.constantFrom(1e308, 5e-324, -1),
      window: fc.constantFrom(0, 1, 10_000, 10_001),
    });
  });
}

/** Bodies of count (without rows) and token_match (with projection and limit), over full-text columns. */
export function textBodies(world: World, withRows: boolean): fc.Arbitrary<Mutated> {
  const indexed = world.tables.filter((t) => t.fts.length > 0);
  return fc.constantFrom(...indexed).chain((table) => {
    const fields = columnNames(table);
    const rows = withRows ? { projection: fc.subarray(fields), limit: limits } : {};
    const base = fc.record(
      {
        table_name: fc.constant(table.name),
        field_name: fc.constantFrom(...table.fts),
        query: textQueries,
        operator: fc.constantFrom('or', 'and', 'AND'),
        ...rows,
      },
      { requiredKeys: ['table_name', 'field_name', 'query'] },
    );
    return mutate(base, {
      table_name: otherTableNames(world),
      field_name: fc.oneof(fc.constantFrom(...fields), fc.constantFrom('nope', '', '_rowkey')),
      query: oddTextQueries,
      operator: fc.constantFrom('nand', '', 'or '),
      ...(withRows ? { projection: oddProjections, limit: oddLimits } : {}),
    });
  });
}

/** A value as exact_match takes it: the column's type spelled as a string. */
function exactValue(field: Field): fc.Arbitrary<string> {
  return validValue(new arrow.Field(field.name, field.type as DataType, false)).map((v) =>
    typeof v === 'string' ? v : JSON.stringify(v),
  );
}

/** Values past the edges of a column's type, or no value of it at all. */
function oddExactValues(field: Field): fc.Arbitrary<string> {
  const typeName = String(field.type);
  if (/Int|Float/.test(typeName)) return numericStrings;
  if (/Date/.test(typeName)) return dateStrings;
  if (/Timestamp/.test(typeName)) return timestampStrings;
  if (/Bool/.test(typeName)) return fc.constantFrom('TRUE', '1', 't', '', 'yes');
  return fc.oneof(fc.constantFrom('[1, 2, 3]', '{}', 'AAEC', ''), anyString);
}

const EXACT_TYPES = /^(Int|Uint|Float|Utf8|LargeUtf8|Bool|Date|Timestamp)/;

export function exactBodies(world: World): fc.Arbitrary<Mutated> {
  return fc.constantFrom(...world.tables).chain((table) => {
    const fields = table.schema.fields;
    const scalar = fields.filter((f) => EXACT_TYPES.test(String(f.type)));
    return fc.constantFrom(...scalar).chain((field) =>
      mutate(
        fc.record(
          {
            table_name: fc.constant(table.name),
            field_name: fc.constant(field.name),
            value: exactValue(field),
            projection: fc.subarray(columnNames(table)),
            limit: limits,
          },
          { requiredKeys: ['table_name', 'field_name', 'value'] },
        ),
        {
          table_name: otherTableNames(world),
          field_name: fc.oneof(
            fc.constantFrom(...fields.map((f) => f.name)),
            fc.constantFrom('nope', field.name.toUpperCase()),
          ),
          value: oddExactValues(field),
          projection: oddProjections,
          limit: oddLimits,
        },
      ),
    );
  });
}

const SPELLINGS = [...SCALAR_SPELLINGS, 'string'];

const COLUMN_NAMES = ['id', 'text', 'v', 'tags', 'when', 'n', 'score', 'blob', 'flag', 'Ünï', 'my col'];

interface SchemaField {
  name: string;
  type: string;
  dim?: number;
  item?: string;
  nullable?: boolean;
}

const columnType = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...SPELLINGS).map((type) => ({ type })) },
  { weight: 1, arbitrary: fc.constantFrom(1, 3, 8, 16, 4096).map((dim) => ({ type: 'vector', dim })) },
  { weight: 1, arbitrary: fc.constantFrom(...SPELLINGS).map((item) => ({ type: 'list', item })) },
);

/** A schema create_table accepts: distinct names, each a type spelling with `dim`/`item` where they belong. */
const validSchema: fc.Arbitrary<SchemaField[]> = fc
  .uniqueArray(fc.constantFrom(...COLUMN_NAMES), { minLength: 1, maxLength: 6 })
  .chain((names) =>
    fc.tuple(
      ...names.map((name) =>
        fc
          .tuple(columnType, fc.option(fc.boolean(), { nil: undefined }))
          .map(([type, nullable]) => ({ name, ...type, ...(nullable === undefined ? {} : { nullable }) })),
      ),
    ),
  );

/** Index declarations that fit the schema: full-text on its text columns, vector indexes on its vectors. */
const indexesFor = (schema: SchemaField[]) => {
  const text = schema.filter((f) => ['utf8', 'string', 'large_utf8'].includes(f.type)).map((f) => f.name);
  const vectors = schema.filter((f) => f.type === 'vector').map((f) => f.name);
  return fc.record({
    fts: fc.subarray(text).chain((cols) =>
      fc.tuple(
        ...cols.map((column) =>
          fc.oneof(
            fc.constant(column),
            fc.constantFrom('ascii_lower', 'standard').map((analyzer) => ({ column, analyzer })),
          ),
        ),
      ),
    ),
    vector: fc
      .subarray(vectors)
      .chain((cols) =>
        fc.tuple(
          ...cols.map((column) => fc.constantFrom('cosine', 'l2', 'L2SQ', 'dot').map((metric) => ({ column, metric }))),
        ),
      ),
  });
};

/** Schemas create_table must refuse: bad spellings, misplaced dim/item, duplicate names, reserved names. */
const oddSchemas = fc.array(
  fc.record(
    {
      name: fc.oneof(fc.constantFrom('id', 'ID', 'a.b', '_x', ''), hostileNames),
      type: fc.oneof(
        fc.constantFrom(...SPELLINGS, 'vector', 'list'),
        fc.constantFrom(
          'I32',
          'int',
          'Utf8',
          'vector<3>',
          'list<i32>',
          'struct',
          'decimal',
          'date64',
          '',
          'timestamp_ns',
        ),
        hostileValue,
      ),
      dim: fc.constantFrom(0, -1, 1.5, 4097, 2 ** 31, null),
      item: fc.constantFrom('list', 'vector', 'nope', 'i32', null),
      nullable: fc.constantFrom(null, 'true', 0, true),
    },
    { requiredKeys: ['name', 'type'] },
  ),
  { minLength: 0, maxLength: 8 },
);

const oddIndexes = fc.record(
  {
    fts: fc.array(
      fc.oneof(
        fc.constantFrom('text', 'id', 'nope', 'Text'),
        fc.record({
          column: fc.constantFrom('text', 'id', 'v'),
          analyzer: fc.constantFrom('Standard', 'english', null, ''),
        }),
      ),
      { maxLength: 3 },
    ),
    vector: fc.array(
      fc.record({
        column: fc.constantFrom('v', 'id', 'nope'),
        metric: fc.constantFrom('hamming', '', 'COSINE ', 'l1'),
        dim: fc.constantFrom(3, 0, 4096, null, -1),
      }),
      { maxLength: 2 },
    ),
  },
  { requiredKeys: [] },
);

export function createBodies(world: World): fc.Arbitrary<Mutated> {
  const base = validSchema.chain((schema) =>
    fc.record(
      { table_name: fc.constantFrom(...world.scratchTables), schema: fc.constant(schema), indexes: indexesFor(schema) },
      { requiredKeys: ['table_name', 'schema'] },
    ),
  );
  const edges = {
    table_name: fc.oneof(fc.constantFrom(...world.tables.map((t) => t.name)), hostileNames),
    schema: oddSchemas,
    indexes: oddIndexes,
    schema_ipc: fc.constantFrom('AAAA', '', 'not base64!', null),
  };
  const viaIpc = fc
    .tuple(base, schemaIpcValue, fc.constantFrom('base64', 'base64', 'base64url', 'raw text', 'padded'))
    .map(([b, ipc, encoding]): Mutated => {
      const { schema: _schema, indexes: _indexes, ...rest } = b;
      const base64 = Buffer.from(ipc.bytes).toString(encoding === 'base64url' ? 'base64url' : 'base64');
      const text =
        encoding === 'raw text'
          ? Buffer.from(ipc.bytes).toString('latin1')
          : encoding === 'padded'
            ? ` ${base64}\n`
            : base64;
      return { value: { ...rest, schema_ipc: text }, note: `${ipc.note}, ${encoding}` };
    });
  return weighted<Mutated>([3, mutate(base, edges)], [2, viaIpc]);
}

export function dropBodies(world: World): fc.Arbitrary<Mutated> {
  const base = fc.record(
    { table_name: fc.constantFrom(...world.scratchTables), purge: fc.boolean() },
    { requiredKeys: ['table_name'] },
  );
  // Neither edges nor hostile values spell a fixture table: drops keep to tables the fuzzer owns.
  return mutate(base, {
    table_name: fc.oneof(fc.constantFrom('nope', 'fz_t99'), hostileNames),
    purge: fc.constantFrom('true', 1, null),
  });
}

export function schemaBodies(world: World): fc.Arbitrary<Mutated> {
  return fc
    .constantFrom(...world.tables)
    .chain((table) =>
      mutate(
        fc.record(
          { table_name: fc.constant(table.name), encoding: fc.constantFrom('json', 'ipc') },
          { requiredKeys: ['table_name'] },
        ),
        { table_name: otherTableNames(world), encoding: fc.constantFrom('IPC', 'arrow', '', null) },
      ),
    );
}

/** query_sql bodies: the SQL grammar's statements, and the query field's own edges. */
export function sqlBodies(sql: fc.Arbitrary<string>): fc.Arbitrary<Mutated> {
  return mutate(fc.record({ query: sql }), { query: weighted([1, fc.constantFrom('', ' ', ';')], [1, anyString]) });
}
