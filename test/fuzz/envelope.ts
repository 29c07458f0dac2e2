/**
 * How a request is wrapped around its body: which key it sends, which database its path names, its headers,
 * and the bytes of a JSON body that may be a plausible one with one field changed, or damaged as text.
 */
import fc from 'fast-check';
import { ARROW } from '../support/tables.js';
import { type Account, type Auth, type FuzzCase, type HttpCase, SECRET_A, SECRET_B } from './cases.js';
import { anyJson, anyString, hostileNames, hostileValue, jsonText, weighted } from './hostile.js';
import type { World } from './world.js';

export type Body = Record<string, unknown>;

/** A JSON body (possibly not an object at all) and the words on how it departs from a plausible one. */
export interface Mutated {
  value: unknown;
  note: string;
}

/** Percent-encodes the UTF-8 bytes of a path segment or query value (lone surrogates become U+FFFD). */
export function percent(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Path segments no encoder would write: broken escapes, overlong UTF-8, dot segments. */
export const brokenSegments = fc.constantFrom(
  '%',
  '%Z',
  '%ZZ',
  '%FF',
  '%C0%AE%C0%AE',
  '%2e%2e',
  '..',
  '.',
  '%2F',
  '%00',
  'a%2Fb',
);

/** Per field of a body: values at or past its edges, tried one field at a time (`undefined`: hostile values only). */
export type Edges = Record<string, fc.Arbitrary<unknown> | undefined>;

/**
 * A plausible body, or the same with one field set to an edge or hostile value, removed, or one property added,
 * or the whole body replaced: each departure alone, so the answer says what one wrong field does.
 */
export function mutate(base: fc.Arbitrary<Body>, edges: Edges): fc.Arbitrary<Mutated> {
  const keys = Object.keys(edges);
  const key = fc.constantFrom(...keys);
  const changed = key.chain((k) => {
    const edge = edges[k];
    const value = edge === undefined ? hostileValue : weighted([3, edge], [2, hostileValue]);
    return value.map((v) => [k, v] as const);
  });
  return weighted<Mutated>(
    [5, base.map((value) => ({ value, note: 'plausible' }))],
    [
      6,
      fc
        .tuple(base, changed)
        .map(([b, [k, v]]) => ({ value: { ...b, [k]: v }, note: `${k} := ${preview(jsonText(v))}` })),
    ],
    [
      1,
      fc.tuple(base, key).map(([b, k]) => {
        const { [k]: _gone, ...rest } = b;
        return { value: rest, note: `without ${k}` };
      }),
    ],
    [
      1,
      fc
        .tuple(base, fc.oneof(anyString, fc.constantFrom('__proto__', 'constructor', 'extra')), anyJson)
        .map(([b, k, v]) => ({ value: { ...b, [k]: v }, note: `extra property ${preview(k)}` })),
    ],
    [1, hostileValue.map((value) => ({ value, note: 'whole body replaced' }))],
  );
}

export const preview = (text: string, max = 60) =>
  text.length > max ? `${text.slice(0, max)}…(${text.length})` : text;

type TextDamage = 'none' | 'truncate' | 'bom' | 'trailing' | 'invalid-utf8' | 'duplicate-key' | 'empty' | 'utf16';

export const textDamages = weighted<TextDamage>(
  [24, fc.constant('none')],
  [2, fc.constant('truncate')],
  [1, fc.constantFrom('bom', 'trailing', 'invalid-utf8', 'duplicate-key', 'empty', 'utf16')],
);

/** JSON text as bytes, damaged as asked (`at` picks where a truncation cuts). */
export function jsonBytes(value: unknown, damage: TextDamage, at: number): { bytes: Uint8Array; note: string } {
  const text = jsonText(value);
  const utf8 = Buffer.from(text, 'utf8');
  const note = damage === 'none' ? '' : `, text ${damage}`;
  switch (damage) {
    case 'none':
      return { bytes: utf8, note };
    case 'truncate':
      return { bytes: utf8.subarray(0, at % Math.max(1, utf8.length)), note };
    case 'bom':
      return { bytes: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8]), note };
    case 'trailing':
      return { bytes: Buffer.from(`${text} {}`, 'utf8'), note };
    case 'invalid-utf8': {
      const cut = at % Math.max(1, utf8.length);
      return {
        bytes: Buffer.concat([utf8.subarray(0, cut), Buffer.from([0xff, 0xc0, 0x80]), utf8.subarray(cut)]),
        note,
      };
    }
    case 'duplicate-key':
      return { bytes: Buffer.from(text.startsWith('{') ? `{"table_name":"docs",${text.slice(1)}` : text), note };
    case 'empty':
      return { bytes: new Uint8Array(), note };
    case 'utf16':
      return { bytes: Buffer.from(text, 'utf16le'), note };
  }
}

