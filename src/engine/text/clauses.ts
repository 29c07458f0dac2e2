import type { TextOperator } from '../rows/source.js';
import { bm25Scorer, type CollectionStatistics } from './bm25.js';
import type { PositionedTokens } from './statistics.js';

/**
 * One clause of a text query with phrases or widened words, tokenized: the words (any or all of them, by the
 * operator), one phrase, whose tokens must stand at these offsets from the first (a stop word the analyzer drops
 * leaves a gap), or (`any`) the terms one widened word stands for, of which a row must hold one.
 */
export interface Clause {
  tokens: string[];
  offsets?: number[];
  any?: true;
}

/** Whether `row` holds the phrase: its tokens at their offsets from some position. */
function holdsPhrase(row: PositionedTokens, phrase: Clause): boolean {
  const offsets = phrase.offsets ?? phrase.tokens.map((_, i) => i);
  const at = new Map<number, string>(row.positions.map((position, i) => [position, row.tokens[i] as string]));
  return row.positions.some((start) => phrase.tokens.every((token, i) => at.get(start + (offsets[i] ?? i)) === token));
}

/**
 * A row's score for a query with phrases, as Lance scores its boolean query: the sum, over the clauses the row
 * matches, of BM25 of the clause's tokens; 0 when it matches too few (none under `or`, not all under `and`).
 */
export function clausesScorer(
  clauses: readonly Clause[],
  operator: TextOperator,
  stats: CollectionStatistics,
): (row: PositionedTokens) => number {
  const scorers = clauses.map((clause) => bm25Scorer(clause.tokens, stats, (t) => t));
  return (row) => {
    let score = 0;
    let matched = 0;
    clauses.forEach((clause, i) => {
      const hit =
        clause.offsets !== undefined
          ? holdsPhrase(row, clause)
          : operator === 'AND' && clause.any !== true
            ? clause.tokens.every((t) => row.tokens.includes(t))
            : clause.tokens.some((t) => row.tokens.includes(t));
      if (!hit) return;
      matched++;
      score += (scorers[i] as (row: ArrayLike<string>) => number)(row.tokens);
    });
    const enough = operator === 'AND' ? matched === clauses.length : matched > 0;
    return enough ? score : 0;
  };
}
