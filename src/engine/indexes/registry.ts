import type { Schema } from 'apache-arrow';
import type { Static } from 'typebox';
import type { Indexes } from '../../contract/tables.js';
import { BadRequest } from '../../errors.js';
import { type ColumnDescriptor, describeSchema } from '../tables/schema.js';
import { ftsKind } from './fts.js';
import type { IndexKind, IndexSpec, IndexUpkeep } from './kind.js';
import { scalarKind } from './scalar.js';
import { vectorKind } from './vector.js';

export type { Analyzer, FtsIndex } from './fts.js';
export type { IndexSpec, IndexUpkeep } from './kind.js';
export type { ScalarIndex, ScalarIndexType } from './scalar.js';
export type { Metric, VectorIndex } from './vector.js';

/** Every kind of index, by the name a create_table body declares it under: a new kind is a file and a line here. */
export const INDEX_KINDS = { fts: ftsKind, vector: vectorKind, scalar: scalarKind } as const;

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

/**
 * A table's declarations as the catalog keeps them (JSON of `TableIndexes`): a kind added since the table was
 * made is missing there, and the table has none of it.
 */
export function storedIndexes(json: string): TableIndexes {
  const stored = JSON.parse(json) as Partial<TableIndexes>;
  return Object.fromEntries(KIND_NAMES.map((name) => [name, stored[name] ?? []])) as TableIndexes;
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

/** One declaration of a table, with what its kind says of the store index that serves it. */
export interface DeclaredIndex {
  /** Names it among the table's declarations (upkeep's bookkeeping is kept by it). */
  key: string;
  column: string;
  stored: IndexSpec;
  upkeep: IndexUpkeep;
}

/** What names a declaration among its table's (`DeclaredIndex.key`): its kind and its column. */
export const declarationKey = (kind: IndexKindName, column: string): string => `${kind}:${column}`;

/** Every declaration of a table, kind by kind. */
export function declaredIndexes(indexes: TableIndexes): DeclaredIndex[] {
  return KIND_NAMES.flatMap((name) => {
    const kind = INDEX_KINDS[name] as IndexKind<unknown, { column: string }, ColumnIndex>;
    return (indexes[name] as { column: string }[]).map((declared) => ({
      key: declarationKey(name, declared.column),
      column: declared.column,
      stored: kind.stored(declared),
      upkeep: kind.upkeep,
    }));
  });
}

/** The store indexes a table is created with: those of the kinds kept by folding (`IndexUpkeep`). */
export function builtAtCreation(indexes: TableIndexes): IndexSpec[] {
  return declaredIndexes(indexes)
    .filter((d) => d.upkeep === 'fold')
    .map((d) => d.stored);
}

/** An index as a row store lists it: its name, what it is, and the columns it covers. */
export interface StoredIndex {
  name: string;
  type: IndexSpec['type'];
  columns: readonly string[];
}

/** The store index serving a declaration, among those the store lists; undefined while none is built. */
export function storedIndexOf<I extends StoredIndex>(declared: DeclaredIndex, present: readonly I[]): I | undefined {
  return present.find((i) => i.type === declared.stored.type && i.columns.includes(declared.column));
}

/**
 * How far behind a declaration's index is: the rows a search through it scans instead (`unindexed` of its store
 * index). One a `train` kind has not built yet is not behind: below the size that builds it, an exact scan is the
 * plan, not a lag.
 */
export function behindOf(stats: { unindexedRows: number } | undefined): number {
  return stats?.unindexedRows ?? 0;
}
