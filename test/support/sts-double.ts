import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';

/**
 * A local test double of AWS STS (STS itself cannot run on this machine). It answers AssumeRole in the
 * Query protocol, checks the call is signed with the expected caller key, records every call, and issues
 * credentials it hands to `onIssue` (the tests make s3rver accept them).
 */
export interface StsDoubleOptions {
  callerKeyId: string;
  /** Roles whose assumption is refused with AccessDenied. */
  deniedRoles?: readonly string[];
  /** Lifetime of issued credentials. */
  lifetimeMs?: number;
  onIssue(accessKeyId: string, secret: string): void;
}

export interface AssumeRoleCall {
  roleArn: string;
  sessionName: string;
  /** The `ExternalId` sent, or undefined when the call carried none. */
  externalId: string | undefined;
  signedBy: string | undefined;
}

export interface StsDouble {
  endpoint: string;
  calls: AssumeRoleCall[];
  /** Holds every answer until the returned function is called. */
  hold(): () => void;
  close(): Promise<void>;
}

const readBody = async (req: IncomingMessage): Promise<string> => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
};

export async function startStsDouble(options: StsDoubleOptions): Promise<StsDouble> {
  const calls: AssumeRoleCall[] = [];
  let gate: Promise<void> | undefined;
  const server: Server = createServer(async (req, res) => {
    const params = new URLSearchParams(await readBody(req));
    const signedBy = /Credential=([^/]+)\//.exec(req.headers.authorization ?? '')?.[1];
    const roleArn = params.get('RoleArn') ?? '';
    calls.push({
      roleArn,
      sessionName: params.get('RoleSessionName') ?? '',
      externalId: params.get('ExternalId') ?? undefined,
      signedBy,
    });
    if (gate !== undefined) await gate;
    res.setHeader('content-type', 'text/xml');
    if (params.get('Action') !== 'AssumeRole' || signedBy !== options.callerKeyId) {
      res.statusCode = 403;
      res.end(errorXml('InvalidClientTokenId', 'The security token included in the request is invalid.'));
      return;
    }
    if (options.deniedRoles?.includes(roleArn)) {
      res.statusCode = 403;
      res.end(errorXml('AccessDenied', `User is not authorized to perform: sts:AssumeRole on resource: ${roleArn}`));
      return;
    }
    const id = `ASIA${randomBytes(8).toString('hex').toUpperCase()}`;
    const secret = randomBytes(20).toString('base64url');
    options.onIssue(id, secret);
    const expiration = new Date(Date.now() + (options.lifetimeMs ?? 3_600_000)).toISOString();
    res.end(`<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <Credentials>
      <AccessKeyId>${id}</AccessKeyId>
      <SecretAccessKey>${secret}</SecretAccessKey>
      <SessionToken>token-${id}</SessionToken>
      <Expiration>${expiration}</Expiration>
    </Credentials>
    <AssumedRoleUser><AssumedRoleId>AROA:${params.get('RoleSessionName')}</AssumedRoleId><Arn>${roleArn}</Arn></AssumedRoleUser>
  </AssumeRoleResult>
  <ResponseMetadata><RequestId>req-${id}</RequestId></ResponseMetadata>
</AssumeRoleResponse>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    calls,
    hold() {
      let open = () => {};
      gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      return () => {
        gate = undefined;
        open();
      };
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function errorXml(code: string, message: string): string {
  return `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>${code}</Code><Message>${message}</Message></Error><RequestId>r</RequestId></ErrorResponse>`;
}
