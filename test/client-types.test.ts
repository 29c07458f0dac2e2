import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ANALYZERS,
  type ColumnIndex,
  DATABASE_STATES,
  LANGUAGES,
  METRIC_ALIASES,
  METRICS,
  SCALAR_INDEX_TYPES,
  SCALAR_TYPE_ALIASES,
  SCALAR_TYPES,
  type StorageBinding,
  TEXT_OPERATORS,
  TOKENIZERS,
  VERIFY_STEPS,
} from '@strata/client';
import { describe, expect, test } from 'vitest';
import { PATTERN_RULES, TextOperator } from '../src/contract/common.js';
import { DatabaseState, Storage } from '../src/contract/databases.js';
import { ColumnIndex as ContractColumnIndex } from '../src/contract/tables.js';
import { LANGUAGES as ENGINE_LANGUAGES, TOKENIZERS as ENGINE_TOKENIZERS } from '../src/engine/indexes/fts.js';
import { resolveIndexes } from '../src/engine/indexes/registry.js';
import { describeSchema, schemaFromFields } from '../src/engine/tables/schema.js';
import { BadRequest } from '../src/errors.js';
import { LocalObjects } from '../src/storage/local.js';
import { verifyObjects } from '../src/storage/verify.js';

/**
 * `@strata/client` is built on its own (fetch and apache-arrow only), so it spells the service's words itself:
 * metrics, analyzers, column types, operators, states, verification steps. Each is held here against what the
 * service takes and answers: the contract's literals where it has them, else the validation the service runs
 * (whose refusal lists every spelling it takes). Any drift, either way, fails.
 */

const sorted = (values: Iterable<string>) => [...values].sort();

/** The message of the service's refusal of `run`. */
function refusal(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    if (err instanceof BadRequest) return err.message;
    throw err;
  }
  throw new Error('the service took it');
}

/** The words of a refusal's list: `cosine, l2sq (l2), negdot (dot)` → cosine, l2sq, l2, negdot, dot. */
const listed = (message: string, after: RegExp) => {
  const list = after.exec(message)?.[1];
  if (list === undefined) throw new Error(`no list in "${message}"`);
  return list.split(/[\s,()]+/).filter((word) => word !== '');
};

/** The JSON Schema keywords read here (TypeBox's static types do not carry all of them). */
interface JsonSchema {
  const?: string;
  enum?: string[];
  pattern?: string;
  anyOf?: JsonSchema[];
  properties?: Record<string, JsonSchema>;
}
const json = (schema: object): JsonSchema => schema;

/** The values of a union of literals. */
const literals = (schema: JsonSchema) => (schema.anyOf ?? []).map((member) => String(member.const));

describe('the client spells what the contract spells', () => {
  test('database states', () => {
    expect(sorted(DATABASE_STATES)).toEqual(sorted(literals(json(DatabaseState))));
  });

  test('text operators: each is one the contract takes, and they cover its words', () => {
    const pattern = json(TextOperator).pattern ?? '';
    for (const operator of TEXT_OPERATORS) expect(operator, operator).toMatch(new RegExp(pattern));
    const words = [...(PATTERN_RULES[pattern] ?? '').matchAll(/"(\w+)"/g)].map((m) => m[1] as string);
    expect(words.length).toBeGreaterThan(0);
    expect(sorted(new Set(TEXT_OPERATORS.map((o) => o.toLowerCase())))).toEqual(sorted(words));
  });

  test('the kinds of index a column descriptor shows', () => {
    // As for providers: the kinds are spelled only in the client's type of a column's index.
    const kinds = { fts: true, vector: true, scalar: true } satisfies Record<ColumnIndex['kind'], true>;
    const contract = (json(ContractColumnIndex).anyOf ?? []).map((member) => String(member.properties?.kind?.const));
    expect(sorted(Object.keys(kinds))).toEqual(sorted(contract));
  });

  test('storage providers', () => {
    // The client spells providers only in its type of bindings: `satisfies` makes the type checker hold these
    // keys to exactly that type's, and the test holds them to the contract's.
    const providers = { local: true, s3: true } satisfies Record<StorageBinding['provider'], true>;
    expect(sorted(Object.keys(providers))).toEqual(sorted(json(Storage).properties?.provider?.enum ?? []));
  });
});

