import type { Field } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { BadRequest } from '../../errors.js';
import { JOINING_FUNCTIONS, PREDICATE_FUNCTIONS, UNBOUNDED_FUNCTIONS } from './functions.js';
import { type Token, tokenize } from './lexer.js';

/** Deeper nesting than this is refused: no one writes it, and it would only load the parsers' stacks. */
export const MAX_DEPTH = 64;

/**
 * At most this many levels of parentheses and brackets in the predicate as written back for Lance. Lance's SQL
 * parser refuses an expression nested past its recursion limit; the costliest shapes (alternating AND and OR,
 * chains of NOT, comparisons nested on the right) reached it at 23 levels of this written form.
 */
export const MAX_WRITTEN_DEPTH = 16;

/**
 * At most this many joins of text (`||`, or concat's arguments past the first) in one predicate. Each join of two
 * columns makes a value as long as both for every row a batch holds, so a few thousand of them in a long
 * predicate would build terabytes; a few serve every filter anyone writes.
 */
export const MAX_JOINS = 16;

/** The types a CAST or a typed literal (`DATE '2024-01-01'`) may name: those Lance's planner reads. */
const TYPES = new Set([
  'TINYINT',
  'SMALLINT',
  'INT',
  'INTEGER',
  'BIGINT',
  'FLOAT',
  'DOUBLE',
  'STRING',
  'BINARY',
  'BOOLEAN',
  'DATE',
  'TIMESTAMP',
  'DATETIME',
  'DECIMAL',
]);
const INTEGER_TYPES = new Set(['TINYINT', 'SMALLINT', 'INT', 'INTEGER', 'BIGINT']);
/** Precisions Lance takes for TIMESTAMP(p) and DATETIME(p). */
const TIME_PRECISIONS = new Set(['0', '3', '6', '9']);

const COMPARISONS: Readonly<Record<string, string>> = {
  '=': '=',
  '==': '=',
  '!=': '!=',
  '<>': '!=',
  '<': '<',
  '<=': '<=',
  '>': '>',
  '>=': '>=',
};

/** Words that start a clause of a statement: found after a predicate, they are what Lance used to drop unseen. */
const CLAUSE_WORDS = new Set([
  'LIMIT',
  'OFFSET',
  'ORDER',
  'GROUP',
  'HAVING',
  'QUALIFY',
  'WINDOW',
  'FETCH',
  'UNION',
  'INTERSECT',
  'EXCEPT',
  'FROM',
  'WHERE',
  'INTO',
  'FOR',
  'RETURNING',
]);
/** Words that start something a predicate may not hold, and why. */
const REFUSED_WORDS: Readonly<Record<string, string>> = {
  SELECT: 'subqueries are not allowed',
  EXISTS: 'subqueries are not allowed',
  WITH: 'subqueries are not allowed',
  VALUES: 'subqueries are not allowed',
  CASE: 'CASE is not supported; combine conditions with AND, OR and NOT',
  INTERVAL: 'INTERVAL literals are not supported',
  EXTRACT: 'EXTRACT is not supported; use date_part',
  DISTINCT: 'DISTINCT is not allowed',
};

/** How a token reads in a message. */
function shown(token: Token): string {
  switch (token.kind) {
    case 'end':
      return 'the end of the predicate';
    case 'word':
      return `"${token.text}"`;
    case 'quoted':
      return `\`${token.name}\``;
    default:
      return `"${token.text}"`;
  }
}

/** A name back-quoted for Lance, a back quote inside it doubled. */
const backquoted = (name: string) => `\`${name.replaceAll('`', '``')}\``;

/** The deepest nesting of parentheses and brackets in `text`, outside its quoted strings and names. */
function writtenDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let quote: string | undefined;
  for (const c of text) {
    if (quote !== undefined) {
      // A doubled quote closes and opens again: the depth is the same either way.
      if (c === quote) quote = undefined;
    } else if (c === "'" || c === '`') quote = c;
    else if (c === '(' || c === '[') deepest = Math.max(deepest, ++depth);
    else if (c === ')' || c === ']') depth--;
  }
  return deepest;
}

