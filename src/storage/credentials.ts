import { AssumeRoleCommand, STSClient } from '@aws-sdk/client-sts';
import type { AwsConfig } from '../config.js';
import { StorageError } from './objects.js';

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

export type CredentialsProvider = () => Promise<AwsCredentials>;

/** Role credentials are renewed this long before they expire, so no request ever carries stale ones. */
const REFRESH_MARGIN_MS = 5 * 60_000;

/** The server's own identity: explicit keys from the config, or undefined for the SDK's default chain. */
export function serverCredentials(aws: AwsConfig): AwsCredentials | undefined {
  if (aws.accessKeyId === undefined || aws.secretAccessKey === undefined) return undefined;
  return {
    accessKeyId: aws.accessKeyId,
    secretAccessKey: aws.secretAccessKey,
    ...(aws.sessionToken === undefined ? {} : { sessionToken: aws.sessionToken }),
  };
}

/** A customer's role and the external id its trust policy expects of this account. */
export interface AssumedRole {
  roleArn: string;
  /** '' (or missing, in bindings stored before external ids existed) sends no `ExternalId`. */
  externalId: string;
}

/**
 * Credentials of the role, assumed with the server's identity through STS (passing the account's `ExternalId`)
 * and cached until `REFRESH_MARGIN_MS` before expiry. Concurrent callers share one AssumeRole call.
 */
export function assumeRoleCredentials(
  { roleArn, externalId }: AssumedRole,
  aws: AwsConfig,
  sessionName: string,
): CredentialsProvider {
  const base = serverCredentials(aws);
  const sts = new STSClient({
    region: aws.stsRegion,
    maxAttempts: 2,
    ...(aws.stsEndpoint === undefined ? {} : { endpoint: aws.stsEndpoint }),
    ...(base === undefined ? {} : { credentials: base }),
  });
  let cached: AwsCredentials | undefined;
  let pending: Promise<AwsCredentials> | undefined;

  const assume = async (): Promise<AwsCredentials> => {
    const out = await sts.send(
      new AssumeRoleCommand({
        RoleArn: roleArn,
        RoleSessionName: sessionName,
        ...(externalId ? { ExternalId: externalId } : {}),
      }),
    );
    const c = out.Credentials;
    if (c?.AccessKeyId === undefined || c.SecretAccessKey === undefined) {
      throw new StorageError('InvalidAssumeRoleResponse', 'AssumeRole returned no credentials');
    }
    return {
      accessKeyId: c.AccessKeyId,
      secretAccessKey: c.SecretAccessKey,
      ...(c.SessionToken === undefined ? {} : { sessionToken: c.SessionToken }),
      ...(c.Expiration === undefined ? {} : { expiration: c.Expiration }),
    };
  };

  return async () => {
    const fresh = cached?.expiration === undefined || cached.expiration.getTime() - Date.now() > REFRESH_MARGIN_MS;
    if (cached !== undefined && fresh) return cached;
    pending ??= assume().then(
      (creds) => {
        cached = creds;
        pending = undefined;
        return creds;
      },
      (err: unknown) => {
        pending = undefined;
        throw err;
      },
    );
    return pending;
  };
}
