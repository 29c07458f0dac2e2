import type { Field } from 'apache-arrow';
import { BadRequest } from '../../errors.js';
import { describeField, vectorWidth } from '../tables/schema.js';
import type { IndexKind } from './kind.js';

export type Metric = 'cosine' | 'l2sq' | 'negdot';
const METRICS: Readonly<Record<string, Metric>> = {
  cosine: 'cosine',
  l2sq: 'l2sq',
  l2: 'l2sq',
  negdot: 'negdot',
  dot: 'negdot',
};

/** A vector index: the vector leg searches a column by its metric, through an ANN index once upkeep trained one. */
export interface VectorIndex {
  column: string;
  metric: Metric;
  dim: number;
}

type VectorEntry = { column: string; metric: string; dim?: number | null };

export const vectorKind: IndexKind<VectorEntry, VectorIndex, { kind: 'vector'; metric: Metric }> = {
  columnOf: (entry) => entry.column,
  declare(entry, field: Field | undefined, where) {
    if (field === undefined) throw new BadRequest(`${where}: column "${entry.column}" is not in the schema`);
    const width = vectorWidth(field.type);
    if (width === undefined) {
      throw new BadRequest(`${where}: column "${entry.column}" is ${describeField(field).type}, not a vector column`);
    }
    const metric = METRICS[entry.metric.toLowerCase()];
    if (metric === undefined) {
      throw new BadRequest(`${where}.metric "${entry.metric}" is not one of cosine, l2sq (l2), negdot (dot)`);
    }
    if (entry.dim !== undefined && entry.dim !== null && entry.dim !== width) {
      throw new BadRequest(`${where}.dim ${entry.dim} does not match column "${entry.column}" of dim ${width}`);
    }
    return { column: entry.column, metric, dim: width };
  },
  shown: (declared) => ({ kind: 'vector', metric: declared.metric }),
  noun: 'vector index',
  stored: (declared) => ({ type: 'ann', column: declared.column, metric: declared.metric, dim: declared.dim }),
  upkeep: 'train',
};

/** The vector index a vector leg searches `column` through, checked: the column exists and has one. */
export function vectorIndexOf(
  table: { schema: { fields: readonly Field[] }; indexes: { vector: readonly VectorIndex[] } },
  column: string,
): { declared: VectorIndex; field: Field } {
  const declared = table.indexes.vector.find((v) => v.column === column);
  const field = table.schema.fields.find((f) => f.name === column);
  if (field === undefined) throw new BadRequest(`vector_field: no column named "${column}"`);
  if (declared === undefined) throw new BadRequest(`vector_field: column "${column}" has no vector index`);
  return { declared, field };
}
