import type { RecordBatch, Schema } from 'apache-arrow';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { arrow } from '../arrow/arrow.js';
import { writableBatches } from '../arrow/ipc.js';
import { jsonText, MAX_JSON_TEXT } from '../arrow/to-json.js';
import { ARROW_STREAM } from '../contract/rows.js';
import { INLINE_ENCODE_BYTES } from '../engine/writes/json-rows.js';
import { ResultTooLarge, StrataError } from '../errors.js';

export const JSON_TYPE = 'application/json';

interface MediaRange {
  type: string;
  q: number;
  order: number;
}

function parseAccept(header: string): MediaRange[] {
  return header
    .split(',')
    .map((part, order) => {
      const [type = '', ...params] = part.trim().split(';');
      const q = params.map((p) => /^\s*q=([\d.]+)\s*$/.exec(p)?.[1]).find((v) => v !== undefined);
      return { type: type.trim().toLowerCase(), q: q === undefined ? 1 : Number(q), order };
    })
    .filter((range) => range.type !== '');
}

function matches(range: string, offered: string): boolean {
  if (range === '*/*' || range === offered) return true;
  return range.endsWith('/*') && offered.startsWith(range.slice(0, -1));
}

/** Says which of the request's preferences the answer honoured (RFC 7240). */
export const PREFERENCE_APPLIED = 'preference-applied';

/**
 * Whether the request prefers an answer without a representation (`Prefer: return=minimal`, RFC 7240): one
 * preference among others, with any parameters, the value quoted or not, names in any case.
 */
export function prefersMinimal(req: FastifyRequest): boolean {
  const header = req.headers.prefer;
  if (header === undefined) return false;
  return [header]
    .flat()
    .join(',')
    .split(',')
    .some((preference) => {
      const [name, value] = (preference.split(';')[0] ?? '').split('=').map((part) => part.trim());
      return name?.toLowerCase() === 'return' && value?.replace(/^"(.*)"$/, '$1').toLowerCase() === 'minimal';
    });
}

/**
 * The encoding to answer with: the offered type the `Accept` header ranks highest (a named type before a
 * wildcard match, then the first offered; the first offered for a missing header); 406 when it allows none.
 */
export function negotiate(req: FastifyRequest, offered: readonly string[]): string {
  const header = req.headers.accept;
  if (header === undefined || header.trim() === '') return offered[0] as string;
  const ranges = parseAccept(header);
  let best: { type: string; q: number; specific: boolean } | undefined;
  for (const type of offered) {
    const fitting = ranges.filter((r) => matches(r.type, type));
    if (fitting.length === 0) continue;
    // The most specific range decides a type's quality (RFC 9110 §12.5.1).
    const specific = fitting.find((r) => r.type === type) ?? fitting.find((r) => r.type !== '*/*') ?? fitting[0];
    const q = specific?.q ?? 0;
    const named = specific?.type === type;
    // At equal quality a type the client named beats one it only allowed by a wildcard
    // ("application/json, text/plain, */*" asks for JSON).
    if (q > 0 && (best === undefined || q > best.q || (q === best.q && named && !best.specific))) {
      best = { type, q, specific: named };
    }
  }
  if (best === undefined) {
    throw new StrataError(
      'not_acceptable',
      `Accept "${header}" allows none of the encodings this endpoint produces: ${offered.join(', ')}`,
    );
  }
  return best.type;
}

export const ROW_ENCODINGS = [ARROW_STREAM, JSON_TYPE] as const;

/**
 * Rows to answer with; `stream`, when given, is exactly those rows already encoded. `members` are said beside the
 * rows: a member of the JSON reply each, and in Arrow the schema's metadata `strata.<name>` (as JSON).
 */
export interface RowsReply {
  schema: Schema;
  rows: readonly RecordBatch[];
  stream?: Uint8Array;
  members?: Readonly<Record<string, unknown>>;
}

/** The reply's schema, with its members in the metadata. */
function schemaOf(result: RowsReply): Schema {
  const members = Object.entries(result.members ?? {}).filter(([, value]) => value !== undefined);
  if (members.length === 0) return result.schema;
  const metadata = new Map(result.schema.metadata);
  for (const [name, value] of members) metadata.set(`strata.${name}`, JSON.stringify(value));
  return new arrow.Schema(result.schema.fields, metadata);
}

const ipcOf = (result: RowsReply): Uint8Array =>
  result.stream ?? arrow.tableToIPC(new arrow.Table(schemaOf(result), writableBatches(result.rows)), 'stream');

/** `{"data":[…]}` with the reply's members after `data`. */
function withMembers(text: string | Uint8Array, members: RowsReply['members']): string | Uint8Array {
  const defined = Object.entries(members ?? {}).filter(([, value]) => value !== undefined);
  if (defined.length === 0) return text;
  const tail = `${defined.map(([name, value]) => `,${JSON.stringify(name)}:${JSON.stringify(value)}`).join('')}}`;
  if (typeof text === 'string') return `${text.slice(0, -1)}${tail}`;
  return Buffer.concat([text.subarray(0, text.byteLength - 1), Buffer.from(tail)]);
}

const asBuffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/**
 * Rows as an Arrow IPC stream or as `{data: [...]}`; an empty result still carries the schema. A read's reply
 * is capped (`STRATA_MAX_RESULT_BYTES`); a write's reply (`written`) is not, since the write has committed by
 * then and a refusal would invite a retry that writes it twice; only its JSON text is bounded, by V8.
 */
export async function sendRows(
  reply: FastifyReply,
  encoding: string,
  result: RowsReply,
  kind: 'read' | 'written' = 'read',
): Promise<FastifyReply> {
  const { ctx } = reply.server;
  const cap = kind === 'read' ? ctx.config.limits.maxResultBytes : MAX_JSON_TEXT;
  const bytes = result.rows.reduce((n, batch) => n + batch.data.byteLength, 0);
  if (kind === 'read' && bytes > cap) throw new ResultTooLarge(cap, 'the reply');
  if (encoding === JSON_TYPE) {
    const text =
      bytes <= INLINE_ENCODE_BYTES
        ? jsonText(result.rows, cap)
        : asBuffer(await ctx.workers.json.encode(ipcOf(result), cap, result.stream !== undefined));
    return reply.type(JSON_TYPE).send(withMembers(text, result.members));
  }
  return reply.type(ARROW_STREAM).send(asBuffer(ipcOf(result)));
}
