import { describe, expect, test } from 'vitest';
import {
  behindOf,
  builtAtCreation,
  declaredIndexes,
  resolveIndexes,
  storedIndexes,
  storedIndexOf,
} from '../src/engine/indexes/registry.js';
import { schemaFromFields } from '../src/engine/tables/schema.js';

// The registry is what table creation and upkeep read instead of naming kinds: which store index serves each
// declaration, which are built with the table, and how far behind each is.
const schema = schemaFromFields([
  { name: 'id', type: 'i64', nullable: false },
  { name: 'title', type: 'utf8' },
  { name: 'body', type: 'utf8' },
  { name: 'emb', type: 'vector', dim: 12 },
]);
const indexes = resolveIndexes(schema, {
  fts: ['title', { column: 'body', analyzer: 'standard' }],
  vector: [{ column: 'emb', metric: 'l2' }],
});

describe('the index registry', () => {
  test('each declaration names its store index and how upkeep keeps it', () => {
    expect(declaredIndexes(indexes)).toEqual([
      {
        key: 'fts:title',
        column: 'title',
        stored: { type: 'text', column: 'title', analyzer: 'ascii_lower' },
        upkeep: 'fold',
      },
      {
        key: 'fts:body',
        column: 'body',
        stored: { type: 'text', column: 'body', analyzer: 'standard' },
        upkeep: 'fold',
      },
      {
        key: 'vector:emb',
        column: 'emb',
        stored: { type: 'ann', column: 'emb', metric: 'l2sq', dim: 12 },
        upkeep: 'train',
      },
    ]);
  });

  test('a table is created with the folded kinds only: a trained index needs rows first', () => {
    expect(builtAtCreation(indexes)).toEqual([
      { type: 'text', column: 'title', analyzer: 'ascii_lower' },
      { type: 'text', column: 'body', analyzer: 'standard' },
    ]);
    expect(builtAtCreation(resolveIndexes(schema, null))).toEqual([]);
  });

  test('a declaration is served by the store index of its type on its column, and none other', () => {
    const present = [
      { name: 'k', type: 'scalar' as const, columns: ['_rowkey'] },
      { name: 't', type: 'text' as const, columns: ['title'] },
      { name: 'e', type: 'scalar' as const, columns: ['emb'] },
    ];
    const declared = (key: string) => {
      const found = declaredIndexes(indexes).find((d) => d.key === key);
      if (found === undefined) throw new Error(`no declaration ${key}`);
      return found;
    };
    const [title, body, emb] = [declared('fts:title'), declared('fts:body'), declared('vector:emb')];
    expect(storedIndexOf(title, present)?.name).toBe('t');
    expect(storedIndexOf(body, present)).toBeUndefined();
    // A scalar index on the vector column is not its ANN index: upkeep still has it to train.
    expect(storedIndexOf(emb, present)).toBeUndefined();
    expect(storedIndexOf(emb, [...present, { name: 'a', type: 'ann', columns: ['emb'] }])?.name).toBe('a');
  });

  test('how far behind: the rows its store index does not cover, none while it is not built', () => {
    expect(behindOf({ unindexedRows: 1234 })).toBe(1234);
    expect(behindOf(undefined)).toBe(0);
  });

  test('a table made before a kind existed opens with none of it', () => {
    const stored = storedIndexes(JSON.stringify({ fts: [{ column: 'title', analyzer: 'ascii_lower' }], vector: [] }));
    expect(stored).toEqual({ fts: [{ column: 'title', analyzer: 'ascii_lower' }], vector: [], scalar: [] });
    expect(declaredIndexes(stored).map((d) => d.key)).toEqual(['fts:title']);
  });
});
