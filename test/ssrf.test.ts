import type { LookupAddress, LookupOptions } from 'node:dns';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { AwsConfig } from '../src/config.js';
import type { Binding } from '../src/storage/binding.js';
import { addressRefusal, endpointRefusal, pinnedLookup, type Resolver } from '../src/storage/endpoint.js';
import { asRemoteStorageError, ENDPOINT_UNREACHABLE } from '../src/storage/objects.js';
import { openObjects, type StorageEnv } from '../src/storage/open.js';
import { S3Objects } from '../src/storage/s3.js';
import { verifyObjects } from '../src/storage/verify.js';

type V4 = readonly [number, number, number, number];

const dotted = (v4: V4): string => v4.join('.');
const high = (v4: V4): number => (v4[0] << 8) | v4[1];
const low = (v4: V4): number => (v4[2] << 8) | v4[3];
const hex = (n: number): string => n.toString(16);

/** Every way an IPv6 address carries an IPv4 address, each built around `v4`. */
const EMBEDDINGS: Readonly<Record<string, (v4: V4) => string>> = {
  'IPv4-mapped': (v4) => `::ffff:${dotted(v4)}`,
  'IPv4-mapped, in hex': (v4) => `::ffff:${hex(high(v4))}:${hex(low(v4))}`,
  'IPv4-compatible': (v4) => `::${dotted(v4)}`,
  'IPv4-compatible, in hex': (v4) => `::${hex(high(v4))}:${hex(low(v4))}`,
  'IPv4-translated (SIIT)': (v4) => `::ffff:0:${dotted(v4)}`,
  'NAT64 well-known prefix': (v4) => `64:ff9b::${dotted(v4)}`,
  'NAT64 local-use prefix': (v4) => `64:ff9b:1::${dotted(v4)}`,
  '6to4': (v4) => `2002:${hex(high(v4))}:${hex(low(v4))}:1::1`,
  'Teredo (client address)': (v4) => `2001:0:4136:e378:8000:63bf:${hex(high(v4) ^ 0xffff)}:${hex(low(v4) ^ 0xffff)}`,
  'Teredo (server address)': (v4) => `2001:0:${hex(high(v4))}:${hex(low(v4))}:8000:63bf:3fff:fdd2`,
  ISATAP: (v4) => `2600:1f18:1234:5678:0:5efe:${dotted(v4)}`,
  'ISATAP, universal bit set': (v4) => `2600:1f18:1234:5678:200:5efe:${dotted(v4)}`,
};

const octet = fc.integer({ min: 0, max: 255 });
const v4In = (first: number, second: fc.Arbitrary<number> = octet): fc.Arbitrary<V4> =>
  fc.tuple(fc.constant(first), second, octet, octet);
const internalV4: fc.Arbitrary<V4> = fc.oneof(
  v4In(127),
  v4In(10),
  v4In(172, fc.integer({ min: 16, max: 31 })),
  v4In(192, fc.constant(168)),
  v4In(169, fc.constant(254)),
  v4In(100, fc.integer({ min: 64, max: 127 })),
  v4In(0),
);
const publicV4: fc.Arbitrary<V4> = fc
  .tuple(octet, octet, octet, octet)
  .filter((v4) => ipaddr.parse(dotted(v4)).range() === 'unicast');

