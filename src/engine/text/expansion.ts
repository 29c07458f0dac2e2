import type { CollectionStatistics } from './bm25.js';

/** Terms a query word stands for at most, as Lance's fuzzy match takes them (`maxExpansions`). */
export const MAX_EXPANSIONS = 50;

/**
 * Whether `a` is within `max` single-character insertions, deletions and substitutions of `b` (Levenshtein, no
 * transpositions: Lance's fuzzy match measured so, `kettel` is 2 from `kettle`). Rows of the table stop early.
 */
export function withinEdits(a: string, b: string, max: number): boolean {
  if (Math.abs(a.length - b.length) > max) return false;
  if (max === 0) return a === b;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const value = Math.min(
        (previous[j] as number) + 1,
        (current[j - 1] as number) + 1,
        (previous[j - 1] as number) + cost,
      );
      current.push(value);
      if (value < best) best = value;
    }
    if (best > max) return false;
    previous = current;
  }
  return (previous[b.length] as number) <= max;
}

/** How a query word widens: to terms within `fuzziness` edits, or (the last word, with `prefix`) to those it begins. */
export interface Widening {
  fuzziness: number;
  prefix: boolean;
}

/**
 * The terms of the live rows each query token stands for: itself and those within `fuzziness` edits, and for the
 * last token with `prefix`, every term it begins; at most `MAX_EXPANSIONS` each, the token itself and then the most
 * common first (ties by the term), so that the choice is the same wherever the rows lie. A token standing for no
 * term gets none.
 */
export function expansionsOf(
  tokens: readonly string[],
  terms: Iterable<string>,
  stats: Pick<CollectionStatistics, 'docsWith'>,
  widening: Widening,
): string[][] {
  type Found = { term: string; exact: boolean; docs: number };
  const found = tokens.map((): Found[] => []);
  // One pass over the vocabulary for every token: it may hold hundreds of thousands of terms.
  for (const term of terms) {
    tokens.forEach((token, i) => {
      const prefix = widening.prefix && i === tokens.length - 1 && term.startsWith(token);
      if (!prefix && !withinEdits(term, token, widening.fuzziness)) return;
      found[i]?.push({ term, exact: term === token, docs: stats.docsWith(term) });
    });
  }
  const order = (a: Found, b: Found) =>
    Number(b.exact) - Number(a.exact) || b.docs - a.docs || (a.term < b.term ? -1 : a.term > b.term ? 1 : 0);
  return found.map((each) =>
    each
      .sort(order)
      .slice(0, MAX_EXPANSIONS)
      .map((f) => f.term),
  );
}
