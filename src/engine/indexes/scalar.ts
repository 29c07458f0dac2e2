import type { Field } from 'apache-arrow';
import { BadRequest } from '../../errors.js';
import { describeField } from '../tables/schema.js';
import type { IndexKind } from './kind.js';

/**
 * How a scalar index finds rows: `btree` (exact values and ranges, any cardinality), `bitmap` (exact values of a
 * column with few distinct ones), `label_list` (list columns: rows holding some or all of given values).
 */
export type ScalarIndexType = 'btree' | 'bitmap' | 'label_list';
export const SCALAR_INDEX_TYPES: readonly ScalarIndexType[] = ['btree', 'bitmap', 'label_list'];

/** A scalar index: filters, update and delete predicates and `exact_match` find the rows of a column through it. */
export interface ScalarIndex {
  column: string;
  type: ScalarIndexType;
}

type ScalarEntry = string | { column: string; kind?: string | null };

/**
 * The column types each scalar index takes, as `/v1/schema` spells them (a label list's are its lists' items):
 * what Lance builds each of (a BTREE takes no binary nor large_utf8, a BITMAP and a LABEL_LIST no floats, dates or
 * times).
 */
export const INTEGERS = ['i8', 'i16', 'i32', 'i64', 'u8', 'u16', 'u32', 'u64'];
export const TEXTS = ['utf8', 'large_utf8'];
const TAKES: Readonly<Record<ScalarIndexType, readonly string[]>> = {
  btree: ['bool', ...INTEGERS, 'f16', 'f32', 'f64', 'utf8', 'date32', 'timestamp_ms', 'timestamp_us'],
  bitmap: ['bool', ...INTEGERS, ...TEXTS, 'binary', 'large_binary'],
  label_list: ['bool', ...INTEGERS, ...TEXTS],
};

/** The type of index a column gets when its declaration names none (a primary key's too). */
export function chosenFor(type: string, list: boolean): ScalarIndexType {
  if (list) return 'label_list';
  return ['bool', 'binary', 'large_binary', 'large_utf8'].includes(type) ? 'bitmap' : 'btree';
}

export const scalarKind: IndexKind<ScalarEntry, ScalarIndex, { kind: 'scalar'; type: ScalarIndexType }> = {
  columnOf: (entry) => (typeof entry === 'string' ? entry : entry.column),
  declare(entry, field: Field | undefined, where) {
    const column = scalarKind.columnOf(entry);
    if (field === undefined) throw new BadRequest(`${where}: column "${column}" is not in the schema`);
    const described = describeField(field);
    const list = described.type === 'list';
    const asked = typeof entry === 'string' ? undefined : entry.kind?.toLowerCase();
    const type = asked ?? chosenFor(described.type, list);
    if (!(SCALAR_INDEX_TYPES as readonly string[]).includes(type)) {
      throw new BadRequest(`${where}.kind "${type}" is not one of ${SCALAR_INDEX_TYPES.join(', ')}`);
    }
    const valueType = list ? (described.item ?? '') : described.type;
    const takes = TAKES[type as ScalarIndexType];
    if ((type === 'label_list') !== list || !takes.includes(valueType)) {
      const what = list ? `a list of ${valueType}` : valueType;
      const needs =
        type === 'label_list' ? `a list of ${takes.join(', ')}` : `${takes.join(', ')} (label_list takes lists)`;
      throw new BadRequest(`${where}: column "${column}" is ${what}; a ${type} index needs ${needs}`);
    }
    return { column, type: type as ScalarIndexType };
  },
  shown: (declared) => ({ kind: 'scalar', type: declared.type }),
  noun: 'scalar index',
  stored: (declared) => ({ type: 'scalar', column: declared.column, index: declared.type }),
  upkeep: 'fold',
};