const CONTENT_TYPES = [
  'text/plain',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'APPLICATION/JSON',
  'application/json;',
  'application/jsonx',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  ARROW,
  `${ARROW}; charset=binary`,
  'application/vnd.apache.arrow.file',
  'application/octet-stream',
  'application/json, text/plain',
  '',
  ';;;',
  '*/*',
];

const ACCEPTS = [
  'application/json',
  ARROW,
  '*/*',
  'application/*',
  'text/html',
  'application/json;q=0',
  `${ARROW};q=0, application/json;q=0`,
  `${ARROW};q=0.1, application/json;q=0.9`,
  'application/xml',
  ',,,',
  'application/json;q=nope',
  'x'.repeat(4000),
];

/** Header values node:http will send: Latin-1 without line breaks or NUL. */
export const headerSafe = (text: string) => text.replace(/[^\t\x20-\x7e\x80-\xff]/g, '?');

const extraHeaders: fc.Arbitrary<Record<string, string>> = weighted(
  [20, fc.constant({})],
  [
    1,
    fc.constantFrom(
      { 'content-encoding': 'gzip' },
      { 'content-encoding': 'br, identity' },
      { 'x-http-method-override': 'DELETE' },
      { 'x-forwarded-for': '10.0.0.1, 127.0.0.1' },
      { 'x-request-id': '../../etc/passwd' },
      { expect: '100-continue' },
      { 'accept-encoding': 'gzip, deflate, br' },
      { 'accept-charset': 'utf-16' },
      { range: 'bytes=0-10' },
      { 'if-none-match': '*' },
    ),
  ],
  [1, anyString.map((v) => ({ 'idempotency-key': headerSafe(v).slice(0, 400) }))],
);

const headerAuth = fc.constantFrom(
  'Bearer',
  'Bearer ',
  `bearer ${SECRET_A}`,
  `BEARER ${SECRET_A}`,
  `Bearer  ${SECRET_A}`,
  `Bearer ${SECRET_A} `,
  `Bearer\t${SECRET_A}`,
  `Bearer ${SECRET_A}x`,
  'Bearer {{SECRET_A_CUT}}',
  `Bearer ${SECRET_A}, Bearer ${SECRET_B}`,
  `Token ${SECRET_A}`,
  SECRET_A,
  'Basic {{SECRET_A_BASIC}}',
  `Bearer sk_${'x'.repeat(43)}`,
  'Bearer sk_',
  `Bearer sk_${'A'.repeat(10_000)}`,
  'Bearer é',
  'Bearer null',
  'Bearer undefined',
);

/** Authorization that proves no key: none, or a header without a whole key in it. */
export const keylessAuths: fc.Arbitrary<Auth> = weighted<Auth>(
  [1, fc.constant({ kind: 'none' })],
  [
    3,
    headerAuth
      .filter((value) => !value.includes(SECRET_A) && !value.includes(SECRET_B))
      .map((value) => ({ kind: 'header', value })),
  ],
);

