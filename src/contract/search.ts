import Type from 'typebox';
import { Name, TextOperator } from './common.js';

export const HybridSearchBody = Type.Object(
  {
    table_name: Name,
    text_field: Type.Optional(Type.String()),
    text_query: Type.Optional(Type.String()),
    vector_field: Type.Optional(Type.String()),
    vector_query: Type.Optional(Type.Array(Type.Number(), { minItems: 1, maxItems: 4096 })),
    k: Type.Integer({ minimum: 0, maximum: 10_000 }),
    projection: Type.Optional(Type.Array(Type.String())),
    operator: Type.Optional(TextOperator),
    filter: Type.Optional(Type.String()),
    rrf_k: Type.Optional(Type.Number({ minimum: 1 })),
    offset: Type.Optional(Type.Integer({ minimum: 0 })),
    text_weight: Type.Optional(Type.Number({ minimum: 0 })),
    vector_weight: Type.Optional(Type.Number({ minimum: 0 })),
    window: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
  },
  { additionalProperties: false },
);

export const CountBody = Type.Object(
  { table_name: Name, field_name: Type.String(), query: Type.String(), operator: Type.Optional(TextOperator) },
  { additionalProperties: false },
);

export const CountReply = Type.Object({ count: Type.Integer() });

export const TokenMatchBody = Type.Object(
  {
    table_name: Name,
    field_name: Type.String(),
    query: Type.String(),
    operator: Type.Optional(TextOperator),
    projection: Type.Optional(Type.Array(Type.String())),
    limit: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: false },
);

export const ExactMatchBody = Type.Object(
  {
    table_name: Name,
    field_name: Type.String(),
    value: Type.String(),
    projection: Type.Optional(Type.Array(Type.String())),
    limit: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: false },
);

export const QuerySqlBody = Type.Object(
  { query: Type.String({ description: 'exactly one read-only statement over the database tables' }) },
  { additionalProperties: false },
);
