// Values written into the SQL of Lance's filters: parsed values only, never a client's text pasted in.

/**
 * An integer as SQL. The parser reads `-9223372036854775808` as the negation of a literal one past the
 * largest i64, which overflows; that one value is written as a difference instead.
 */
export const integerLiteral = (v: bigint): string => (v === -(2n ** 63n) ? '(-9223372036854775807 - 1)' : v.toString());

/** A string as SQL: quoted, its quotes doubled. */
export const stringLiteral = (s: string): string => `'${s.replaceAll("'", "''")}'`;
