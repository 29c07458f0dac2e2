import Type from 'typebox';
import { Name } from './common.js';

const Nullable = <T extends Type.TSchema>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));

export const DatabasePathParams = Type.Object({ database: Name }, { additionalProperties: false });

export const SchemaField = Type.Object(
  {
    name: Type.String(),
    type: Type.String(),
    dim: Nullable(Type.Integer()),
    item: Nullable(Type.String()),
    nullable: Nullable(Type.Boolean()),
  },
  { additionalProperties: false },
);

/** An analyzer spelled out (docs/api.md, analyzers); members left out take their defaults. */
const AnalyzerObject = Type.Object(
  {
    tokenizer: Nullable(Type.String()),
    lowercase: Nullable(Type.Boolean()),
    ascii_folding: Nullable(Type.Boolean()),
    stem: Nullable(Type.String()),
    stop_words: Nullable(Type.String()),
  },
  { additionalProperties: false },
);

export const FtsIndexEntry = Type.Union([
  Type.String(),
  Type.Object(
    {
      column: Type.String(),
      analyzer: Nullable(Type.Union([Type.String(), AnalyzerObject])),
      positions: Nullable(Type.Boolean()),
    },
    { additionalProperties: false },
  ),
]);

/** An analyzer as replies show it: a name, or the object form with every member. */
const CanonicalAnalyzer = Type.Union([
  Type.String(),
  Type.Object({
    tokenizer: Type.String(),
    lowercase: Type.Boolean(),
    ascii_folding: Type.Boolean(),
    stem: Type.Union([Type.String(), Type.Null()]),
    stop_words: Type.Union([Type.String(), Type.Null()]),
  }),
]);

export const VectorIndexEntry = Type.Object(
  { column: Type.String(), metric: Type.String(), dim: Nullable(Type.Integer({ minimum: 0 })) },
  { additionalProperties: false },
);

export const ScalarIndexEntry = Type.Union([
  Type.String(),
  Type.Object({ column: Type.String(), kind: Nullable(Type.String()) }, { additionalProperties: false }),
]);

export const Indexes = Type.Object(
  {
    fts: Nullable(Type.Array(FtsIndexEntry)),
    vector: Nullable(Type.Array(VectorIndexEntry)),
    scalar: Nullable(Type.Array(ScalarIndexEntry)),
  },
  { additionalProperties: false },
);

export const CreateTableBody = Type.Object(
  {
    table_name: Name,
    schema: Nullable(Type.Array(SchemaField)),
    schema_ipc: Nullable(Type.String()),
    indexes: Nullable(Indexes),
    primary_key: Nullable(Type.String()),
  },
  { additionalProperties: false },
);

/** A declared index on one column, beside it in `/v1/schema`. */
export const ColumnIndex = Type.Union([
  Type.Object({ kind: Type.Literal('fts'), analyzer: CanonicalAnalyzer, positions: Type.Optional(Type.Literal(true)) }),
  Type.Object({ kind: Type.Literal('vector'), metric: Type.String() }),
  Type.Object({ kind: Type.Literal('scalar'), type: Type.String() }),
]);

export const ColumnDescriptor = Type.Object({
  name: Type.String(),
  type: Type.String(),
  nullable: Type.Boolean(),
  dim: Type.Optional(Type.Integer()),
  item: Type.Optional(Type.String()),
  indexes: Type.Optional(Type.Array(ColumnIndex)),
  primary_key: Type.Optional(Type.Literal(true)),
});

export const CanonicalIndexes = Type.Object({
  fts: Type.Array(
    Type.Object({ column: Type.String(), analyzer: CanonicalAnalyzer, positions: Type.Optional(Type.Literal(true)) }),
  ),
  vector: Type.Array(Type.Object({ column: Type.String(), metric: Type.String(), dim: Type.Integer() })),
  scalar: Type.Array(Type.Object({ column: Type.String(), type: Type.String() })),
});

/** The table's primary key column, or null when it has none. */
const PrimaryKey = Type.Union([Type.String(), Type.Null()]);

export const TableDescription = Type.Object({
  table_name: Type.String(),
  schema: Type.Array(ColumnDescriptor),
  indexes: CanonicalIndexes,
  primary_key: PrimaryKey,
});

export const DropTableBody = Type.Object(
  { table_name: Name, purge: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);

export const DropTableReply = Type.Object({
  table_name: Type.String(),
  purged: Type.Boolean(),
  location: Type.String(),
});

export const SchemaBody = Type.Object(
  { table_name: Name, encoding: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('ipc')])) },
  { additionalProperties: false },
);

export const SchemaReply = Type.Union([
  Type.Array(ColumnDescriptor),
  Type.Object({ schema_ipc: Type.String(), indexes: CanonicalIndexes, primary_key: PrimaryKey }),
]);

export const ListTablesReply = Type.Object({
  tables: Type.Array(
    Type.Object({
      table_name: Type.String(),
      num_rows: Type.Integer(),
      last_upkeep_ms: Type.Union([Type.Integer(), Type.Null()], {
        description:
          'When index upkeep last committed work on the table (ms since the epoch), on any node; null before',
      }),
    }),
  ),
});
