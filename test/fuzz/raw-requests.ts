import fc from 'fast-check';
import { type FuzzCase, isPublicPath, type RawCase, SECRET_A, SECRET_B } from './cases.js';
import { weighted } from './hostile.js';
import type { World } from './world.js';

const AUTH_A = `Authorization: Bearer ${SECRET_A}`;
const SQL = '{"query":"SELECT 1 AS one"}';

/** An HTTP/1.1 request as text: request line, header lines, blank line, body. */
const http = (line: string, headers: readonly string[], body = '') =>
  `${line}\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n${body}`;

const raw = (route: string, chunks: string[], note: string, extra: Partial<RawCase> = {}): RawCase => ({
  kind: 'raw',
  route: `raw ${route}`,
  chunks,
  halfClose: false,
  note,
  forbid2xx: undefined,
  ...extra,
});

const V1_PATHS = [
  '/v1/databases',
  '/v1/list_tables/alpha',
  '/v1/list_tables/beta',
  '/v1/openapi.json',
  '/v1/query_sql/alpha',
];

/** `GET http://host/v1/… HTTP/1.1`: routed like the path; without a key never answered 2xx. */
function absoluteForm(): fc.Arbitrary<RawCase> {
  return fc
    .record({
      scheme: fc.constantFrom('http://', 'https://', 'HTTP://', 'http:/', '//', 'ftp://'),
      host: fc.constantFrom('x', '127.0.0.1', 'evil.example', 'localhost:1', 'x:99999', 'user:pw@x', '[::1]', ''),
      path: fc.constantFrom(...V1_PATHS),
      keyed: fc.boolean(),
      connection: fc.constantFrom('close', 'keep-alive'),
    })
    .map(({ scheme, host, path, keyed, connection }) => {
      const post = path.startsWith('/v1/query_sql');
      const headers = [
        'Host: 127.0.0.1',
        `Connection: ${connection}`,
        ...(keyed ? [AUTH_A] : []),
        ...(post ? ['Content-Type: application/json', `Content-Length: ${SQL.length}`] : []),
      ];
      const target = `${scheme}${host}${path}`;
      const line = `${post ? 'POST' : 'GET'} ${target} HTTP/1.1`;
      const guarded = !isPublicPath(path);
      return raw('absolute-form', [http(line, headers, post ? SQL : '')], line, {
        forbid2xx: !keyed && guarded ? 'absolute-form target without a key' : undefined,
      });
    });
}

/** Dot segments, encoded dots and slashes, encoded letters: none may reach the other account's database. */
function pathTricks(): fc.Arbitrary<RawCase> {
  return fc
    .record({
      path: fc.constantFrom(
        '/v1/databases/../databases',
        '/./v1/databases',
        '/v1/./databases',
        '//v1/databases',
        '/v1//databases',
        '/v1/list_tables/%2e%2e/beta',
        '/v1/list_tables/alpha/../beta',
        '/v1/list_tables/..%2fbeta',
        '/v1/list_tables/beta%00',
        '/v1/list_tables/%62eta',
        '/v1/list_tables/BETA',
        '/v1/list_tables/beta/',
        '/v1/list_tables/beta;x=1',
        '/v1/list_tables/beta?x=../alpha',
        '/v1/list_tables/alpha%2f..%2fbeta',
        '/v1/list_tables/%C0%AE%C0%AE/beta',
        '/v1/list_tables/beta#x',
        '/%76%31/list_tables/beta',
      ),
      keyed: fc.boolean(),
    })
    .map(({ path, keyed }) => {
      const line = `GET ${path} HTTP/1.1`;
      const reason = !keyed ? 'no key' : /beta|%62eta/i.test(path) ? 'the other account’s database' : undefined;
      return raw('path', [http(line, ['Host: x', 'Connection: close', ...(keyed ? [AUTH_A] : [])])], line, {
        forbid2xx: reason,
      });
    });
}

const METHOD_LINES = [
  'get /v1/databases HTTP/1.1',
  'GET  /v1/databases HTTP/1.1',
  'GET\t/v1/databases\tHTTP/1.1',
  'GET /v1/databases HTTP/1.0',
  'GET /v1/databases HTTP/2.0',
  'GET /v1/databases HTTP/1.9',
  'GET /v1/databases HTTP/11',
  'GET /v1/databases',
  'GET /v1/databases HTTP/1.1 extra',
  'CONNECT 127.0.0.1:80 HTTP/1.1',
  'TRACE / HTTP/1.1',
  'TRACE /v1/databases HTTP/1.1',
  'OPTIONS * HTTP/1.1',
  'GET * HTTP/1.1',
  'M-SEARCH * HTTP/1.1',
  'FUZZ /v1/databases HTTP/1.1',
  `${'G'.repeat(100)} /v1/databases HTTP/1.1`,
  'PUT /v1/databases HTTP/1.1',
  'PATCH /v1/append/alpha?table=docs HTTP/1.1',
  'DELETE /v1/databases/fzdb0?purge=true HTTP/1.1',
  'HEAD /v1/list_tables/alpha HTTP/1.1',
  `GET /${'a'.repeat(100_000)} HTTP/1.1`,
  `GET /v1/databases?${'a=1&'.repeat(20_000)} HTTP/1.1`,
  'GET /v1/databases\u0000 HTTP/1.1',
  'GET /v1/datab\u00e4ses HTTP/1.1',
  'GET /v1/databases\u0085 HTTP/1.1',
];