export const auths: fc.Arbitrary<Auth> = weighted<Auth>(
  [40, fc.constant({ kind: 'key', account: 'A' })],
  [3, fc.constant({ kind: 'key', account: 'B' })],
  [2, fc.constant({ kind: 'none' })],
  [3, headerAuth.map((value) => ({ kind: 'header', value }))],
);

/** The account whose key a request sends, if it sends one. */
function accountOf(auth: Auth): Account | undefined {
  if (auth.kind === 'key') return auth.account;
  if (auth.kind === 'header' && auth.value.includes(SECRET_A) && !auth.value.includes(SECRET_B)) return 'A';
  if (auth.kind === 'header' && auth.value.includes(SECRET_B) && !auth.value.includes(SECRET_A)) return 'B';
  return undefined;
}

interface Target {
  name: string;
  segment: string;
}

export const named = (name: string): Target => ({ name, segment: percent(name) });

function databaseTargets(world: World): fc.Arbitrary<Target> {
  return weighted<Target>(
    [30, fc.constant(named(world.database))],
    [2, fc.constant(named(world.unverifiedDatabase))],
    [3, fc.constant(named(world.foreignDatabase))],
    [1, fc.constantFrom(...world.scratchDatabases).map(named)],
    [1, fc.stringMatching(/^[A-Za-z0-9-][A-Za-z0-9_-]{0,20}$/).map(named)],
    [1, hostileNames.map(named)],
    [1, brokenSegments.map((segment) => ({ name: segment, segment }))],
  );
}

/** Whether a request for `database` with `auth` aims at the other account's database. */
function isForeign(world: World, database: string, auth: Auth): boolean {
  const account = accountOf(auth);
  if (account === 'A') return database === world.foreignDatabase;
  if (account === 'B') return database === world.database || database === world.unverifiedDatabase;
  return false;
}

export interface Envelope {
  db: Target;
  auth: Auth;
  contentType: string | undefined;
  accept: string | undefined;
  extra: Record<string, string>;
}

export const envelopes = (world: World, defaultType: string | undefined): fc.Arbitrary<Envelope> =>
  fc.record({
    db: databaseTargets(world),
    auth: auths,
    contentType: weighted<string | undefined>(
      [14, fc.constant(defaultType)],
      [1, fc.constantFrom(...CONTENT_TYPES)],
      [1, fc.constant(undefined)],
    ),
    accept: weighted<string | undefined>(
      [6, fc.constant(undefined)],
      [3, fc.constant('application/json')],
      [2, fc.constant(ARROW)],
      [1, fc.constantFrom(...ACCEPTS)],
    ),
    extra: extraHeaders,
  });

export function assemble(
  world: World,
  route: string,
  method: string,
  path: string,
  env: Envelope,
  body: { bytes: Uint8Array; note: string } | undefined,
  database: string | undefined,
): HttpCase {
  const headers: Record<string, string> = { ...env.extra };
  if (env.contentType !== undefined && body !== undefined) headers['content-type'] = env.contentType;
  if (env.accept !== undefined) headers.accept = env.accept;
  const c: HttpCase = {
    kind: 'http',
    route,
    method,
    path,
    auth: env.auth,
    headers,
    note: body?.note ?? '',
    foreign: database !== undefined && isForeign(world, database, env.auth),
  };
  if (body !== undefined) c.body = body.bytes;
  return c;
}

/** A JSON-bodied data-plane route `POST /v1/<name>/{database}` with bodies from `bodies`. */
export function jsonRoute(world: World, name: string, bodies: fc.Arbitrary<Mutated>): fc.Arbitrary<FuzzCase> {
  return fc
    .record({ env: envelopes(world, 'application/json'), body: bodies, damage: textDamages, at: fc.nat() })
    .map(({ env, body, damage, at }) => {
      const bytes = jsonBytes(body.value, damage, at);
      return assemble(
        world,
        `POST /v1/${name}`,
        'POST',
        `/v1/${name}/${env.db.segment}`,
        env,
        { bytes: bytes.bytes, note: `${body.note}${bytes.note}` },
        env.db.name,
      );
    });
}
