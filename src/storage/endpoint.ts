import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';

export type Resolver = (host: string) => Promise<readonly string[]>;

const systemResolver: Resolver = async (host) => (await lookup(host, { all: true })).map((entry) => entry.address);

/** Why an endpoint is refused, or undefined when it may be used. Only public unicast addresses pass. */
export function addressRefusal(address: string): string | undefined {
  if (!ipaddr.isValid(address)) return `"${address}" is not an IP address`;
  // process() turns IPv4-mapped IPv6 (::ffff:127.0.0.1) into the IPv4 address it carries.
  const range = ipaddr.process(address).range();
  return range === 'unicast' ? undefined : `it resolves to ${address}, a ${range} address`;
}

/**
 * Checks a customer-supplied S3 endpoint so it can never point the server at its own network: `https` only,
 * no credentials or query in the URL, and every address the host resolves to must be public unicast.
 * With `allowInsecure` (tests against a local S3 server) only the URL shape is checked.
 * Returns the refusal reason, or undefined when the endpoint is acceptable.
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
  if (allowInsecure) return undefined;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: readonly string[];
  try {
    addresses = ipaddr.isValid(host) ? [host] : await resolve(host);
  } catch {
    return `its host "${host}" does not resolve`;
  }
  if (addresses.length === 0) return `its host "${host}" does not resolve`;
  for (const address of addresses) {
    const refusal = addressRefusal(address);
    if (refusal !== undefined) return refusal;
  }
  return undefined;
}