describe('IPv6 addresses are judged by the IPv4 address they carry', () => {
  test.each(Object.entries(EMBEDDINGS))('%s of a loopback, private or metadata address is refused', (_, embed) => {
    for (const v4 of [
      [127, 0, 0, 1],
      [10, 0, 0, 5],
      [169, 254, 169, 254],
    ] as const) {
      expect(addressRefusal(embed(v4)), embed(v4)).toBeDefined();
    }
  });

  test('every embedding of every loopback, private, link-local, CGNAT and unspecified address is refused (property)', () => {
    fc.assert(
      fc.property(internalV4, fc.constantFrom(...Object.keys(EMBEDDINGS)), (v4, form) => {
        const address = EMBEDDINGS[form]?.(v4) ?? '';
        expect(ipaddr.IPv6.isValid(address)).toBe(true);
        expect(addressRefusal(address), address).toBeDefined();
      }),
      { numRuns: 500 },
    );
  });

  test('a public address passes plainly, IPv4-mapped, through the well-known NAT64 prefix and in ISATAP (property)', () => {
    fc.assert(
      fc.property(publicV4, (v4) => {
        for (const address of [
          dotted(v4),
          EMBEDDINGS['IPv4-mapped']?.(v4),
          EMBEDDINGS['NAT64 well-known prefix']?.(v4),
          EMBEDDINGS.ISATAP?.(v4),
        ]) {
          expect(addressRefusal(address ?? ''), address).toBeUndefined();
        }
      }),
    );
  });

  test('the embeddings that are not globally routable are refused whatever they carry (property)', () => {
    const unroutable = ['IPv4-compatible', 'IPv4-translated (SIIT)', 'NAT64 local-use prefix', '6to4'];
    fc.assert(
      fc.property(publicV4, fc.constantFrom(...unroutable), (v4, form) => {
        expect(addressRefusal(EMBEDDINGS[form]?.(v4) ?? '')).toBeDefined();
      }),
    );
    expect(addressRefusal('2001:0:4136:e378:8000:63bf:cb27:ab55')).toMatch(/teredo/);
  });

  test('an address is judged alike in any spelling: as written, and as the URL parser canonicalises it (property)', () => {
    const canonical = (address: string) => new URL(`https://[${address}]`).hostname.slice(1, -1);
    fc.assert(
      fc.property(fc.oneof(internalV4, publicV4), fc.constantFrom(...Object.keys(EMBEDDINGS)), (v4, form) => {
        const address = EMBEDDINGS[form]?.(v4) ?? '';
        expect(addressRefusal(address)).toBe(addressRefusal(canonical(address)));
      }),
      { numRuns: 500 },
    );
    // ipaddr.js alone would read this as the IPv4-mapped ::ffff:1.0.0.0 and let it pass.
    expect(addressRefusal('::1.0.0.0')).toMatch(/outside the global unicast space/);
  });

  test.each([
    ['::7f00:1', /IPv4-compatible IPv6 address carrying a loopback address/],
    ['::ffff:a00:5', /IPv4-mapped IPv6 address carrying a private address/],
    ['64:ff9b::a9fe:a9fe', /NAT64 IPv6 address carrying a linkLocal address/],
    ['2002:c0a8:101::1', /6to4 IPv6 address carrying a private address/],
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', /Teredo client IPv6 address carrying a loopback address/],
    ['2600::5efe:a00:1', /ISATAP IPv6 address carrying a private address/],
    ['::1', /^a loopback IPv6 address$/],
    ['::', /^an unspecified IPv6 address$/],
    ['::1:0:0:1', /outside the global unicast space/],
    ['fe80::1', /linkLocal IPv6 address/],
  ])('%s is refused as %s', (address, reason) => {
    expect(addressRefusal(address)).toMatch(reason);
  });

  test('a global unicast IPv6 address passes', () => {
    expect(addressRefusal('2600:1f18:4000::1')).toBeUndefined();
    expect(addressRefusal('2a05:d018::1')).toBeUndefined();
  });
});

describe('a numeric host name is judged as the address it spells', () => {
  let resolved = 0;
  const publicResolver: Resolver = async () => {
    resolved += 1;
    return ['52.216.0.1'];
  };

  test.each([
    ['a decimal integer', 'https://2130706433'],
    ['hex octets, two parts', 'https://0x7f.1'],
    ['an octal integer', 'https://017700000001'],
    ['a hex integer', 'https://0x7f000001'],
    ['a short dotted form', 'https://127.1'],
    ['octal octets', 'https://0177.0.0.01'],
    ['a trailing dot', 'https://127.0.0.1.'],
    ['the metadata address in hex', 'https://0xa9.0xfe.0xa9.0xfe'],
    ['a private address as an integer', 'https://167772161:9000'],
    ['IPv4-compatible IPv6', 'https://[::127.0.0.1]'],
    ['IPv4-compatible IPv6, in hex', 'https://[::7f00:1]'],
    ['IPv4-mapped IPv6, in full', 'https://[0:0:0:0:0:ffff:127.0.0.1]'],
    ['NAT64', 'https://[64:ff9b::10.0.0.1]'],
    ['6to4', 'https://[2002:7f00:1::]'],
    ['Teredo', 'https://[2001:0:4136:e378:8000:63bf:80ff:fffe]'],
    ['ISATAP', 'https://[2600:1f18::5efe:169.254.169.254]'],
  ])('%s (%s) is refused without being resolved', async (_, endpoint) => {
    resolved = 0;

    const refusal = await endpointRefusal(endpoint, false, publicResolver);

    expect(refusal).toMatch(/ is (a|an) /);
    expect(resolved).toBe(0);
  });

  test('a resolver answer that is not a strict IP spelling is refused, never reinterpreted', async () => {
    for (const answer of ['2130706433', '0x7f.1', '127.1', 'localhost']) {
      expect(await endpointRefusal('https://bucket.example', false, async () => [answer])).toMatch(/not an IP address/);
    }
  });

  test("a refusal of a host name names the kind of address, never the address (no map of the server's DNS)", async () => {
    const refusal = await endpointRefusal('https://db.internal.example', false, async () => ['10.20.30.40']);

    expect(refusal).toBe('its host "db.internal.example" resolves to a private address');
  });
});

