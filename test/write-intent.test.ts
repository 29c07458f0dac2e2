import { expect, test } from 'vitest';
import { intentFromJson, type WriteIntent } from '../src/engine/writes/intent.js';

test('an intent reads back as it was recorded', () => {
  const intents: WriteIntent[] = [
    { kind: 'append', tableId: 't_1', firstKey: '12', count: 3, fromVersion: 4 },
    { kind: 'update', tableId: 't_1', keys: ['1', '2'], fromVersion: 5 },
    { kind: 'delete', tableId: 't_1', keys: ['7'], predicate: 'id = 7', fromVersion: 6 },
  ];
  for (const intent of intents) expect(intentFromJson(JSON.stringify(intent))).toEqual(intent);
});

test("an update's intent recorded as `replace` by an earlier build is read as an update", () => {
  const recorded = JSON.stringify({ kind: 'replace', tableId: 't_1', keys: ['1'], fromVersion: 2 });

  expect(intentFromJson(recorded)).toEqual({ kind: 'update', tableId: 't_1', keys: ['1'], fromVersion: 2 });
});
