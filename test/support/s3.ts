import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';

const require = createRequire(import.meta.url);
/** s3rver's account registry: keys registered here are the ones its signature check accepts. */
const { DUMMY_ACCOUNT } = require('s3rver/lib/models/account.js') as {
  DUMMY_ACCOUNT: { createKeyPair(id: string, secret: string): void };
};

/** The access key s3rver accepts out of the box. */
export const S3RVER_KEY = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER' } as const;

export interface LocalS3 {
  endpoint: string;
  /** Makes s3rver accept another key pair (as a real account would after AssumeRole). */
  acceptKey(id: string, secret: string): void;
  close(): Promise<void>;
}

/** A real S3 protocol server on 127.0.0.1, storing into a temp folder. */
export async function startS3(buckets: string[]): Promise<LocalS3> {
  const directory = mkdtempSync(join(tmpdir(), 's3rver-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: buckets.map((name) => ({ name })),
  });
  const address = (await server.run()) as { port: number };
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    acceptKey: (id, secret) => DUMMY_ACCOUNT.createKeyPair(id, secret),
    async close() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
