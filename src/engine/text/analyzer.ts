import type { Analyzer } from '../indexes/registry.js';
import { ASCII_FOLDING } from './ascii-folding.js';

// The tokens each analyzer makes of a text, the same as Lance's full-text index makes (engine/lance/indexes.ts
// `ftsIndex`), computed here so that BM25's statistics and a row's term frequencies need no round trip to Lance.
// test/text-analyzer.test.ts holds both against Lance's own tokenizer.

/** Tokens of this many UTF-8 bytes or more are dropped, as Lance drops them (`maxTokenLength` 255). */
const MAX_TOKEN_BYTES = 255;

/** A run of letters and digits: what Lance's `simple` tokenizer keeps (Rust's `char::is_alphanumeric`). */
const SIMPLE_TOKEN = /[\p{Alphabetic}\p{N}]+/gu;

/**
 * What the JavaScript engine's ICU and Lance's split differently: scripts segmented by dictionary (Japanese
 * measured so) and a combining mark right after white space. Texts holding them are tokenized by Lance itself.
 */
const LANCE_ONLY =
  /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]|\s\p{M}/u;

/** Whether a word segment is a token: Lance's ICU tokenizer keeps those holding a letter or digit. */
const WORD = /[\p{Alphabetic}\p{N}]/u;

const words = new Intl.Segmenter('und', { granularity: 'word' });
const encoder = new TextEncoder();

/** Lower-cased character by character, as Lance does (no final sigma: "ΟΣ" is "οσ"). */
function lower(token: string): string {
  let out = '';
  for (const c of token) out += c.toLowerCase();
  return out;
}

function folded(token: string): string {
  let out = '';
  for (const c of token) out += ASCII_FOLDING.get(c.codePointAt(0) ?? 0) ?? c;
  return out;
}

/** Whether a token is short enough to be kept: ASCII tokens cheaply, others by their UTF-8 length. */
const kept = (token: string) => token.length < MAX_TOKEN_BYTES / 4 || encoder.encode(token).length < MAX_TOKEN_BYTES;

/**
 * Whether `analyze` can tokenize this text here; when not, only Lance can (`engine/lance` `tokenize`). Stemming
 * and stop words are Lance's alone: analyzers other than `ascii_lower` and `standard` always ask it.
 */
export const analyzableHere = (text: string, analyzer: Analyzer): boolean =>
  analyzer === 'ascii_lower' || (analyzer === 'standard' && !LANCE_ONLY.test(text));

/**
 * The tokens `analyzer` makes of `text`, in order; for a text `analyzableHere` refuses, undefined. With `positions`,
 * each token's position is pushed there, as Lance numbers them: from 0 at the first token kept, and a token dropped
 * for its length after it keeps its place, so that a phrase does not match across it.
 */
export function analyze(text: string, analyzer: Analyzer, positions?: number[]): string[] | undefined {
  const out: string[] = [];
  let at = 0;
  const push = (token: string, made: (token: string) => string) => {
    if (kept(token)) {
      out.push(made(token));
      positions?.push(at);
      at++;
    } else if (out.length > 0) {
      at++;
    }
  };
  if (analyzer === 'ascii_lower') {
    for (const [token] of text.matchAll(SIMPLE_TOKEN)) push(token, (t) => folded(lower(t)));
    return out;
  }
  if (!analyzableHere(text, analyzer)) return undefined;
  for (const { segment } of words.segment(text)) if (WORD.test(segment)) push(segment, lower);
  return out;
}
