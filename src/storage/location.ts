import type { Binding } from './binding.js';

/**
 * Where a binding's objects live, in a form two bindings can be compared in: a location belongs to one
 * database, and no other database of any account may bind it or a location inside or around it (docs/api.md).
 */
export interface StorageLocation {
  provider: Binding['provider'];
  /** The service the bucket lives in: `aws` for AWS S3 whatever its endpoint spelling, else the endpoint's origin. */
  service: string;
  bucket: string;
  prefix: readonly string[];
}

/** AWS S3 bucket names are global across its regional endpoints, so every AWS endpoint is one service. */
function serviceOf(endpoint: string | null): string {
  if (endpoint === null) return 'aws';
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return endpoint.toLowerCase();
  }
  const host = url.hostname.toLowerCase().replace(/\.$/, '');
  if (host === 'amazonaws.com' || host.endsWith('.amazonaws.com')) return 'aws';
  // The origin without a trailing dot and with its port spelled out: `https://h.` and `https://h:443` are `https://h`.
  const port = url.port === '' ? (url.protocol === 'http:' ? '80' : '443') : url.port;
  return `${url.protocol}//${host}:${port}`;
}

export function locationOf(binding: Binding): StorageLocation {
  const prefix = binding.prefix === '' ? [] : binding.prefix.split('/');
  // Folder and bucket names are compared without case: a case-insensitive filesystem or store would merge them.
  const bucket = binding.bucket.toLowerCase();
  if (binding.provider === 'local') return { provider: 'local', service: '', bucket, prefix };
  return { provider: 's3', service: serviceOf(binding.endpoint), bucket, prefix };
}

/** Whether two locations share any object: same bucket of the same service, one prefix inside the other. */
export function overlaps(a: StorageLocation, b: StorageLocation): boolean {
  if (a.provider !== b.provider || a.service !== b.service || a.bucket !== b.bucket) return false;
  const shorter = a.prefix.length <= b.prefix.length ? a.prefix : b.prefix;
  const longer = shorter === a.prefix ? b.prefix : a.prefix;
  return shorter.every((segment, i) => segment === longer[i]);
}

/** How a location is named in a refusal, without the server's own paths. */
export function describeLocation(location: StorageLocation): string {
  const where = location.provider === 'local' ? 'local folder' : `bucket (${location.service})`;
  const prefix = location.prefix.length === 0 ? '' : ` under prefix "${location.prefix.join('/')}"`;
  return `${where} "${location.bucket}"${prefix}`;
}
