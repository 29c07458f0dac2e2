import Type from 'typebox';
import { Name } from './common.js';

export const ARROW_STREAM = 'application/vnd.apache.arrow.stream';

export const AppendQuery = Type.Object({ table: Name }, { additionalProperties: false });

export const PredicateQuery = Type.Object(
  { table: Name, predicate: Type.Optional(Type.String()) },
  { additionalProperties: false },
);

export const JsonRows = Type.Object(
  { data: Type.Array(Type.Object({}, { additionalProperties: true })) },
  { additionalProperties: false },
);

/** A rows body: `{data: [...]}` as JSON, or an Arrow IPC stream of one or more record batches. */
export const RowsBody = {
  content: {
    'application/json': { schema: JsonRows },
    // Bytes are checked by the Arrow reader, which names the column and row at fault.
    [ARROW_STREAM]: { schema: { description: 'Arrow IPC stream of one or more record batches' } },
  },
};

export const RowCounts = Type.Object({
  matched: Type.Integer(),
  n_tombstoned: Type.Integer(),
  n_not_found: Type.Integer(),
});
