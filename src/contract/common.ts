import Type from 'typebox';
import { ERROR_CODES } from '../errors.js';

/** Database and table names (docs/api.md). */
const NAME_PATTERN = '^[A-Za-z0-9-][A-Za-z0-9_-]{0,127}$';
const NAME_RULE = '1–128 characters of A-Z a-z 0-9 _ -, not starting with _';

/** S3's rule for bucket names (3–63 of a-z 0-9 . -, starting and ending with a letter or digit). */
export const S3_BUCKET_PATTERN = '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$';

export const Name = Type.String({ pattern: NAME_PATTERN, minLength: 1, maxLength: 128 });

/** How the tokens of a full-text query combine: "or" (the default) or "and", in any case. */
const OPERATOR_PATTERN = '^(?:[oO][rR]|[aA][nN][dD])$';
export const TextOperator = Type.String({ pattern: OPERATOR_PATTERN });

export const ErrorBody = Type.Object(
  {
    error: Type.String({ description: 'One clear sentence naming what was wrong; the wording may change' }),
    code: Type.String({
      description: `A stable code to branch on: ${Object.keys(ERROR_CODES).join(', ')} (meanings in docs/errors.md)`,
    }),
  },
  { additionalProperties: true, description: 'What was wrong' },
);

/**
 * The error replies of a keyed route, by status, for its schema: every one may answer 400, 401 and 429 (a rate
 * or tenant limit); `statuses` are the others it can give.
 */
export function errorReplies<S extends number>(...statuses: S[]): Record<400 | 401 | 429 | S, typeof ErrorBody> {
  const replies: Partial<Record<number, typeof ErrorBody>> = {};
  for (const status of [400, 401, 429, ...statuses]) replies[status] = ErrorBody;
  return replies as Record<400 | 401 | 429 | S, typeof ErrorBody>;
}

/** Human wording for the patterns the contract uses, so a 400 explains the rule instead of a regex. */
export const PATTERN_RULES: Readonly<Record<string, string>> = {
  [NAME_PATTERN]: NAME_RULE,
  [OPERATOR_PATTERN]: '"or" or "and", in any case',
  [S3_BUCKET_PATTERN]: 'an S3 bucket name: 3–63 characters of a-z 0-9 . -, starting and ending with a letter or digit',
};

export const DatabaseParams = Type.Object({ name: Name }, { additionalProperties: false });