/** Calls a lookup function the way `net.connect` does. */
const lookUp = (resolve: Resolver, allowInsecure: boolean, options: LookupOptions) =>
  new Promise<{ address: string | LookupAddress[]; family?: number }>((done, fail) => {
    pinnedLookup(resolve, allowInsecure)('bucket.example', options, (err, address, family) =>
      err === null ? done({ address, family }) : fail(err),
    );
  });

describe('the lookup sockets use', () => {
  test('hands over only checked addresses, in the shape net.connect asks for', async () => {
    const both: Resolver = async () => ['52.216.0.1', '2600:1f18::1'];

    expect(await lookUp(both, false, {})).toEqual({ address: '52.216.0.1', family: 4 });
    expect(await lookUp(both, false, { family: 6 })).toEqual({ address: '2600:1f18::1', family: 6 });
    expect(await lookUp(both, false, { all: true })).toEqual({
      address: [
        { address: '52.216.0.1', family: 4 },
        { address: '2600:1f18::1', family: 6 },
      ],
    });
    await expect(lookUp(async () => ['52.216.0.1'], false, { family: 6 })).rejects.toMatchObject({
      code: 'ENOTFOUND',
    });
  });

  test('refuses the whole host when any answer is internal', async () => {
    for (const answers of [['127.0.0.1'], ['52.216.0.1', '10.0.0.5'], ['::ffff:127.0.0.1'], ['64:ff9b::7f00:1']]) {
      await expect(lookUp(async () => answers, false, { all: true })).rejects.toMatchObject({
        code: 'EndpointRefused',
      });
    }
  });

  test('with insecure endpoints allowed (tests against a local S3 server) uses the answer unchecked', async () => {
    expect(await lookUp(async () => ['127.0.0.1'], true, {})).toEqual({ address: '127.0.0.1', family: 4 });
  });
});

/** A TCP server on 127.0.0.1 that counts connections and hangs up on each at once. */
interface Trap {
  port: number;
  connections: number;
  close(): Promise<void>;
}

