import Type from 'typebox';
import { Name, S3_BUCKET_PATTERN } from './common.js';

export const DatabaseState = Type.Union([
  Type.Literal('unverified'),
  Type.Literal('verify_failed'),
  Type.Literal('activating'),
  Type.Literal('active'),
]);
export type DatabaseState = Type.Static<typeof DatabaseState>;

/**
 * States of a database whose deletion began (`purging`: with its objects). The control store records them; the
 * API never shows them: a listing leaves such a database out, and a call on it answers 503 `database_deleting`.
 */
export type DeletionState = 'deleting' | 'purging';

const S3Storage = Type.Object(
  {
    provider: Type.Literal('s3'),
    // S3's own rule for bucket names: nothing a URI would read as anything but a name.
    bucket: Type.String({ minLength: 3, maxLength: 63, pattern: S3_BUCKET_PATTERN }),
    region: Type.Optional(Type.String({ pattern: '^[a-z0-9-]{1,64}$' })),
    endpoint: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
    prefix: Type.Optional(Type.String({ maxLength: 1024 })),
    role_arn: Type.Optional(Type.String({ pattern: '^arn:[A-Za-z0-9-]+:iam::[0-9]{12}:role/[\\w+=,.@/-]{1,512}$' })),
    requester_pays: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

const LocalStorage = Type.Object(
  {
    provider: Type.Literal('local'),
    bucket: Type.String({ minLength: 1, maxLength: 255 }),
    prefix: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);

/** Dispatched on `provider` so a bad field is reported against the provider that was meant. */
export const Storage = Type.Unsafe<Type.Static<typeof S3Storage> | Type.Static<typeof LocalStorage>>({
  type: 'object',
  required: ['provider'],
  properties: { provider: { type: 'string', enum: ['s3', 'local'] } },
  discriminator: { propertyName: 'provider' },
  oneOf: [S3Storage, LocalStorage],
});
export type Storage = Type.Static<typeof Storage>;

export const RegisterDatabaseBody = Type.Object({ name: Name, storage: Storage }, { additionalProperties: false });
export type RegisterDatabaseBody = Type.Static<typeof RegisterDatabaseBody>;

export const DatabaseSummary = Type.Object({
  name: Type.String(),
  created_ms: Type.Integer(),
  state: DatabaseState,
  external_id: Type.String({
    description: "The account's external id: AssumeRole passes it as ExternalId, for the role's trust policy",
  }),
});

export const DatabaseList = Type.Object({ databases: Type.Array(DatabaseSummary) });

export const VerifyCheck = Type.Object({
  step: Type.String(),
  ok: Type.Boolean(),
  ms: Type.Number(),
  note: Type.Optional(Type.String()),
});
export type VerifyCheck = Type.Static<typeof VerifyCheck>;

export const VerifyReply = Type.Object({
  name: Type.String(),
  state: DatabaseState,
  checks: Type.Array(VerifyCheck),
});

export const DeleteDatabaseQuery = Type.Object(
  { purge: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])) },
  { additionalProperties: false },
);

export const DeleteDatabaseReply = Type.Object({ name: Type.String(), purged: Type.Boolean() });