/**
 * A recursive-descent parser of one boolean expression, in the dialect Lance reads, that writes the expression
 * back fully parenthesized, with every column named exactly as the table spells it: what reaches Lance is only what
 * this grammar understood, so nothing after the expression (`LIMIT 1`, `; DROP …`) can be dropped unseen.
 */
class Parser {
  private readonly tokens: Token[];
  private at = 0;
  private depth = 0;
  private joins = 0;

  constructor(
    text: string,
    private readonly columns: readonly Field[],
  ) {
    this.tokens = tokenize(text);
  }

  whole(): string {
    const expression = this.expression();
    const depth = writtenDepth(expression);
    if (depth > MAX_WRITTEN_DEPTH) {
      throw new BadRequest(
        `the expression nests ${depth} levels deep once its operators are grouped; the limit is ${MAX_WRITTEN_DEPTH}`,
      );
    }
    const next = this.peek();
    if (next.kind !== 'end') {
      const clause =
        next.kind === 'word' && CLAUSE_WORDS.has(next.upper) ? ` (${next.upper} is not part of a predicate)` : '';
      throw new BadRequest(
        `found ${shown(next)} at character ${next.at} after the end of the expression${clause}: a predicate is exactly one boolean expression`,
      );
    }
    return expression;
  }

  private peek(ahead = 0): Token {
    return this.tokens[Math.min(this.at + ahead, this.tokens.length - 1)] as Token;
  }

  private next(): Token {
    const token = this.peek();
    if (token.kind !== 'end') this.at++;
    return token;
  }

  private isWord(word: string, ahead = 0): boolean {
    const token = this.peek(ahead);
    return token.kind === 'word' && token.upper === word;
  }

  private isOp(op: string, ahead = 0): boolean {
    const token = this.peek(ahead);
    return token.kind === 'op' && token.text === op;
  }

  private takeWord(word: string): boolean {
    if (!this.isWord(word)) return false;
    this.at++;
    return true;
  }

  private takeOp(op: string): boolean {
    if (!this.isOp(op)) return false;
    this.at++;
    return true;
  }

  private expect(op: string, context: string): void {
    if (!this.takeOp(op)) {
      const token = this.peek();
      throw new BadRequest(`expected "${op}" ${context} at character ${token.at}, found ${shown(token)}`);
    }
  }

  private nested<T>(parse: () => T): T {
    if (++this.depth > MAX_DEPTH) {
      throw new BadRequest(`the expression is nested deeper than ${MAX_DEPTH} levels (at character ${this.peek().at})`);
    }
    try {
      return parse();
    } finally {
      this.depth--;
    }
  }

  private joined(count: number): void {
    this.joins += count;
    if (this.joins > MAX_JOINS) {
      throw new BadRequest(
        `the predicate joins text more than ${MAX_JOINS} times (|| or concat, at character ${this.peek().at})`,
      );
    }
  }

  private expression(): string {
    return this.nested(() => this.or());
  }

  /**
   * Terms joined by operators of one precedence, written as one flat group: `(a OR b OR c)`, which Lance reads
   * left to right as it read the original, without a level of nesting per term.
   */
  private chain(term: () => string, operator: () => string | undefined): string {
    const parts = [term()];
    for (let op = operator(); op !== undefined; op = operator()) parts.push(op, term());
    return parts.length === 1 ? (parts[0] as string) : `(${parts.join(' ')})`;
  }

  private or(): string {
    return this.chain(
      () => this.and(),
      () => (this.takeWord('OR') ? 'OR' : undefined),
    );
  }

  private and(): string {
    return this.chain(
      () => this.not(),
      () => (this.takeWord('AND') ? 'AND' : undefined),
    );
  }

  private not(): string {
    if (this.takeWord('NOT')) return this.nested(() => `(NOT ${this.not()})`);
    return this.comparison();
  }