async function startTrap(): Promise<Trap> {
  const trap = { port: 0, connections: 0, close: async () => {} };
  const server: Server = createServer((socket) => {
    trap.connections += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  trap.port = address.port;
  trap.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return trap;
}

const aws: AwsConfig = {
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'not-a-secret',
  sessionToken: undefined,
  stsEndpoint: undefined,
  stsRegion: 'us-east-1',
};

const bindingAt = (endpoint: string): Binding => ({
  provider: 's3',
  bucket: 'bucket',
  region: 'us-east-1',
  endpoint,
  prefix: 'tenant',
  roleArn: null,
  externalId: '',
  requesterPays: false,
});

const envWith = (resolve: Resolver, allowInsecureEndpoints = false): StorageEnv => ({
  dataDir: tmpdir(),
  aws,
  policy: { localStorage: false, allowInsecureEndpoints, allowServerIdentity: true, resolve },
});

describe('DNS rebinding against the S3 client', () => {
  let trap: Trap;
  beforeAll(async () => {
    trap = await startTrap();
  });
  afterAll(() => trap?.close());

  test('a host that answers public to the check and 127.0.0.1 afterwards is never connected to', async () => {
    const answers: string[] = [];
    const rebinding: Resolver = async () => {
      const answer = answers.length === 0 ? '52.216.0.1' : '127.0.0.1';
      answers.push(answer);
      return [answer];
    };
    const before = trap.connections;

    const store = await openObjects(bindingAt(`https://rebind.test:${trap.port}`), envWith(rebinding), 'strata-t');
    const outcome = await verifyObjects(store);

    expect(outcome).toMatchObject({
      ok: false,
      step: 'put',
      code: 'EndpointUnreachable',
      message: ENDPOINT_UNREACHABLE,
    });
    // The open checked the public answer; the client resolved again through the same resolver, and was refused.
    expect(answers[0]).toBe('52.216.0.1');
    expect(answers.length).toBeGreaterThan(1);
    expect(trap.connections - before).toBe(0);
  });

  test('control: the S3 client really connects where the injected resolver points (so zero above means refused)', async () => {
    const before = trap.connections;

    const store = await openObjects(
      bindingAt(`https://rebind.test:${trap.port}`),
      envWith(async () => ['127.0.0.1'], true),
      'strata-t',
    );
    const outcome = await verifyObjects(store);

    expect(trap.connections - before).toBeGreaterThan(0);
    // A connection hung up during the TLS handshake is reported as the same fixed sentence.
    expect(outcome).toMatchObject({ ok: false, step: 'put', code: 'EndpointUnreachable' });
  });
});

describe('an endpoint that accepts and never answers', () => {
  test('fails the request once the socket stays silent, as the fixed sentence, rather than holding it for good', async () => {
    const sockets: Socket[] = [];
    const server: Server = createServer((socket) => {
      sockets.push(socket);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const store = new S3Objects(
        bindingAt(`http://silent.test:${port}`) as Extract<Binding, { provider: 's3' }>,
        async () => ({ accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'not-a-secret' }),
        { resolve: async () => ['127.0.0.1'], allowInsecureEndpoints: true },
        { connectMs: 1_000, silentMs: 300 },
      );
      const started = Date.now();
      const outcome = await verifyObjects(store);
      expect(outcome).toMatchObject({ ok: false, step: 'put', code: 'EndpointUnreachable' });
      // Two attempts of 0.3 s each, not the test's timeout.
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(sockets.length).toBeGreaterThan(0);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('an endpoint that ignores Range', () => {
  /** Answers every GET with `size` bytes and status 200, whatever range was asked; counts the bytes it got out. */
  async function wholeObjects(size: number, withLength: boolean) {
    const sent = { bytes: 0, ranges: [] as string[] };
    const chunk = Buffer.alloc(64 * 1024, 7);
    const server: HttpServer = createHttpServer((req, res) => {
      sent.ranges.push(req.headers.range ?? '');
      res.writeHead(200, withLength ? { 'content-length': String(size) } : {});
      const more = () => {
        while (sent.bytes < size) {
          sent.bytes += chunk.byteLength;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      res.on('close', () => res.removeAllListeners('drain'));
      more();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const store = new S3Objects(
      bindingAt(`http://whole.test:${port}`) as Extract<Binding, { provider: 's3' }>,
      async () => ({ accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'not-a-secret' }),
      { resolve: async () => ['127.0.0.1'], allowInsecureEndpoints: true },
    );
    const close = () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    };
    return { store, sent, close };
  }

  test.each([
    ['with its length', true],
    ['streamed without a length', false],
  ])(
    'a bounded read of a 256 MB object %s is refused as too large after little of it was read',
    async (_, withLength) => {
      const size = 256 * 1024 * 1024;
      const { store, sent, close } = await wholeObjects(size, withLength);
      try {
        await expect(store.get('kept/statistics', 1_000_000)).rejects.toMatchObject({ code: 'TooLarge' });
        expect(sent.ranges[0]).toBe('bytes=0-1000000');
        // The reply was cut off: far less than the object left the endpoint (socket buffers hold a few MB at most).
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(sent.bytes).toBeLessThan(size / 8);
      } finally {
        await close();
      }
    },
  );

  test('a bounded read of an object within the bound answers it whole', async () => {
    const { store, close } = await wholeObjects(3 * 64 * 1024, false);
    try {
      const bytes = await store.get('kept/statistics', 1_000_000);
      expect(bytes).toEqual(new Uint8Array(3 * 64 * 1024).fill(7));
    } finally {
      await close();
    }
  });
});

describe('verification is no oracle for the network', () => {
  test.each([
    ['a refused connection', Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:443'), { code: 'ECONNREFUSED' })],
    ['a DNS failure', Object.assign(new Error('getaddrinfo ENOTFOUND db.corp.internal'), { code: 'ENOTFOUND' })],
    [
      'a TLS failure',
      Object.assign(
        new Error("Hostname/IP does not match certificate's altnames: Host: a. is not in the cert's altnames"),
        {
          code: 'ERR_TLS_CERT_ALTNAME_INVALID',
        },
      ),
    ],
    ['a hang-up', Object.assign(new Error('socket hang up'), { code: 'ECONNRESET', $metadata: { attempts: 2 } })],
    ['a timeout', Object.assign(new Error('Connection timed out after 1000 ms'), { name: 'TimeoutError' })],
  ])('%s is reported as the fixed sentence', (_, err) => {
    expect(asRemoteStorageError(err)).toMatchObject({ code: 'EndpointUnreachable', message: ENDPOINT_UNREACHABLE });
  });

  test('a reply of the provider keeps its code and message', () => {
    const denied = Object.assign(new Error('Access Denied'), {
      name: 'AccessDenied',
      Code: 'AccessDenied',
      $metadata: { httpStatusCode: 403 },
    });

    expect(asRemoteStorageError(denied)).toMatchObject({ code: 'AccessDenied', message: 'Access Denied' });
  });
});
