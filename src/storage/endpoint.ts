import type { LookupAddress, LookupOptions } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

export type Resolver = (host: string) => Promise<readonly string[]>;

export const systemResolver: Resolver = async (host) =>
  (await lookup(host, { all: true })).map((entry) => entry.address);

type IPv4 = ipaddr.IPv4;
type IPv6 = ipaddr.IPv6;

/** The IPv6 forms that carry an IPv4 address, and where it sits in them. */
interface Embedding {
  form: string;
  v4: IPv4;
}

const v4Of = (high: number, low: number): IPv4 => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);

const GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3') as [IPv6, number];
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96') as [IPv6, number];
const NAT64_LOCAL = ipaddr.parseCIDR('64:ff9b:1::/48') as [IPv6, number];
const SIIT = ipaddr.parseCIDR('::ffff:0:0:0/96') as [IPv6, number];
const SIX_TO_FOUR = ipaddr.parseCIDR('2002::/16') as [IPv6, number];
const TEREDO = ipaddr.parseCIDR('2001::/32') as [IPv6, number];

/**
 * Every IPv4 address an IPv6 address carries by a known transition scheme. Such an address may reach the IPv4
 * address it carries (through the host's own stack, a translator or a tunnel), so it is judged by it too.
 */
function embeddedIPv4(address: IPv6): Embedding[] {
  const p = address.parts as [number, number, number, number, number, number, number, number];
  const last = v4Of(p[6], p[7]);
  const found: Embedding[] = [];
  if (address.isIPv4MappedAddress()) found.push({ form: 'IPv4-mapped', v4: last });
  // ::/96 less :: and ::1, which are the unspecified and loopback addresses themselves.
  if (p.slice(0, 6).every((part) => part === 0) && (p[6] !== 0 || p[7] > 1)) {
    found.push({ form: 'IPv4-compatible', v4: last });
  }
  if (address.match(SIIT)) found.push({ form: 'IPv4-translated', v4: last });
  // RFC 6052 allows other prefix lengths inside 64:ff9b:1::/48; the /96 layout is the one in use, and the
  // local-use prefix is refused whatever it carries (it is not globally routable).
  if (address.match(NAT64_WELL_KNOWN) || address.match(NAT64_LOCAL)) found.push({ form: 'NAT64', v4: last });
  if (address.match(SIX_TO_FOUR)) found.push({ form: '6to4', v4: v4Of(p[1], p[2]) });
  if (address.match(TEREDO)) {
    found.push({ form: 'Teredo server', v4: v4Of(p[2], p[3]) });
    found.push({ form: 'Teredo client', v4: v4Of(p[6] ^ 0xffff, p[7] ^ 0xffff) });
  }
  // ISATAP interface identifier: 0000:5efe (or with the universal/group bits, 0200:5efe …) then the IPv4 address.
  if ((p[4] & 0xfcff) === 0 && p[5] === 0x5efe) found.push({ form: 'ISATAP', v4: last });
  return found;
}

const article = (word: string): string => (/^[aeiou]/i.test(word) ? `an ${word}` : `a ${word}`);

/** Why an IPv4 address is refused; only public unicast passes. */
function v4Refusal(address: IPv4): string | undefined {
  const range = address.range();
  return range === 'unicast' ? undefined : `${article(range)} address`;
}

function v6Refusal(address: IPv6): string | undefined {
  for (const { form, v4 } of embeddedIPv4(address)) {
    const refusal = v4Refusal(v4);
    if (refusal !== undefined) return `an ${form} IPv6 address carrying ${refusal}`;
  }
  // Carriers of a public IPv4 address that the host or a translator really delivers to that address.
  if (address.isIPv4MappedAddress() || address.match(NAT64_WELL_KNOWN)) return undefined;
  const range = address.range();
  if (range !== 'unicast') return `${article(range)} IPv6 address`;
  // ipaddr.js calls everything outside its special ranges "unicast", including reserved space such as the
  // deprecated IPv4-compatible ::/96; only 2000::/3 is allocated for global unicast.
  if (!address.match(GLOBAL_UNICAST)) return 'an IPv6 address outside the global unicast space (2000::/3)';
  return undefined;
}

/**
 * What is wrong with an address, as a phrase (`a loopback address`), or undefined when it is public unicast.
 * Only strict IP spellings count as addresses (`net.isIP`): numeric forms such as `0x7f.1` are host names,
 * resolved like any other, so they are judged by the addresses they resolve to.
 */
export function addressRefusal(address: string): string | undefined {
  const family = isIP(address);
  if (family === 0) return 'not an IP address';
  return family === 4 ? v4Refusal(ipaddr.IPv4.parse(address)) : v6Refusal(parseIPv6(address));
}

