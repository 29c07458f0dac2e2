import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { ConfigError, flagsToEnv, loadConfig } from '../src/config.js';
import { hashKey, KEY_PATTERN, newSecret } from '../src/control/keys.js';
import { prefixSegments } from '../src/storage/binding.js';

describe('configuration', () => {
  test('defaults match API.md §8', () => {
    const config = loadConfig({});

    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      localStorage: true,
      allowInsecureEndpoints: false,
      maxBodyBytes: 256 * 1024 * 1024,
      sqlTimeoutMs: 30_000,
      sqlMaxRows: 1_000_000,
      maxActiveDatabases: 64,
      controlUrl: undefined,
    });
    expect(config.dataDir).toMatch(/\/data$/);
  });

  test('an idempotency key that would not outlive ten holds is refused at start-up, naming both settings', () => {
    expect(() => loadConfig({ STRATA_IDEMPOTENCY_TTL_MS: '1000' })).toThrow(
      /STRATA_IDEMPOTENCY_TTL_MS \(1000\) must be at least 10 times STRATA_IDEMPOTENCY_HOLD_MS \(10000\)/,
    );
    expect(loadConfig({ STRATA_IDEMPOTENCY_TTL_MS: '1000', STRATA_IDEMPOTENCY_HOLD_MS: '100' })).toMatchObject({
      idempotencyTtlMs: 1000,
      idempotencyHoldMs: 100,
    });
  });

  test('any integer setting round-trips, and anything that is not a whole number is refused by name', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (n) => {
        expect(loadConfig({ STRATA_SQL_MAX_ROWS: String(n) }).sqlMaxRows).toBe(n);
      }),
    );
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }).filter((s) => !/^\d+$/.test(s)),
        (raw) => {
          expect(() => loadConfig({ STRATA_SQL_TIMEOUT_MS: raw })).toThrow(/STRATA_SQL_TIMEOUT_MS/);
        },
      ),
    );
  });

  describe('SQL memory', () => {
    const GIB = 1024 ** 3;
    const machine = (gib: number) => ({ memoryBytes: gib * GIB });

    test('the node budget defaults to half the machine, and a database to 4 GiB or the budget when smaller', () => {
      expect(loadConfig({}, machine(24))).toMatchObject({ sqlNodeMemoryMb: 12 * 1024, sqlMemoryMb: 4096 });
      expect(loadConfig({}, machine(4))).toMatchObject({ sqlNodeMemoryMb: 2048, sqlMemoryMb: 2048 });
      expect(loadConfig({ STRATA_SQL_NODE_MEMORY_MB: '512' }, machine(24))).toMatchObject({
        sqlNodeMemoryMb: 512,
        sqlMemoryMb: 512,
      });
    });

    test('STRATA_SQL_NODE_MEMORY_MB is parsed, and refused below 64 MiB or above the machine', () => {
      const env = { STRATA_SQL_NODE_MEMORY_MB: '1000', STRATA_SQL_MEMORY_MB: '100' };
      expect(loadConfig(env, machine(8))).toMatchObject({ sqlNodeMemoryMb: 1000, sqlMemoryMb: 100 });
      expect(flagsToEnv(['--sql-node-memory-mb', '1000'])).toEqual({ STRATA_SQL_NODE_MEMORY_MB: '1000' });
      for (const raw of ['63', '0', '-1', '1.5', '1e3', 'half'])
        expect(() => loadConfig({ STRATA_SQL_NODE_MEMORY_MB: raw }, machine(8))).toThrow(
          /STRATA_SQL_NODE_MEMORY_MB must be an integer ≥ 64/,
        );
      expect(() => loadConfig({ STRATA_SQL_NODE_MEMORY_MB: '9000' }, machine(8))).toThrow(
        "STRATA_SQL_NODE_MEMORY_MB (9000) is more than this machine's memory (8192 MiB)",
      );
    });

    test("a database's limit above the node's budget refuses to start, naming both", () => {
      const env = { STRATA_SQL_MEMORY_MB: '4096', STRATA_SQL_NODE_MEMORY_MB: '2048' };
      expect(() => loadConfig(env, machine(24))).toThrow(ConfigError);
      expect(() => loadConfig(env, machine(24))).toThrow(
        /STRATA_SQL_MEMORY_MB \(4096, each database\) is more than STRATA_SQL_NODE_MEMORY_MB \(2048/,
      );
      // The default budget counts too: 4 GiB for one database is more than half of a 6 GiB machine.
      expect(() => loadConfig({ STRATA_SQL_MEMORY_MB: '4096' }, machine(6))).toThrow(
        /STRATA_SQL_NODE_MEMORY_MB \(3072/,
      );
      expect(
        loadConfig({ STRATA_SQL_MEMORY_MB: '2048', STRATA_SQL_NODE_MEMORY_MB: '2048' }, machine(24)),
      ).toMatchObject({
        sqlMemoryMb: 2048,
        sqlNodeMemoryMb: 2048,
      });
    });
  });

  test('a malformed bootstrap key is refused before anything starts', () => {
    expect(() => loadConfig({ STRATA_BOOTSTRAP_KEY: 'short' })).toThrow(ConfigError);
  });

  test('every flag mirrors its variable, as --flag value or --flag=value', () => {
    const flags = ['host', 'port', 'data-dir', 'max-active-databases', 'sql-timeout-ms', 'local-storage'];
    fc.assert(
      fc.property(fc.constantFrom(...flags), fc.string({ minLength: 1 }), fc.boolean(), (flag, value, inline) => {
        const env = flagsToEnv(inline ? [`--${flag}=${value}`] : [`--${flag}`, value]);
        expect(env).toEqual({ [`STRATA_${flag.toUpperCase().replaceAll('-', '_')}`]: value });
      }),
    );
    expect(() => flagsToEnv(['--port'])).toThrow(/--port needs a value/);
  });
});

describe('keys', () => {
  test('new keys have the documented shape and distinct hashes', () => {
    const secrets = Array.from({ length: 200 }, newSecret);
    for (const secret of secrets) expect(secret).toMatch(KEY_PATTERN);
    expect(new Set(secrets.map(hashKey)).size).toBe(200);
    expect(hashKey(secrets[0] ?? '')).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('prefixes', () => {
  const segment = fc.stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,11}$/).filter((s) => s !== '.' && s !== '..');

  test('any /-joined safe segments parse back unchanged, with or without surrounding slashes', () => {
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 6 }), fc.boolean(), (parts, slashes) => {
        const prefix = slashes ? `/${parts.join('/')}/` : parts.join('/');
        expect(prefixSegments(prefix)).toEqual(parts);
      }),
    );
  });

  test('a prefix with a "..", "." or empty part anywhere is refused', () => {
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 4 }), fc.constantFrom('..', '.', ''), fc.nat(4), (parts, bad, at) => {
        const withBad = [...parts.slice(0, at), bad, ...parts.slice(at), 'end'];
        expect(() => prefixSegments(`start/${withBad.join('/')}`)).toThrow(/storage binding refused: prefix/);
      }),
    );
  });
});
