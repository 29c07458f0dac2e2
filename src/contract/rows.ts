import Type from 'typebox';
import { Name } from './common.js';

export const ARROW_STREAM = 'application/vnd.apache.arrow.stream';

export const AppendQuery = Type.Object({ table: Name }, { additionalProperties: false });

export const PredicateQuery = Type.Object(
  { table: Name, predicate: Type.Optional(Type.String()) },
  { additionalProperties: false },
);

/**
 * The headers of the write routes, for the OpenAPI document: the key is checked by the idempotency layer, whose
 * 400 names the header (docs/api.md, Idempotent writes).
 */
export const WriteHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      description:
        '1–255 printable ASCII characters naming this write: sent again with the same request within 24 h, it writes nothing and answers the first answer (Idempotent-Replayed: true)',
    }),
  ),
});

/** An append's headers: a write's, and `Prefer` to be answered without the rows (RFC 7240). */
export const AppendHeaders = Type.Object({
  ...WriteHeaders.properties,
  prefer: Type.Optional(
    Type.String({
      description:
        '"return=minimal": answer 204 with X-Strata-Table-Version and no body, instead of the rows as stored (Preference-Applied: return=minimal)',
    }),
  ),
});

/** An append answered without its rows (`Prefer: return=minimal`). */
export const Appended = Type.Null({ description: 'Appended; X-Strata-Table-Version gives the version' });

const JsonRows = Type.Object(
  { data: Type.Array(Type.Object({}, { additionalProperties: true })) },
  { additionalProperties: false },
);

const ARROW_ROWS = { schema: { description: 'Arrow IPC stream of one or more record batches' } };

/** A rows body as the OpenAPI document shows it: `{data: [...]}` as JSON, or an Arrow IPC stream. */
export const RowsBody = {
  content: { 'application/json': { schema: JsonRows }, [ARROW_STREAM]: ARROW_ROWS },
};

/**
 * A rows body as the routes validate it: not at all. Both kinds reach the engine as bytes and are checked where
 * they are converted, with messages that name the field, row and column: JSON off the event loop
 * (`engine/json-rows.ts`, which checks `JsonRows` in the same words), Arrow by its reader.
 */
export const RowsBytes = {
  content: {
    'application/json': { schema: { description: 'JSON {"data": [row, ...]}' } },
    [ARROW_STREAM]: ARROW_ROWS,
  },
};

export const RowCounts = Type.Object({
  matched: Type.Integer(),
  n_tombstoned: Type.Integer(),
  n_not_found: Type.Integer(),
});

export const Upserted = Type.Object({
  inserted: Type.Integer({ description: 'Rows whose primary key the table did not hold' }),
  updated: Type.Integer({ description: 'Rows that replaced the row holding their primary key' }),
});