  /** A value, then any comparisons, IS tests, IN lists, BETWEEN ranges and LIKE patterns that follow it. */
  private comparison(): string {
    let left = this.concat();
    for (;;) {
      const token = this.peek();
      if (token.kind === 'op' && COMPARISONS[token.text] !== undefined) {
        this.at++;
        left = `(${left} ${COMPARISONS[token.text]} ${this.concat()})`;
        continue;
      }
      if (this.takeWord('IS')) {
        const negated = this.takeWord('NOT') ? ' NOT' : '';
        const what = this.next();
        if (what.kind !== 'word' || !['NULL', 'TRUE', 'FALSE'].includes(what.upper)) {
          throw new BadRequest(`expected NULL, TRUE or FALSE after IS at character ${what.at}, found ${shown(what)}`);
        }
        left = `(${left} IS${negated} ${what.upper})`;
        continue;
      }
      const negated = this.isWord('NOT') && ['IN', 'BETWEEN', 'LIKE', 'ILIKE'].some((w) => this.isWord(w, 1));
      if (negated) this.at++;
      const not = negated ? 'NOT ' : '';
      if (this.takeWord('IN')) {
        left = `(${left} ${not}IN (${this.inList()}))`;
        continue;
      }
      if (this.takeWord('BETWEEN')) {
        const low = this.concat();
        if (!this.takeWord('AND')) {
          const found = this.peek();
          throw new BadRequest(`expected AND in BETWEEN at character ${found.at}, found ${shown(found)}`);
        }
        left = `(${left} ${not}BETWEEN ${low} AND ${this.concat()})`;
        continue;
      }
      const like = this.isWord('LIKE') ? 'LIKE' : this.isWord('ILIKE') ? 'ILIKE' : undefined;
      if (like !== undefined) {
        this.at++;
        const pattern = this.concat();
        let escaped = '';
        if (this.takeWord('ESCAPE')) {
          const token = this.next();
          if (token.kind !== 'string') {
            throw new BadRequest(`expected a quoted character after ESCAPE at character ${token.at}`);
          }
          escaped = ` ESCAPE ${token.text}`;
        }
        left = `(${left} ${not}${like} ${pattern}${escaped})`;
        continue;
      }
      return left;
    }
  }

  private inList(): string {
    this.expect('(', 'after IN');
    if (this.isWord('SELECT') || this.isWord('WITH')) {
      throw new BadRequest(`found a subquery at character ${this.peek().at}: subqueries are not allowed`);
    }
    const items = [this.expression()];
    while (this.takeOp(',')) items.push(this.expression());
    this.expect(')', 'to close the IN list');
    return items.join(', ');
  }

  private concat(): string {
    return this.chain(
      () => this.additive(),
      () => {
        if (!this.takeOp('||')) return undefined;
        this.joined(1);
        return '||';
      },
    );
  }

  private additive(): string {
    return this.chain(
      () => this.multiplicative(),
      () => this.takeAnyOp(['+', '-']),
    );
  }

  private multiplicative(): string {
    return this.chain(
      () => this.unary(),
      () => this.takeAnyOp(['*', '/', '%']),
    );
  }

  private takeAnyOp(ops: readonly string[]): string | undefined {
    const op = ops.find((o) => this.isOp(o));
    if (op !== undefined) this.at++;
    return op;
  }

  private unary(): string {
    if (this.takeOp('-')) {
      const token = this.peek();
      // Lance reads a minus before a number as a negative literal: -9223372036854775808 is then an i64.
      if (token.kind === 'number') {
        this.at++;
        return `(-${token.text})`;
      }
      return this.nested(() => `(- ${this.unary()})`);
    }
    if (this.isOp('+')) {
      throw new BadRequest(`found a unary "+" at character ${this.peek().at}: it is not supported; drop it`);
    }
    return this.postfix();
  }

  /** A value, then any `::type` casts and `[index]` subscripts. */
  private postfix(): string {
    let value = this.primary();
    for (;;) {
      if (this.takeOp('::')) {
        value = `CAST(${value} AS ${this.type()})`;
        continue;
      }
      if (this.takeOp('[')) {
        value = `${value}[${this.expression()}]`;
        this.expect(']', 'to close the subscript');
        continue;
      }
      return value;
    }
  }

