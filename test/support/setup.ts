import { afterAll, expect } from 'vitest';
import { capturedLogs, leakedSecrets } from './logs.js';

// Runs after every test file: the file's whole log stream must hold no key the tests used.
afterAll(() => {
  expect(leakedSecrets(), `${capturedLogs().length} log lines checked`).toEqual([]);
});