function methodLines(): fc.Arbitrary<RawCase> {
  return fc.record({ line: fc.constantFrom(...METHOD_LINES), keyed: fc.boolean() }).map(({ line, keyed }) =>
    raw('request-line', [http(line, ['Host: x', 'Connection: close', ...(keyed ? [AUTH_A] : [])])], line.slice(0, 80), {
      forbid2xx: keyed ? undefined : 'no key',
    }),
  );
}

const SQL_REQUEST = 'POST /v1/query_sql/alpha HTTP/1.1';

/** Header sets that break the grammar, the size limits, or say two things at once. */
const HEADER_SETS: readonly {
  note: string;
  line?: string;
  headers: string[];
  body?: string;
  keyed?: boolean;
  halfClose?: boolean;
}[] = [
  { note: 'header of 20 KB', headers: ['Host: x', AUTH_A, `X-Big: ${'a'.repeat(20_000)}`] },
  { note: '200 headers', headers: ['Host: x', AUTH_A, ...Array.from({ length: 200 }, (_, i) => `X-H${i}: ${i}`)] },
  { note: '3000 headers', headers: ['Host: x', AUTH_A, ...Array.from({ length: 3000 }, (_, i) => `X-H${i}: ${i}`)] },
  { note: 'header name with a space', headers: ['Host: x', AUTH_A, 'Bad Header: x'] },
  { note: 'header without colon', headers: ['Host: x', AUTH_A, 'NoColonHere'] },
  { note: 'obs-fold authorization', headers: ['Host: x', 'Authorization: Bearer', ` ${SECRET_A}`], keyed: true },
  { note: 'NUL in a header', headers: ['Host: x', AUTH_A, 'X-Nul: a\u0000b'] },
  { note: 'Latin-1 in a header', headers: ['Host: x', AUTH_A, 'X-Latin: \u00e9\u00ff'] },
  { note: 'two Host headers', headers: ['Host: x', 'Host: y', AUTH_A] },
  { note: 'no Host', headers: [AUTH_A] },
  { note: 'Authorization bad then good', headers: ['Host: x', 'Authorization: Bearer nope', AUTH_A], keyed: true },
  { note: 'Authorization good then bad', headers: ['Host: x', AUTH_A, 'Authorization: Bearer nope'], keyed: true },
  { note: 'Authorization A then B', headers: ['Host: x', AUTH_A, `Authorization: Bearer ${SECRET_B}`], keyed: true },
  { note: 'Authorization empty', headers: ['Host: x', 'Authorization:'] },
  { note: 'Authorization with CR', headers: ['Host: x', `Authorization: Bearer\r${SECRET_A}`], keyed: true },
  {
    note: 'two different Content-Length',
    line: SQL_REQUEST,
    headers: [
      'Host: x',
      AUTH_A,
      'Content-Type: application/json',
      `Content-Length: ${SQL.length}`,
      'Content-Length: 3',
    ],
    body: SQL,
  },
  {
    note: 'two equal Content-Length',
    line: SQL_REQUEST,
    headers: [
      'Host: x',
      AUTH_A,
      'Content-Type: application/json',
      `Content-Length: ${SQL.length}`,
      `Content-Length: ${SQL.length}`,
    ],
    body: SQL,
  },
  {
    note: 'Content-Length -1',
    line: SQL_REQUEST,
    headers: ['Host: x', AUTH_A, 'Content-Type: application/json', 'Content-Length: -1'],
    body: SQL,
  },
  {
    note: 'Content-Length 1e3',
    line: SQL_REQUEST,
    headers: ['Host: x', AUTH_A, 'Content-Type: application/json', 'Content-Length: 1e3'],
    body: SQL,
  },
  {
    note: 'Content-Length of 20 digits',
    line: SQL_REQUEST,
    headers: ['Host: x', AUTH_A, 'Content-Type: application/json', 'Content-Length: 99999999999999999999'],
    body: SQL,
    halfClose: true,
  },
  {
    note: 'Content-Length longer than the body, then EOF',
    line: SQL_REQUEST,
    headers: ['Host: x', AUTH_A, 'Content-Type: application/json', 'Content-Length: 100'],
    body: SQL,
    halfClose: true,
  },
  {
    note: 'body longer than Content-Length',
    line: SQL_REQUEST,
    headers: ['Host: x', AUTH_A, 'Content-Type: application/json', `Content-Length: ${SQL.length}`],
    body: `${SQL}GARBAGE / HTTP/1.1\r\n\r\n`,
  },
  {
    note: 'Content-Length and chunked',
    line: SQL_REQUEST,
    headers: ['Host: x', AUTH_A, 'Content-Type: application/json', 'Content-Length: 4', 'Transfer-Encoding: chunked'],
    body: `${SQL.length.toString(16)}\r\n${SQL}\r\n0\r\n\r\n`,
  },
  {
    note: 'Transfer-Encoding chunked, identity',
    line: SQL_REQUEST,
    headers: ['Host: x', AUTH_A, 'Content-Type: application/json', 'Transfer-Encoding: chunked, identity'],
    body: `${SQL.length.toString(16)}\r\n${SQL}\r\n0\r\n\r\n`,
  },
  {
    note: 'Transfer-Encoding xchunked',
    line: SQL_REQUEST,
    headers: ['Host: x', AUTH_A, 'Content-Type: application/json', 'Transfer-Encoding: xchunked'],
    body: SQL,
  },
  {
    note: 'Transfer-Encoding gzip',
    line: SQL_REQUEST,
    headers: ['Host: x', AUTH_A, 'Content-Type: application/json', 'Transfer-Encoding: gzip'],
    body: SQL,
  },
  {
    note: 'Upgrade h2c',
    headers: [
      'Host: x',
      AUTH_A,
      'Connection: Upgrade, HTTP2-Settings',
      'Upgrade: h2c',
      'HTTP2-Settings: AAMAAABkAAQAAP__',
    ],
  },
  {
    note: 'Upgrade websocket',
    headers: [
      'Host: x',
      AUTH_A,
      'Connection: Upgrade',
      'Upgrade: websocket',
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
      'Sec-WebSocket-Version: 13',
    ],
  },
  {
    note: 'Expect 100-continue',
    line: SQL_REQUEST,
    headers: [
      'Host: x',
      AUTH_A,
      'Content-Type: application/json',
      `Content-Length: ${SQL.length}`,
      'Expect: 100-continue',
    ],
    body: SQL,
  },
  { note: 'Expect something else', headers: ['Host: x', AUTH_A, 'Expect: 200-ok'] },
];

