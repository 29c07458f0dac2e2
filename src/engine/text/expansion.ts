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
 * last token with `prefix`, every term it begins; at most `MAX_EXPANSIONS` each, the nearest and then the most
 * common first (ties by the term), so that the choice is the same wherever the rows lie. A token standing for no
 * term gets none.
 */
export function expansionsOf(
  tokens: readonly string[],
  terms: Iterable<string>,
  stats: Pick<CollectionStatistics, 'docsWith'>,
  widening: Widening,
): string[][] {
  const vocabulary = [...terms];
  return tokens.map((token, i) => {
    const prefix = widening.prefix && i === tokens.length - 1;
    const found: { term: string; distance: number; docs: number }[] = [];
    for (const term of vocabulary) {
      let distance: number | undefined;
      if (prefix && term.startsWith(token)) distance = 0;
      else if (withinEdits(term, token, widening.fuzziness)) distance = term === token ? 0 : 1;
      if (distance !== undefined) found.push({ term, distance, docs: stats.docsWith(term) });
    }
    found.sort(
      (a, b) => a.distance - b.distance || b.docs - a.docs || (a.term < b.term ? -1 : a.term > b.term ? 1 : 0),
    );
    return found.slice(0, MAX_EXPANSIONS).map((f) => f.term);
  });
}
