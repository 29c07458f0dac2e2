import { randomBytes } from 'node:crypto';
import type { PositionedToken } from '../rows/source.js';
import type { PositionedTokens } from './statistics.js';

/**
 * A word no text holds: letters and digits (one token under every analyzer), ending in a digit (no stemmer strips
 * it), not a stop word. Random per process, so that no client can write it.
 */
const SEPARATOR = `zq${randomBytes(12).toString('hex')}7`;

/** Texts joined into one call, at most: a call costs ~0.3 ms whatever it holds, a text a few µs. */
const MAX_TEXTS = 512;
const MAX_CHARS = 256 * 1024;

/** One text's tokens, its first at position 0. */
function alone(tokens: readonly PositionedToken[]): PositionedTokens {
  const start = tokens[0]?.position ?? 0;
  return { tokens: tokens.map((t) => t.text), positions: tokens.map((t) => t.position - start) };
}

/**
 * Each text's tokens with their positions, from a tokenizer that takes one text a call (Lance's), asked for many
 * texts at once: they are joined with a separator word between them, and its tokens cut at the separators.
 * Positions restart for each text, counted as the text alone would count them: from its first token, with the
 * gaps of words the analyzer dropped after it.
 */
export async function tokenizeMany(
  texts: readonly string[],
  tokenize: (text: string) => Promise<PositionedToken[]>,
): Promise<PositionedTokens[]> {
  const out: PositionedTokens[] = [];
  for (let at = 0; at < texts.length; ) {
    let end = at;
    let chars = 0;
    while (
      end < texts.length &&
      end - at < MAX_TEXTS &&
      (end === at || chars + (texts[end] as string).length <= MAX_CHARS)
    ) {
      chars += (texts[end] as string).length + SEPARATOR.length + 2;
      end++;
    }
    const batch = texts.slice(at, end);
    const tokens = await tokenize(batch.join(` ${SEPARATOR} `));
    const cut: PositionedTokens[] = [];
    let current: PositionedTokens = { tokens: [], positions: [] };
    // Alone, a text's first token is at position 0, whatever the analyzer dropped before it.
    let start: number | undefined;
    for (const token of tokens) {
      if (token.text === SEPARATOR) {
        cut.push(current);
        current = { tokens: [], positions: [] };
        start = undefined;
        continue;
      }
      start ??= token.position;
      current.tokens.push(token.text);
      current.positions.push(token.position - start);
    }
    cut.push(current);
    // An analyzer that did not keep the separator whole (none known does) gets each text alone.
    if (cut.length === batch.length) out.push(...cut);
    else for (const text of batch) out.push(alone(await tokenize(text)));
    at = end;
  }
  return out;
}
