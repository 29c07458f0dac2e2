import { BadRequest } from '../../errors.js';

/** One token of a predicate; `at` is its 1-based character position, for messages. */
export type Token =
  | { kind: 'word'; text: string; upper: string; at: number }
  | { kind: 'quoted'; name: string; at: number }
  | { kind: 'number'; text: string; at: number }
  | { kind: 'string'; text: string; at: number }
  | { kind: 'hex'; text: string; at: number }
  | { kind: 'op'; text: string; at: number }
  | { kind: 'end'; at: number };

const WORD_START = /[\p{L}_]/u;
const WORD_PART = /[\p{L}\p{N}_$]/u;
const DIGIT = /[0-9]/;
const NUMBER = /^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?/;
const HEX_BODY = /^[0-9A-Fa-f]*$/;
/** Operators, longest first so that `<=` is not read as `<` then `=`. */
const OPERATORS = [
  '::',
  '<=',
  '>=',
  '<>',
  '!=',
  '==',
  '||',
  '=',
  '<',
  '>',
  '+',
  '-',
  '*',
  '/',
  '%',
  '(',
  ')',
  '[',
  ']',
  ',',
  '.',
];
/** Letters that prefix a string literal in some SQL dialects; Lance's parser has no meaning for any of them. */
const STRING_PREFIXES = new Set(['N', 'B', 'E', 'R', 'U&']);

/** Characters that start something a predicate may not hold, and why. */
function refusal(text: string, i: number): string | undefined {
  const c = text[i];
  const next = text[i + 1] ?? '';
  if (c === ';') return `found ";" at character ${i + 1}: a predicate is one boolean expression, not statements`;
  if (c === '-' && next === '-') return `found a comment ("--") at character ${i + 1}: comments are not allowed`;
  if (c === '/' && next === '*') return `found a comment ("/*") at character ${i + 1}: comments are not allowed`;
  if (c === '"') {
    return `found a double quote at character ${i + 1}: write text in single quotes ('text') and a column name in back quotes (\`name\`)`;
  }
  if (c === '$') {
    return DIGIT.test(next)
      ? `found the placeholder "$${next}" at character ${i + 1}: placeholders are not supported; write the value itself`
      : `found "$" at character ${i + 1}: dollar-quoted strings are not supported; write text in single quotes`;
  }
  if (c === '?') {
    return `found the placeholder "?" at character ${i + 1}: placeholders are not supported; write the value itself`;
  }
  if (c === ':' && next !== ':') {
    return `found the placeholder ":" at character ${i + 1}: placeholders are not supported; write the value itself`;
  }
  if (c === '@') return `found "@" at character ${i + 1}: variables are not supported`;
  return undefined;
}

/** The end of a quoted run that starts at `start` (the opening quote), doubled quotes standing for one. */
function closingQuote(text: string, start: number, quote: string, what: string): number {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] !== quote) continue;
    if (text[i + 1] === quote) {
      i++;
      continue;
    }
    return i;
  }
  throw new BadRequest(`the ${what} that starts at character ${start + 1} is not closed`);
}

/**
 * Splits a predicate into tokens, refusing at once what no predicate may hold: statements, comments, placeholders,
 * prefixed or dollar-quoted strings, double quotes (a string to Lance, a name to everyone else).
 */
export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++;
      continue;
    }
    const refused = refusal(text, i);
    if (refused !== undefined) throw new BadRequest(refused);
    const at = i + 1;
    if (c === "'") {
      const end = closingQuote(text, i, "'", 'string');
      tokens.push({ kind: 'string', text: text.slice(i, end + 1), at });
      i = end + 1;
      continue;
    }
    if (c === '`') {
      const end = closingQuote(text, i, '`', 'back-quoted name');
      tokens.push({ kind: 'quoted', name: text.slice(i + 1, end).replaceAll('``', '`'), at });
      i = end + 1;
      continue;
    }
    const number = DIGIT.test(c) || (c === '.' && DIGIT.test(text[i + 1] ?? '')) ? NUMBER.exec(text.slice(i)) : null;
    if (number !== null) {
      const after = text[i + number[0].length] ?? '';
      if (WORD_PART.test(after)) throw new BadRequest(`"${number[0]}${after}…" at character ${at} is not a number`);
      tokens.push({ kind: 'number', text: number[0], at });
      i += number[0].length;
      continue;
    }
    if (WORD_START.test(c)) {
      let end = i + 1;
      while (end < text.length && WORD_PART.test(text[end] as string)) end++;
      const word = text.slice(i, end);
      const upper = word.toUpperCase();
      const prefix = text[end] === '&' && upper === 'U' ? 'U&' : upper;
      if (text[end] === "'" || (prefix === 'U&' && text[end + 1] === "'")) {
        if (upper === 'X') {
          const close = closingQuote(text, end, "'", 'hex string');
          const body = text.slice(end + 1, close);
          if (!HEX_BODY.test(body)) throw new BadRequest(`X'${body}' at character ${at} is not hexadecimal`);
          tokens.push({ kind: 'hex', text: `X'${body}'`, at });
          i = close + 1;
          continue;
        }
        if (STRING_PREFIXES.has(prefix)) {
          throw new BadRequest(
            `found ${prefix}'…' at character ${at}: prefixed strings are not supported; write 'text'`,
          );
        }
      }
      tokens.push({ kind: 'word', text: word, upper, at });
      i = end;
      continue;
    }
    const op = OPERATORS.find((o) => text.startsWith(o, i));
    if (op === undefined) throw new BadRequest(`unexpected character "${c}" at character ${at}`);
    tokens.push({ kind: 'op', text: op, at });
    i += op.length;
  }
  tokens.push({ kind: 'end', at: text.length + 1 });
  return tokens;
}