const DOTTED_TAIL = /^(.*:)(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/**
 * Parses an IPv6 address as a socket reads it. ipaddr.js reads `::a.b.c.d` as `::ffff:a.b.c.d` (mapped),
 * where the socket connects to the IPv4-compatible `::a.b.c.d`; so a dotted tail is rewritten as two hextets
 * first. A zone (`%eth0`) names a link, not an address, and is dropped.
 */
function parseIPv6(address: string): IPv6 {
  const bare = address.split('%')[0] ?? address;
  const tail = DOTTED_TAIL.exec(bare);
  if (tail === null) return ipaddr.IPv6.parse(bare);
  const [a, b, c, d] = tail.slice(2).map(Number) as [number, number, number, number];
  return ipaddr.IPv6.parse(`${tail[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`);
}

/** A host whose addresses are not all public unicast; the message never names what a host name resolved to. */
export class EndpointRefused extends Error {
  readonly code = 'EndpointRefused';
}

/**
 * The addresses of `host`, every one of them checked. A name is refused when any address it resolves to is
 * refused: a resolver may hand out any one of them to the next connection. The message names the kind of
 * address but not the address, so refusals do not map the server's own DNS.
 */
async function checkedAddresses(host: string, resolve: Resolver): Promise<string[]> {
  if (isIP(host) !== 0) {
    const refusal = addressRefusal(host);
    if (refusal !== undefined) throw new EndpointRefused(`${host} is ${refusal}`);
    return [host];
  }
  let addresses: readonly string[];
  try {
    addresses = await resolve(host);
  } catch {
    throw new EndpointRefused(`its host "${host}" does not resolve`);
  }
  if (addresses.length === 0) throw new EndpointRefused(`its host "${host}" does not resolve`);
  for (const address of addresses) {
    const refusal = addressRefusal(address);
    if (refusal !== undefined) throw new EndpointRefused(`its host "${host}" resolves to ${refusal}`);
  }
  return [...addresses];
}

/** The host of a URL as a connection sees it: WHATWG-canonical (`0x7f.1` is `127.0.0.1`), IPv6 unbracketed. */
const hostOf = (url: URL): string => url.hostname.replace(/^\[(.*)\]$/, '$1');

/**
 * Checks a customer-supplied S3 endpoint so it can never point the server at its own network: `https` only,
 * no credentials or query in the URL, and every address the host resolves to must be public unicast.
 * With `allowInsecure` (tests against a local S3 server) only the URL shape is checked.
 * Returns the refusal reason, or undefined when the endpoint is acceptable.
 *
 * A check alone does not stop DNS rebinding (a public answer now, 127.0.0.1 at connect): whoever connects
 * must do so through `pinnedLookup`, which checks the very answer the socket uses.
 */
export async function endpointRefusal(
  raw: string,
  allowInsecure: boolean,
  resolve: Resolver = systemResolver,
): Promise<string | undefined> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'it is not a valid URL';
  }
  if (url.protocol !== 'https:' && !(allowInsecure && url.protocol === 'http:')) return 'it must use https://';
  if (url.username !== '' || url.password !== '') return 'it must not carry credentials';
  if (url.search !== '' || url.hash !== '') return 'it must not carry a query or fragment';
  // A path would be put before every key: another bucket (or another bucket's prefix) in disguise.
  if (url.pathname !== '/' && url.pathname !== '')
    return 'it must not carry a path; give the bucket and prefix instead';
  const host = url.hostname.toLowerCase().replace(/\.$/, '');
  // A virtual-hosted AWS name (`<bucket>.s3.<region>.amazonaws.com`) names a bucket itself.
  if (/\.amazonaws\.com$/.test(host) && !/^s3[.-]/.test(host)) {
    return 'it names a bucket host; leave the endpoint out for AWS S3 (or give its service endpoint) and name the bucket in "bucket"';
  }
  if (allowInsecure) return undefined;
  try {
    await checkedAddresses(hostOf(url), resolve);
    return undefined;
  } catch (err) {
    if (err instanceof EndpointRefused) return err.message;
    throw err;
  }
}

const familyOf = (family: LookupOptions['family']): 0 | 4 | 6 =>
  family === 4 || family === 'IPv4' ? 4 : family === 6 || family === 'IPv6' ? 6 : 0;

/**
 * A `lookup` for sockets (`net.connect`, http/https Agents) that resolves through `resolve` and hands the
 * socket only addresses that pass `checkedAddresses`, so the check and the connection use the same answer.
 * TLS still verifies the certificate against the host name (the Agent sets SNI from it). With `allowInsecure`
 * the answer is used unchecked, as `endpointRefusal` does. Sockets to an IP literal never call `lookup`;
 * literals are judged where the endpoint is checked, and cannot change.
 */
export function pinnedLookup(resolve: Resolver, allowInsecure: boolean): LookupFunction {
  return (hostname, options, callback) => {
    const answer = async () => (allowInsecure ? [...(await resolve(hostname))] : checkedAddresses(hostname, resolve));
    answer().then(
      (addresses) => {
        const family = familyOf(options.family);
        const usable: LookupAddress[] = addresses
          .map((address) => ({ address, family: isIP(address) }))
          .filter((entry) => entry.family !== 0 && (family === 0 || entry.family === family));
        const first = usable[0];
        // Called on the next tick so a throwing callback is an uncaught exception, as with dns.lookup, rather
        // than a rejection of this promise.
        if (first === undefined) {
          const err = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
          process.nextTick(() => callback(err, ''));
        } else if (options.all === true) process.nextTick(() => callback(null, usable));
        else process.nextTick(() => callback(null, first.address, first.family));
      },
      (err: unknown) => {
        const failure = err instanceof Error ? err : new Error(String(err));
        process.nextTick(() => callback(failure, ''));
      },
    );
  };
}