  private primary(): string {
    const token = this.next();
    switch (token.kind) {
      case 'number':
      case 'string':
      case 'hex':
        return token.text;
      case 'quoted':
        return this.column(token.name, true, token.at);
      case 'op':
        if (token.text === '(') {
          if (this.isWord('SELECT') || this.isWord('WITH') || this.isWord('VALUES')) {
            throw new BadRequest(`found a subquery at character ${this.peek().at}: subqueries are not allowed`);
          }
          const inner = this.expression();
          this.expect(')', `to close the "(" at character ${token.at}`);
          return inner;
        }
        if (token.text === '[') return this.array(token.at);
        throw new BadRequest(`expected a value at character ${token.at}, found ${shown(token)}`);
      case 'end':
        throw new BadRequest(`the predicate ends where a value was expected (character ${token.at})`);
      case 'word':
        return this.word(token);
    }
  }

  private word(token: Token & { kind: 'word' }): string {
    const refused = REFUSED_WORDS[token.upper];
    if (refused !== undefined) throw new BadRequest(`found ${token.upper} at character ${token.at}: ${refused}`);
    if (token.upper === 'TRUE' || token.upper === 'FALSE' || token.upper === 'NULL') return token.upper;
    if (token.upper === 'CAST' || token.upper === 'TRY_CAST') {
      this.expect('(', `after ${token.upper}`);
      const value = this.expression();
      if (!this.takeWord('AS')) throw new BadRequest(`expected AS in ${token.upper} at character ${this.peek().at}`);
      const type = this.type();
      this.expect(')', `to close ${token.upper}`);
      return `${token.upper}(${value} AS ${type})`;
    }
    if (this.isOp('(')) return this.call(token);
    if (TYPES.has(token.upper) && this.peek().kind === 'string') {
      // A typed literal such as DATE '2024-01-01'; a column of that name is written `date`.
      const literal = this.next() as Token & { kind: 'string' };
      return `${token.upper} ${literal.text}`;
    }
    if (
      CLAUSE_WORDS.has(token.upper) ||
      ['AND', 'OR', 'IS', 'IN', 'BETWEEN', 'LIKE', 'ILIKE', 'AS'].includes(token.upper)
    ) {
      throw new BadRequest(`expected a value at character ${token.at}, found ${shown(token)}`);
    }
    return this.column(token.text, false, token.at);
  }

  /**
   * A column, resolved as Lance resolves a bare name (exactly, else ignoring case; a back-quoted one exactly), with
   * any `.field` path into its structs resolved the same way: only names the table has reach Lance.
   */
  private column(name: string, quoted: boolean, at: number): string {
    if (name.startsWith('_')) {
      throw new BadRequest(`no column named "${name}" (names starting with _ are reserved)`);
    }
    const field = resolve(this.columns, name, quoted);
    if (field === undefined) {
      const list = this.columns.map((c) => c.name).join(', ');
      throw new BadRequest(`no column named "${name}" (character ${at}); the table's columns are ${list}`);
    }
    let path = backquoted(field.name);
    let current = field;
    while (this.takeOp('.')) {
      const token = this.next();
      if (token.kind !== 'word' && token.kind !== 'quoted') {
        throw new BadRequest(`expected a field name after "." at character ${token.at}, found ${shown(token)}`);
      }
      const wanted = token.kind === 'word' ? token.text : token.name;
      const children = current.type.typeId === arrow.Type.Struct ? (current.type.children as Field[]) : [];
      const child = resolve(children, wanted, token.kind === 'quoted');
      if (child === undefined) {
        throw new BadRequest(
          children.length === 0
            ? `"${path}" has no fields (character ${token.at}): it is not a struct`
            : `${path} has no field "${wanted}" (character ${token.at}); its fields are ${children.map((c) => c.name).join(', ')}`,
        );
      }
      path += `.${backquoted(child.name)}`;
      current = child;
    }
    return path;
  }

