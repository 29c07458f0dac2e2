import type { Schema } from 'apache-arrow';
import type { Static } from 'typebox';
import type { Indexes } from '../../contract/tables.js';
import { BadRequest } from '../../errors.js';
import { type ColumnDescriptor, describeSchema } from '../tables/schema.js';
import { ftsKind } from './fts.js';
import type { IndexKind } from './kind.js';
import { vectorKind } from './vector.js';

export type { Analyzer, FtsIndex } from './fts.js';
export type { Metric, VectorIndex } from './vector.js';

/** Every kind of index, by the name a create_table body declares it under: a new kind is a file and a line here. */
export const INDEX_KINDS = { fts: ftsKind, vector: vectorKind } as const;

type Kinds = typeof INDEX_KINDS;
export type IndexKindName = keyof Kinds;
type DeclaredOf<K> = K extends IndexKind<infer _E, infer D, infer _S> ? D : never;
type ShownOf<K> = K extends IndexKind<infer _E, infer _D, infer S> ? S : never;

/** A table's index declarations, canonical, by kind. */
export type TableIndexes = { [K in IndexKindName]: DeclaredOf<Kinds[K]>[] };

/** An index on one column, as `/v1/schema` shows it beside the column. */
export type ColumnIndex = ShownOf<Kinds[IndexKindName]>;

/** Index declarations as a create_table body gives them (the contract's type). */
export type IndexesInput = Static<typeof Indexes>;

const KIND_NAMES = Object.keys(INDEX_KINDS) as IndexKindName[];

/** Index declarations → canonical form, checked against the schema (docs/api.md). */
export function resolveIndexes(schema: Schema, input: IndexesInput | null | undefined): TableIndexes {
  const byName = new Map(schema.fields.map((f) => [f.name, f] as const));
  const resolve = <E, D extends { column: string }, S extends { kind: string }>(
    name: IndexKindName,
    kind: IndexKind<E, D, S>,
    entries: readonly E[],
  ): D[] => {
    const declared: D[] = [];
    entries.forEach((entry, i) => {
      const where = `indexes.${name}[${i}]`;
      const column = kind.columnOf(entry);
      const one = kind.declare(entry, byName.get(column), where);
      if (declared.some((d) => d.column === column)) {
        throw new BadRequest(`${where}: column "${column}" already has a ${kind.noun}`);
      }
      declared.push(one);
    });
    return declared;
  };
  const resolved: Partial<Record<IndexKindName, { column: string }[]>> = {};
  for (const name of KIND_NAMES) {
    const kind = INDEX_KINDS[name] as IndexKind<unknown, { column: string }, ColumnIndex>;
    resolved[name] = resolve(name, kind, (input?.[name] ?? []) as readonly unknown[]);
  }
  return resolved as TableIndexes;
}

/** The columns with each one's declared indexes beside it (docs/api.md, `/v1/schema`). */
export function describeIndexedSchema(schema: Schema, indexes: TableIndexes): ColumnDescriptor[] {
  return describeSchema(schema).map((column) => {
    const declared: ColumnIndex[] = KIND_NAMES.flatMap((name) =>
      (indexes[name] as { column: string }[])
        .filter((d) => d.column === column.name)
        .map((d) => (INDEX_KINDS[name] as IndexKind<unknown, { column: string }, ColumnIndex>).shown(d)),
    );
    return declared.length === 0 ? column : { ...column, indexes: declared };
  });
}
