import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { PATTERN_RULES } from '../contract/common.js';
import { type ErrorCode, type ErrorKind, errorBody, StrataError } from '../errors.js';
import { StorageError } from '../storage/objects.js';

interface ValidationIssue {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

const CONTEXT_NAMES: Readonly<Record<string, string>> = {
  body: 'body',
  querystring: 'query parameter',
  params: 'path parameter',
  headers: 'header',
};

/** One sentence naming the failing field, e.g. `body.storage has unknown property "color"`. */
function describeValidation(context: string, issue: ValidationIssue): string {
  const where = CONTEXT_NAMES[context] ?? context;
  const path = issue.instancePath
    .split('/')
    .filter((part) => part !== '')
    .map((part) => (/^\d+$/.test(part) ? `[${part}]` : `.${part}`))
    .join('');
  const field = context === 'body' ? `body${path}` : `${where} ${path.replace(/^\./, '')}`;
  const p = issue.params;
  switch (issue.keyword) {
    case 'additionalProperties':
      return `${field} has unknown property "${String(p.additionalProperty)}"`;
    case 'required':
      return `${field} is missing required property "${String(p.missingProperty)}"`;
    case 'pattern':
      return `${field} must be ${PATTERN_RULES[String(p.pattern)] ?? `text matching ${String(p.pattern)}`}`;
    case 'discriminator':
      return `${field}.${String(p.tag)} must be one of the known values`;
    case 'enum':
      return `${field} must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'const':
      return `${field} must be ${JSON.stringify(p.allowedValue)}`;
    default:
      return `${field} ${issue.message ?? 'is invalid'}`;
  }
}

/**
 * The issue that says most about what is wrong: the deepest, and among those not a wrong type or "none of the
 * forms". A value that fits no form of a union (a string, or an object of some members) fails each form: the
 * deepest issue is in the form the client meant (`analyzer has unknown property "stemmer"`, not `must be string`).
 */
function mostSpecific(issues: readonly ValidationIssue[]): ValidationIssue {
  const depth = (issue: ValidationIssue) => issue.instancePath.split('/').length;
  const vague = (issue: ValidationIssue) => issue.keyword === 'type' || issue.keyword === 'anyOf';
  let best = issues[0] as ValidationIssue;
  for (const issue of issues) {
    const deeper = depth(issue) > depth(best);
    if (deeper || (depth(issue) === depth(best) && vague(best) && !vague(issue))) best = issue;
  }
  return best;
}

/** Clearer words for the framework's own 4xx errors. */
const FRAMEWORK_MESSAGES: Readonly<Record<string, (req: FastifyRequest) => string>> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: (req) =>
    `Content-Type "${req.headers['content-type'] ?? ''}" is not supported by ${req.method} ${req.routeOptions.url ?? req.url}`,
  FST_ERR_CTP_BODY_TOO_LARGE: (req) =>
    `request body is too large: the limit is ${req.routeOptions.bodyLimit ?? 'set by STRATA_MAX_BODY_BYTES'} bytes`,
  FST_ERR_CTP_EMPTY_JSON_BODY: () =>
    'the body is empty but Content-Type is application/json: send a JSON body or no Content-Type',
  FST_ERR_CTP_INVALID_JSON_BODY: () => 'the body is not valid JSON',
};

const FRAMEWORK_CODES: Readonly<Record<string, ErrorCode>> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_BODY_TOO_LARGE: 'body_too_large',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'bad_request',
  FST_ERR_CTP_INVALID_JSON_BODY: 'bad_request',
};

/** A request target's path, whatever form the client sent it in (origin-form or absolute-form). */
function pathOf(target: string): string {
  const path = target.split('?')[0] ?? '';
  if (path.startsWith('/')) return path;
  try {
    return new URL(path).pathname;
  } catch {
    return path;
  }
}

/** The HTTP status of each kind of error: the only place one is chosen for an error thrown below `http/`. */
const STATUS_OF: Readonly<Record<ErrorKind, number>> = {
  invalid: 400,
  unauthorized: 401,
  not_found: 404,
  not_acceptable: 406,
  timeout: 408,
  conflict: 409,
  limit: 409,
  too_large: 413,
  unprocessable: 422,
  throttled: 429,
  unavailable: 503,
};

export const statusOf = (err: StrataError): number => STATUS_OF[err.kind];

/** The one place where errors become responses. Anything unexpected is logged once and answered opaquely. */
export function handleError(err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (err instanceof StrataError) {
    if (err.retryAfterS !== undefined) void reply.header('retry-after', String(err.retryAfterS));
    return reply.status(statusOf(err)).send({ error: err.message, ...err.details, code: err.code });
  }
  const fastifyErr = err as FastifyError & { validation?: ValidationIssue[]; validationContext?: string };
  if (fastifyErr.validation !== undefined && fastifyErr.validation.length > 0) {
    const first = mostSpecific(fastifyErr.validation);
    return reply
      .status(400)
      .send(errorBody(describeValidation(fastifyErr.validationContext ?? 'body', first), 'bad_request'));
  }
  if (err instanceof StorageError) {
    req.log.warn({ code: err.code }, 'bucket unreachable');
    void reply.header('retry-after', '5');
    return reply
      .status(503)
      .send(errorBody(`the bucket could not be reached: ${err.code}: ${err.message}`, 'storage_unavailable'));
  }
  const status = fastifyErr.statusCode;
  if (status !== undefined && status >= 400 && status < 500) {
    return reply
      .status(status)
      .send(
        errorBody(
          FRAMEWORK_MESSAGES[fastifyErr.code]?.(req) ?? err.message,
          FRAMEWORK_CODES[fastifyErr.code] ?? 'bad_request',
        ),
      );
  }
  req.log.error({ err }, 'internal error');
  return reply.status(500).send(errorBody(`internal error (request id ${req.id})`, 'internal'));
}

export function handleNotFound(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.status(404).send(errorBody(`no route ${req.method} ${pathOf(req.url)}`, 'no_route'));
}