  private call(token: Token & { kind: 'word' }): string {
    const name = token.text.toLowerCase();
    if (UNBOUNDED_FUNCTIONS.has(name)) {
      throw new BadRequest(
        `function ${name} is not allowed in a predicate (at character ${token.at}): it can build values of any size`,
      );
    }
    if (!PREDICATE_FUNCTIONS.has(name)) {
      throw new BadRequest(
        `function ${name} is not available in predicates (at character ${token.at}); see "Predicates" in docs/api.md for those that are`,
      );
    }
    this.expect('(', `after ${name}`);
    const args: string[] = [];
    if (!this.isOp(')')) {
      if (this.isWord('DISTINCT'))
        throw new BadRequest(`found DISTINCT at character ${this.peek().at}: it is not allowed`);
      args.push(this.expression());
      while (this.takeOp(',')) args.push(this.expression());
    }
    this.expect(')', `to close the call of ${name}`);
    if (JOINING_FUNCTIONS.has(name)) this.joined(Math.max(0, args.length - 1));
    return `${name}(${args.join(', ')})`;
  }

  private array(at: number): string {
    const items: string[] = [];
    if (!this.isOp(']')) {
      do {
        const negative = this.takeOp('-');
        const token = this.next();
        const literal =
          token.kind === 'number' ||
          (!negative && (token.kind === 'string' || token.kind === 'hex')) ||
          (!negative && token.kind === 'word' && ['TRUE', 'FALSE', 'NULL'].includes(token.upper));
        if (!literal) {
          throw new BadRequest(`the list at character ${at} may hold only literal values; found ${shown(token)}`);
        }
        items.push(`${negative ? '-' : ''}${token.kind === 'word' ? token.upper : token.text}`);
      } while (this.takeOp(','));
    }
    this.expect(']', `to close the list at character ${at}`);
    return `[${items.join(', ')}]`;
  }

  private type(): string {
    const token = this.next();
    if (token.kind !== 'word' || !TYPES.has(token.upper)) {
      throw new BadRequest(
        `cannot cast to ${shown(token)} (character ${token.at}); the types are ${[...TYPES].join(', ')}`,
      );
    }
    return this.typeAfter(token);
  }

  /** The rest of a type whose name is `token`: UNSIGNED, a precision, or DECIMAL's precision and scale. */
  private typeAfter(token: Token & { kind: 'word' }): string {
    let type = token.upper;
    if (INTEGER_TYPES.has(type) && this.takeWord('UNSIGNED')) return `${type} UNSIGNED`;
    if ((type === 'TIMESTAMP' || type === 'DATETIME') && this.takeOp('(')) {
      const precision = this.next();
      if (precision.kind !== 'number' || !TIME_PRECISIONS.has(precision.text)) {
        throw new BadRequest(`${type} takes a precision of 0, 3, 6 or 9 (character ${precision.at})`);
      }
      this.expect(')', `to close ${type}'s precision`);
      type = `${type}(${precision.text})`;
    } else if (type === 'DECIMAL') {
      this.expect('(', 'after DECIMAL (it takes a precision and a scale)');
      const precision = this.next();
      this.expect(',', "between DECIMAL's precision and scale");
      const scale = this.next();
      this.expect(')', "to close DECIMAL's precision and scale");
      const p = precision.kind === 'number' && /^\d+$/.test(precision.text) ? Number(precision.text) : Number.NaN;
      const s = scale.kind === 'number' && /^\d+$/.test(scale.text) ? Number(scale.text) : Number.NaN;
      // Lance's planner panics past 38 digits, and refuses a precision of 0 with its own source path.
      if (!(p >= 1 && p <= 38 && s >= 0 && s <= p)) {
        throw new BadRequest(
          `DECIMAL takes a precision of 1 to 38 and a scale of 0 to the precision (character ${token.at})`,
        );
      }
      type = `DECIMAL(${p}, ${s})`;
    }
    return type;
  }
}

/**
 * Parses a predicate over `columns` (the table's own fields) and writes it back as Lance will read it: one boolean
 * expression, each operator's terms grouped in parentheses, columns back-quoted with the table's spelling. Throws BadRequest naming what
 * was found when it is anything else.
 */
export function canonicalPredicate(text: string, columns: readonly Field[]): string {
  return new Parser(text, columns).whole();
}

/** The field named `name`: exactly, else (a bare name) ignoring case. */
function resolve(fields: readonly Field[], name: string, quoted: boolean): Field | undefined {
  const exact = fields.find((f) => f.name === name);
  if (exact !== undefined || quoted) return exact;
  const lower = name.toLowerCase();
  return fields.find((f) => f.name.toLowerCase() === lower);
}