describe('the client spells what the service validates', () => {
  const vectors = schemaFromFields([
    { name: 'v', type: 'vector', dim: 2 },
    { name: 't', type: 'utf8' },
    { name: 'n', type: 'i64' },
  ]);

  test('metrics: the ones answered, the aliases taken, and no other', () => {
    const answered = (metric: string) =>
      resolveIndexes(vectors, { vector: [{ column: 'v', metric }] }).vector[0]?.metric;

    expect(METRICS.map(answered)).toEqual([...METRICS]);
    for (const [alias, metric] of Object.entries(METRIC_ALIASES)) expect(answered(alias), alias).toBe(metric);
    const taken = listed(
      refusal(() => answered('nope')),
      /is not one of (.*)$/,
    );
    expect(sorted(taken)).toEqual(sorted([...METRICS, ...Object.keys(METRIC_ALIASES)]));
  });

  test('analyzers', () => {
    const answered = (analyzer: string) =>
      resolveIndexes(vectors, { fts: [{ column: 't', analyzer }] }).fts[0]?.analyzer;

    expect(ANALYZERS.map(answered)).toEqual([...ANALYZERS]);
    const taken = listed(
      refusal(() => answered('nope')),
      /is not one of (.*)$/,
    );
    expect(sorted(taken)).toEqual(sorted(ANALYZERS));
    // The object form's languages and tokenizers.
    expect([...LANGUAGES]).toEqual([...ENGINE_LANGUAGES]);
    expect([...TOKENIZERS]).toEqual([...ENGINE_TOKENIZERS]);
    const tokenizers = listed(
      refusal(() => resolveIndexes(vectors, { fts: [{ column: 't', analyzer: { tokenizer: 'nope' } }] })),
      /is not one of (.*)$/,
    );
    expect(sorted(tokenizers)).toEqual(sorted(TOKENIZERS));
  });

  test('scalar index types: each answered as spelled, and no other', () => {
    const answered = (kind: string) => resolveIndexes(vectors, { scalar: [{ column: 'n', kind }] }).scalar[0]?.type;

    expect(SCALAR_INDEX_TYPES.filter((t) => t !== 'label_list').map(answered)).toEqual(['btree', 'bitmap']);
    const taken = listed(
      refusal(() => answered('nope')),
      /is not one of (.*)$/,
    );
    expect(sorted(taken)).toEqual(sorted(SCALAR_INDEX_TYPES));
  });

  test('column types: each scalar answered as spelled, the aliases, vector and list, and no other', () => {
    const answered = (type: string) => describeSchema(schemaFromFields([{ name: 'c', type }]))[0]?.type;

    expect(SCALAR_TYPES.map(answered)).toEqual([...SCALAR_TYPES]);
    for (const [alias, type] of Object.entries(SCALAR_TYPE_ALIASES)) expect(answered(alias), alias).toBe(type);
    expect(describeSchema(schemaFromFields([{ name: 'c', type: 'vector', dim: 3 }]))).toMatchObject([
      { type: 'vector', dim: 3 },
    ]);
    for (const item of SCALAR_TYPES)
      expect(describeSchema(schemaFromFields([{ name: 'c', type: 'list', item }])), item).toMatchObject([
        { type: 'list', item },
      ]);
    const taken = listed(
      refusal(() => answered('nope')),
      /\(one of (.*)\)$/,
    );
    expect(sorted(taken)).toEqual(sorted([...SCALAR_TYPES, ...Object.keys(SCALAR_TYPE_ALIASES), 'vector', 'list']));
  });

  test('verification steps, in order', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'client-types-'));
    try {
      const outcome = await verifyObjects(new LocalObjects(dir, { provider: 'local', bucket: 'b', prefix: '' }));
      expect(outcome.checks.map((check) => check.step)).toEqual([...VERIFY_STEPS]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
