import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { addressRefusal, endpointRefusal } from '../src/storage/endpoint.js';
import { serveFile } from './support/server.js';

/** Every binding names a role: the server's own identity is not lent to accounts (tested in s3.test.ts). */
const ROLE = 'arn:aws:iam::123456789012:role/strata';

const { api } = serveFile();

describe('storage endpoints never point the server at its own network', () => {
  test.each([
    ['loopback IPv4', 'https://127.0.0.1:9000'],
    ['loopback IPv6', 'https://[::1]:9000'],
    ['the cloud metadata address', 'https://169.254.169.254'],
    ['a private address', 'https://10.0.0.1'],
    ['a hostname resolving to loopback', 'https://localhost:9000'],
    ['an IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]'],
    ['an IPv4-compatible loopback', 'https://[::127.0.0.1]'],
    ['an IPv4-compatible loopback in hex', 'https://[::7f00:1]'],
    ['loopback as a decimal integer', 'https://2130706433'],
    ['loopback in hex', 'https://0x7f.1'],
    ['loopback as an octal integer', 'https://017700000001'],
    ['the metadata address through NAT64', 'https://[64:ff9b::169.254.169.254]'],
    ['the unspecified address', 'https://0.0.0.0'],
    ['a unique-local IPv6', 'https://[fd00::1]'],
    ['plain http to a public host', 'http://s3.amazonaws.com'],
    ['not a URL', 'not a url'],
    ['credentials in the URL', 'https://user:pw@s3.amazonaws.com'],
    ['a path, which would stand for a bucket', 'https://52.216.0.1/other-bucket'],
    ['a virtual-hosted AWS bucket name', 'https://victim.s3.us-east-1.amazonaws.com'],
  ])('%s is refused with 422', async (_, endpoint) => {
    const res = await api.post('/v1/databases', {
      name: 'ssrf',
      storage: { provider: 's3', bucket: 'bucket', endpoint, role_arn: ROLE },
    });

    expect(res.status).toBe(422);
    expect(res.json.error).toMatch(/^storage binding refused: endpoint .* is not allowed/);
  });

  test('a public https endpoint given as an address is accepted', async () => {
    const res = await api.post('/v1/databases', {
      name: 'public-ip',
      storage: { provider: 's3', bucket: 'bucket', endpoint: 'https://52.216.0.1', role_arn: ROLE },
    });

    expect(res.status).toBe(201);
  });
});

describe('storage locations are spelled one way', () => {
  test.each([
    ['a bucket with a slash', { bucket: 'a/b' }],
    ['a bucket with upper case', { bucket: 'Bucket' }],
    ['a bucket with a query character', { bucket: 'b?x' }],
  ])('%s is 400 naming the S3 rule', async (_, storage) => {
    const res = await api.post('/v1/databases', {
      name: 'spelled',
      storage: { provider: 's3', endpoint: 'https://52.216.0.2', role_arn: ROLE, ...storage },
    });

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/body.storage.bucket must be an S3 bucket name/);
  });

  test('a prefix holding % ? or # is 422', async () => {
    for (const prefix of ['a/%2e%2e', 'a?b', 'a#b']) {
      const res = await api.post('/v1/databases', {
        name: 'spelled',
        storage: { provider: 's3', bucket: 'bucket', endpoint: 'https://52.216.0.2', role_arn: ROLE, prefix },
      });
      expect(res.status, prefix).toBe(422);
      expect(res.json.error).toMatch(/any of % \? #/);
    }
  });

  test('one endpoint spelled with a trailing dot or its default port is one location', async () => {
    const bind = (name: string, endpoint: string) =>
      api.post('/v1/databases', {
        name,
        storage: { provider: 's3', bucket: 'shared-bucket', endpoint, role_arn: ROLE, prefix: 'p' },
      });

    expect((await bind('first', 'https://52.216.0.3')).status).toBe(201);
    for (const endpoint of ['https://52.216.0.3:443', 'https://52.216.0.3./', 'HTTPS://52.216.0.3']) {
      const res = await bind('second', endpoint);
      expect(res.status, endpoint).toBe(409);
      expect(res.json.code).toBe('location_in_use');
    }
  });
});

const octet = fc.integer({ min: 0, max: 255 });
const ipv4 = (first: fc.Arbitrary<number>, second: fc.Arbitrary<number> = octet) =>
  fc.tuple(first, second, octet, octet).map((parts) => parts.join('.'));

describe('address classification (property)', () => {
  test('every loopback, private, link-local, CGNAT and unspecified IPv4 address is refused', () => {
    const internal = fc.oneof(
      ipv4(fc.constant(127)),
      ipv4(fc.constant(10)),
      ipv4(fc.constant(172), fc.integer({ min: 16, max: 31 })),
      ipv4(fc.constant(192), fc.constant(168)),
      ipv4(fc.constant(169), fc.constant(254)),
      ipv4(fc.constant(100), fc.integer({ min: 64, max: 127 })),
      ipv4(fc.constant(0)),
    );
    fc.assert(
      fc.property(internal, (address) => {
        expect(addressRefusal(address)).toBeDefined();
        expect(addressRefusal(`::ffff:${address}`)).toBeDefined();
      }),
    );
  });

  test('every unique-local and link-local IPv6 address is refused', () => {
    const hextet = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16));
    const rest = fc.array(hextet, { minLength: 7, maxLength: 7 });
    const uniqueLocal = fc.tuple(fc.integer({ min: 0xfc00, max: 0xfdff }), rest);
    const linkLocal = fc.tuple(fc.integer({ min: 0xfe80, max: 0xfebf }), rest);
    fc.assert(
      fc.property(fc.oneof(uniqueLocal, linkLocal), ([head, tail]) => {
        expect(addressRefusal([head.toString(16), ...tail].join(':'))).toBeDefined();
      }),
    );
  });

  test('a host is refused when any one of its addresses is internal', async () => {
    await fc.assert(
      fc.asyncProperty(fc.shuffledSubarray(['52.216.0.1', '3.5.0.1', '10.1.2.3'], { minLength: 1 }), async (addrs) => {
        const refusal = await endpointRefusal('https://bucket.example', false, async () => addrs);
        expect(refusal === undefined).toBe(!addrs.includes('10.1.2.3'));
      }),
    );
  });

  test('a host that does not resolve is refused', async () => {
    const refusal = await endpointRefusal('https://nowhere.invalid', false, async () => {
      throw new Error('ENOTFOUND');
    });

    expect(refusal).toMatch(/does not resolve/);
  });
});
