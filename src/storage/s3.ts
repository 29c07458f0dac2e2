import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { AwsConfig } from '../config.js';
import { type Binding, objectKey } from './binding.js';
import { assumeRoleCredentials, type CredentialsProvider, serverCredentials } from './credentials.js';
import { pinnedLookup, type Resolver, systemResolver } from './endpoint.js';
import { asRemoteStorageError, type ObjectStore, tooLarge } from './objects.js';

type S3Binding = Extract<Binding, { provider: 's3' }>;

/** The credentials a binding uses: the assumed role when it names one, else the server's own identity. */
export function bindingCredentials(
  binding: S3Binding,
  aws: AwsConfig,
  sessionName: string,
): CredentialsProvider | undefined {
  if (binding.roleArn !== null) {
    return assumeRoleCredentials({ roleArn: binding.roleArn, externalId: binding.externalId }, aws, sessionName);
  }
  const own = serverCredentials(aws);
  return own === undefined ? undefined : async () => own;
}

/** How an `S3Objects` may connect to a customer's endpoint: the endpoint rules of its `BindingPolicy`. */
export interface EndpointRules {
  resolve?: Resolver;
  allowInsecureEndpoints: boolean;
}

/**
 * How long a connection may take to open, and a socket may stay silent, before the request fails: an endpoint that
 * accepts and never answers would otherwise hold the request (a verification, a read) for good.
 */
export interface StoreTimeouts {
  connectMs: number;
  silentMs: number;
}
const TIMEOUTS: StoreTimeouts = { connectMs: 5_000, silentMs: 30_000 };

/**
 * An HTTP handler whose sockets connect only to addresses checked by the endpoint rules, resolved once per
 * connection through `resolve`: the address checked is the address connected to, so a rebinding resolver
 * (public for the check, 127.0.0.1 for the connection) gets nowhere. TLS verifies the host name as usual.
 */
function pinnedHandler(rules: EndpointRules, timeouts: StoreTimeouts): NodeHttpHandler {
  const lookup = pinnedLookup(rules.resolve ?? systemResolver, rules.allowInsecureEndpoints);
  // The SDK's own defaults for its agents.
  const agent = { keepAlive: true, maxSockets: 50, lookup };
  return new NodeHttpHandler({
    httpAgent: new HttpAgent(agent),
    httpsAgent: new HttpsAgent(agent),
    connectionTimeout: timeouts.connectMs,
    socketTimeout: timeouts.silentMs,
  });
}

export class S3Objects implements ObjectStore {
  private readonly client: S3Client;
  private readonly payer: { RequestPayer?: 'requester' };

  constructor(
    private readonly binding: S3Binding,
    credentials: CredentialsProvider | undefined,
    rules: EndpointRules,
    timeouts: StoreTimeouts = TIMEOUTS,
  ) {
    this.client = new S3Client({
      region: binding.region,
      maxAttempts: 2,
      // S3-compatible stores often lack the newer flexible checksums; send them only where S3 requires them.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // AWS's own endpoints are not pinned: the server's DNS may rightly resolve them to private addresses
      // (VPC endpoints), and their names are not the customer's to point anywhere.
      ...(binding.endpoint === null
        ? {
            requestHandler: new NodeHttpHandler({
              connectionTimeout: timeouts.connectMs,
              socketTimeout: timeouts.silentMs,
            }),
          }
        : { endpoint: binding.endpoint, forcePathStyle: true, requestHandler: pinnedHandler(rules, timeouts) }),
      ...(credentials === undefined ? {} : { credentials }),
    });
    this.payer = binding.requesterPays ? { RequestPayer: 'requester' } : {};
  }

  private async run<T>(op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (err) {
      throw asRemoteStorageError(err);
    }
  }

  private key(key: string): { Bucket: string; Key: string } {
    return { Bucket: this.binding.bucket, Key: objectKey(this.binding, key) };
  }

  async checkCredentials(): Promise<void> {
    await this.run(() => this.client.config.credentials());
  }

  async put(key: string, bytes: Uint8Array): Promise<void> {
    await this.run(() => this.client.send(new PutObjectCommand({ ...this.key(key), Body: bytes, ...this.payer })));
  }

  async get(key: string, maxBytes?: number): Promise<Uint8Array> {
    return this.run(async () => {
      // A range one byte past the bound: an object that fills it is too large, and no more of it is read.
      const range = maxBytes === undefined ? {} : { Range: `bytes=0-${maxBytes}` };
      const out = await this.client.send(new GetObjectCommand({ ...this.key(key), ...range, ...this.payer }));
      if (maxBytes === undefined) return (await out.Body?.transformToByteArray()) ?? new Uint8Array();
      return boundedBody(
        out.Body as (AsyncIterable<Uint8Array> & { destroy?(): void }) | undefined,
        out.ContentLength,
        key,
        maxBytes,
      );
    });
  }

  async list(prefix: string): Promise<string[]> {
    const full = objectKey(this.binding, prefix);
    const strip = this.binding.prefix === '' ? 0 : this.binding.prefix.length + 1;
    return this.run(async () => {
      const keys: string[] = [];
      let token: string | undefined;
      do {
        const out = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.binding.bucket,
            Prefix: full,
            ...(token === undefined ? {} : { ContinuationToken: token }),
            ...this.payer,
          }),
        );
        for (const item of out.Contents ?? []) if (item.Key !== undefined) keys.push(item.Key.slice(strip));
        token = out.IsTruncated ? out.NextContinuationToken : undefined;
      } while (token !== undefined);
      return keys;
    });
  }

  async putIfAbsent(key: string, bytes: Uint8Array): Promise<'refused' | 'written'> {
    try {
      await this.client.send(new PutObjectCommand({ ...this.key(key), Body: bytes, IfNoneMatch: '*', ...this.payer }));
      return 'written';
    } catch (err) {
      const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      if (status === 412 || status === 409) return 'refused';
      throw asRemoteStorageError(err);
    }
  }

  async delete(key: string): Promise<void> {
    await this.run(() => this.client.send(new DeleteObjectCommand({ ...this.key(key), ...this.payer })));
  }

  async deletePrefix(prefix: string): Promise<number> {
    const keys = await this.list(prefix);
    for (let i = 0; i < keys.length; i += 1000) {
      const batch = keys.slice(i, i + 1000).map((key) => ({ Key: objectKey(this.binding, key) }));
      await this.run(() =>
        this.client.send(
          new DeleteObjectsCommand({
            Bucket: this.binding.bucket,
            Delete: { Objects: batch, Quiet: true },
            ...this.payer,
          }),
        ),
      );
    }
    return keys.length;
  }
}

/**
 * A reply's body of at most `maxBytes`, read a chunk at a time: an S3-compatible store that ignores `Range` answers
 * the whole object, which is refused by its length or as soon as it runs past the bound, and the rest is not read
 * (leaving the loop destroys the stream).
 */
async function boundedBody(
  body: (AsyncIterable<Uint8Array> & { destroy?(): void }) | undefined,
  length: number | undefined,
  key: string,
  maxBytes: number,
): Promise<Uint8Array> {
  if (body === undefined) return new Uint8Array();
  if (length !== undefined && length > maxBytes) {
    body.destroy?.();
    throw tooLarge(key, maxBytes);
  }
  const chunks: Uint8Array[] = [];
  let read = 0;
  for await (const chunk of body) {
    read += chunk.byteLength;
    if (read > maxBytes) throw tooLarge(key, maxBytes);
    chunks.push(chunk);
  }
  const bytes = new Uint8Array(read);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}
