import Type from 'typebox';
import { Name, TextOperator } from './common.js';

/** Several full-text columns searched as one text leg, each score weighted by its boost (docs/api.md). */
export const TextFields = Type.Array(
  Type.Object(
    { field: Type.String(), boost: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1000 })) },
    { additionalProperties: false },
  ),
  { minItems: 1, maxItems: 8 },
);

export const HybridSearchBody = Type.Object(
  {
    table_name: Name,
    text_field: Type.Optional(Type.String()),
    text_fields: Type.Optional(TextFields),
    text_query: Type.Optional(Type.String()),
    prefix: Type.Optional(Type.Boolean()),
    fuzziness: Type.Optional(Type.Integer({ minimum: 0, maximum: 2 })),
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
    // An enum rather than a union of literals: a wrong value is then told both that are allowed.
    consistency: Type.Optional(Type.Unsafe<'strong' | 'eventual'>({ type: 'string', enum: ['strong', 'eventual'] })),
    explain: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

export const CountBody = Type.Object(
  {
    table_name: Name,
    field_name: Type.Optional(Type.String()),
    text_fields: Type.Optional(TextFields),
    query: Type.String(),
    operator: Type.Optional(TextOperator),
    prefix: Type.Optional(Type.Boolean()),
    fuzziness: Type.Optional(Type.Integer({ minimum: 0, maximum: 2 })),
  },
  { additionalProperties: false },
);

export const CountReply = Type.Object({ count: Type.Integer() });

/** A search's freshness receipt, as headers of its reply (docs/api.md, Freshness). */
const RECEIPT_HEADERS = {
  'x-strata-table-version': {
    type: 'integer',
    description: 'The table version the search started from: every write answered before it began is in the answer.',
  },
  'x-strata-fresh-rows': {
    type: 'integer',
    description: 'The most rows any leg of the search read outside its index (0: the indexes answered it all).',
  },
};

/** The reply of a search that answers rows: Arrow IPC stream or JSON, as the Accept header asks, with its receipt. */
export const SearchRowsReply = Type.Unsafe<unknown>({
  description:
    "The rows, as an Arrow IPC stream or as JSON {data: [...]} (Accept), with the freshness receipt; with explain: true, an _explain column and the request's explain (JSON member explain, Arrow schema metadata strata.explain)",
  headers: RECEIPT_HEADERS,
});

/** `count`'s reply, with its receipt. */
export const CountReplyWithReceipt = Type.Object(CountReply.properties, { headers: RECEIPT_HEADERS });

export const TokenMatchBody = Type.Object(
  {
    table_name: Name,
    field_name: Type.Optional(Type.String()),
    text_fields: Type.Optional(TextFields),
    query: Type.String(),
    operator: Type.Optional(TextOperator),
    prefix: Type.Optional(Type.Boolean()),
    fuzziness: Type.Optional(Type.Integer({ minimum: 0, maximum: 2 })),
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
