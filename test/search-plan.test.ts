import { Operator } from '@lancedb/lancedb';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import type { TableIndexes } from '../src/engine/indexes/registry.js';
import { planHybrid } from '../src/engine/search/plan.js';
import { schemaFromFields } from '../src/engine/tables/schema.js';
import { BadRequest } from '../src/errors.js';

const table = {
  schema: schemaFromFields([
    { name: 'id', type: 'i64', nullable: false },
    { name: 'title', type: 'utf8' },
    { name: 'body', type: 'utf8' },
    { name: 'emb', type: 'vector', dim: 3 },
    { name: 'raw', type: 'vector', dim: 3 },
  ]),
  indexes: {
    fts: [{ column: 'title', analyzer: 'ascii_lower' }],
    vector: [{ column: 'emb', metric: 'cosine', dim: 3 }],
    scalar: [],
  } satisfies TableIndexes,
};

const refusal = (req: Parameters<typeof planHybrid>[1]): string => {
  try {
    planHybrid(table, req);
  } catch (err) {
    if (err instanceof BadRequest) return err.message;
    throw err;
  }
  return 'planned';
};

describe('planning a hybrid search (no engine involved)', () => {
  test('both legs, with the defaults of the contract', () => {
    const plan = planHybrid(table, {
      text_field: 'title',
      text_query: 'red kettle',
      vector_field: 'emb',
      vector_query: [1, 0, 0],
      k: 10,
    });

    expect(plan).toMatchObject({
      offset: 0,
      window: 100,
      operator: Operator.Or,
      filter: undefined,
      textQuery: 'red kettle',
      textFields: [{ field: 'title', boost: 1 }],
      vector: { field: 'emb', query: [1, 0, 0], metric: 'cosine' },
    });
    expect(plan.fields.map((f) => f.name)).toEqual(['id', 'title', 'body', 'emb', 'raw']);
  });

  test('text_fields: each column with its boost (1 unless given), checked like text_field, and not with it', () => {
    const both = { text_query: 'kettle', k: 5 };
    expect(planHybrid(table, { ...both, text_fields: [{ field: 'title', boost: 2.5 }] }).textFields).toEqual([
      { field: 'title', boost: 2.5 },
    ]);
    expect(refusal({ ...both, text_field: 'title', text_fields: [{ field: 'title' }] })).toBe(
      'send one of text_field and text_fields, not both',
    );
    expect(refusal({ ...both, text_fields: [{ field: 'title' }, { field: 'title' }] })).toBe(
      'text_fields[1]: column "title" is listed twice',
    );
    expect(refusal({ ...both, text_fields: [{ field: 'title' }, { field: 'body' }] })).toBe(
      'text_fields[1].field: column "body" has no full-text index',
    );
    expect(refusal({ ...both, text_fields: [{ field: 'nope' }] })).toBe('text_fields[0].field: no column named "nope"');
  });

  test('the default window is max(100, 2(offset + k)), and a window below offset + k or over 10000 is refused', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4000 }), fc.integer({ min: 0, max: 1000 }), (offset, k) => {
        const plan = planHybrid(table, { vector_field: 'emb', vector_query: [0, 1, 0], k, offset });
        expect(plan.window).toBe(Math.max(100, 2 * (offset + k)));
      }),
    );
    expect(refusal({ vector_field: 'emb', vector_query: [0, 1, 0], k: 10, offset: 5, window: 14 })).toBe(
      'window 14 must be at least offset + k = 15',
    );
    expect(refusal({ vector_field: 'emb', vector_query: [0, 1, 0], k: 10, window: 10_001 })).toMatch(/over the limit/);
  });

  test('a text query without a token runs no text leg; with no vector either there is nothing to search', () => {
    const plan = planHybrid(table, {
      text_field: 'title',
      text_query: '-- !!',
      vector_field: 'emb',
      vector_query: [1, 1, 1],
      k: 1,
    });

    expect(plan.textQuery).toBeUndefined();
    expect(refusal({ text_field: 'title', text_query: '  ', k: 1 })).toMatch(/nothing to search/);
  });

  test('each refusal names the field', () => {
    expect(refusal({ text_field: 'body', text_query: 'x', k: 1 })).toBe(
      'text_field: column "body" has no full-text index',
    );
    expect(refusal({ text_field: 'nope', text_query: 'x', k: 1 })).toBe('text_field: no column named "nope"');
    expect(refusal({ vector_query: [1, 0, 0], k: 1 })).toBe('vector_field is required with vector_query');
    expect(refusal({ vector_field: 'raw', vector_query: [1, 0, 0], k: 1 })).toBe(
      'vector_field: column "raw" has no vector index',
    );
    expect(refusal({ vector_field: 'emb', vector_query: [1, 0], k: 1 })).toBe(
      'vector_query has 2 numbers; column "emb" has dim 3',
    );
    expect(refusal({ vector_field: 'emb', vector_query: [0, 0, 0], k: 1 })).toMatch(/all zeros/);
    expect(refusal({ vector_field: 'emb', vector_query: [1, 0, 0], k: 1, projection: ['id', 'id'] })).toMatch(
      /listed twice/,
    );
    expect(refusal({ vector_field: 'emb', vector_query: [1, 0, 0], k: 1, filter: ' ' })).toMatch(
      /filter must not be empty/,
    );
  });

  test('the operator is case-insensitive, and the projection keeps its order', () => {
    const plan = planHybrid(table, {
      text_field: 'title',
      text_query: 'a b',
      k: 1,
      operator: 'AND',
      projection: ['emb', 'id'],
    });

    expect(plan.operator).toBe(Operator.And);
    expect(plan.fields.map((f) => f.name)).toEqual(['emb', 'id']);
  });
});