function headerCases(): fc.Arbitrary<RawCase> {
  return fc.record({ set: fc.constantFrom(...HEADER_SETS), connection: fc.boolean() }).map(({ set, connection }) => {
    const line = set.line ?? 'GET /v1/databases HTTP/1.1';
    const headers = connection ? [...set.headers, 'Connection: close'] : set.headers;
    const keyed = set.keyed ?? headers.includes(AUTH_A);
    return raw('headers', [http(line, headers, set.body)], set.note, {
      halfClose: set.halfClose ?? false,
      forbid2xx: keyed ? undefined : 'no key',
    });
  });
}

const chunked = (body: string) => `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
const CHUNK_HEADERS = ['Host: x', 'Content-Type: application/json', 'Transfer-Encoding: chunked', 'Connection: close'];

const CHUNKED: readonly { note: string; chunks: string[]; keyed?: boolean; halfClose?: boolean; forbid?: string }[] = [
  { note: 'valid chunked body', chunks: [http(SQL_REQUEST, [...CHUNK_HEADERS, AUTH_A], chunked(SQL))] },
  {
    note: 'chunked body in pieces',
    chunks: [
      http(SQL_REQUEST, [...CHUNK_HEADERS, AUTH_A]),
      '5\r\n{"que\r\n',
      `${(SQL.length - 5).toString(16)}\r\n${SQL.slice(5)}\r\n`,
      '0\r\n\r\n',
    ],
  },
  { note: 'chunk size zz', chunks: [http(SQL_REQUEST, [...CHUNK_HEADERS, AUTH_A], `zz\r\n${SQL}\r\n0\r\n\r\n`)] },
  {
    note: 'chunk size 2^64-1',
    chunks: [http(SQL_REQUEST, [...CHUNK_HEADERS, AUTH_A], `ffffffffffffffff\r\n${SQL}\r\n0\r\n\r\n`)],
  },
  {
    note: 'chunk size of 40 hex digits',
    chunks: [http(SQL_REQUEST, [...CHUNK_HEADERS, AUTH_A], `${'f'.repeat(40)}\r\n${SQL}\r\n`)],
  },
  { note: 'chunk size -1', chunks: [http(SQL_REQUEST, [...CHUNK_HEADERS, AUTH_A], `-1\r\n${SQL}\r\n0\r\n\r\n`)] },
  {
    note: 'chunk extension',
    chunks: [http(SQL_REQUEST, [...CHUNK_HEADERS, AUTH_A], `${SQL.length.toString(16)};x=y\r\n${SQL}\r\n0\r\n\r\n`)],
  },
  {
    note: 'chunk without CRLF',
    chunks: [http(SQL_REQUEST, [...CHUNK_HEADERS, AUTH_A], `${SQL.length.toString(16)}\r\n${SQL}0\r\n\r\n`)],
  },
  {
    note: 'chunk longer than its size',
    chunks: [http(SQL_REQUEST, [...CHUNK_HEADERS, AUTH_A], `3\r\n${SQL}\r\n0\r\n\r\n`)],
  },
  {
    note: 'no last chunk, then EOF',
    chunks: [http(SQL_REQUEST, [...CHUNK_HEADERS, AUTH_A], `${SQL.length.toString(16)}\r\n${SQL}\r\n`)],
    halfClose: true,
  },
  {
    note: 'bare LF line ends',
    chunks: [`${SQL_REQUEST}\n${[...CHUNK_HEADERS, AUTH_A].join('\n')}\n\n${SQL.length.toString(16)}\n${SQL}\n0\n\n`],
  },
  {
    note: 'key only in a trailer',
    chunks: [http(SQL_REQUEST, CHUNK_HEADERS, `${SQL.length.toString(16)}\r\n${SQL}\r\n0\r\n${AUTH_A}\r\n\r\n`)],
    forbid: 'the key was sent only in a chunked trailer',
  },
  {
    note: 'chunked body over the size limit',
    chunks: [
      http(
        'POST /v1/append/alpha?table=docs HTTP/1.1',
        [...CHUNK_HEADERS, AUTH_A],
        chunked(`{"data":[${'{},'.repeat(1_500_000)}{}]}`),
      ),
    ],
  },
];

function chunkedCases(): fc.Arbitrary<RawCase> {
  return weighted(
    [12, fc.constantFrom(...CHUNKED.slice(0, -1))],
    [1, fc.constant(CHUNKED[CHUNKED.length - 1] as (typeof CHUNKED)[number])],
  ).map((c) =>
    raw('chunked', c.chunks, c.note, {
      halfClose: c.halfClose ?? false,
      forbid2xx: c.forbid,
    }),
  );
}

/** Two requests in one write; the second has no key, so it may not succeed. */
function pipelined(): fc.Arbitrary<RawCase> {
  return fc.constantFrom('GET /healthz HTTP/1.1', `GET /v1/list_tables/alpha HTTP/1.1`).map((first) => {
    const firstHeaders = first.includes('/v1/') ? ['Host: x', AUTH_A] : ['Host: x'];
    const text = http(first, firstHeaders) + http('GET /v1/databases HTTP/1.1', ['Host: x', 'Connection: close']);
    return raw('pipelined', [text], `${first} + unauthenticated GET /v1/databases`, {
      forbid2xx: 'no key on the second request',
      onlyLastForbidden: true,
    });
  });
}

function garbage(): fc.Arbitrary<RawCase> {
  return weighted(
    [3, fc.uint8Array({ minLength: 1, maxLength: 300 }).map((bytes) => Buffer.from(bytes).toString('latin1'))],
    [
      2,
      fc.constantFrom(
        '\u0016\u0003\u0001\u0000\u00a5\u0001\u0000\u0000\u00a1\u0003\u0003',
        'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n',
        '\r\n\r\n',
        '\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n',
        'GET /v1/databases HTTP/1.1\r\nHost: x\r\n',
        '',
        ' ',
        '\u0000'.repeat(64),
      ),
    ],
  ).map((text) =>
    raw('garbage', [text], `${JSON.stringify(text.slice(0, 40))} (${text.length} bytes)`, {
      // A server may wait for a request line after blank lines (RFC 9112 §2.2); ending our side ends the wait.
      halfClose: true,
      forbid2xx: text.includes('/v1/') ? 'no key' : undefined,
    }),
  );
}

/** Requests written to a socket by hand, for what an HTTP client library would refuse to send. */
export function rawCases(_world: World): fc.Arbitrary<FuzzCase> {
  return weighted<FuzzCase>(
    [3, absoluteForm()],
    [3, pathTricks()],
    [3, methodLines()],
    [4, headerCases()],
    [3, chunkedCases()],
    [1, pipelined()],
    [1, garbage()],
  );
}
