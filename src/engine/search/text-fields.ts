import { arrow } from '../../arrow/arrow.js';
import { ROW_KEY, withinRowKeys } from '../tables/schema.js';
import { type LegHits, type LegReads, readTextLeg, type TextAsk } from './legs.js';

// A text leg over several full-text columns (docs/api.md, `text_fields`): Σ boost × BM25 of each column.

const NO_ROWS = new arrow.Table({ [ROW_KEY]: arrow.vectorFromArray([], new arrow.Int64()) });

/** Every hit's row key: resolved by the leg (it read fresh rows beside its index), or from its row ids. */
async function keysOf(legs: LegReads, hits: LegHits): Promise<(bigint | undefined)[]> {
  return hits.keys ?? legs.table.rows.keysOf(hits.ids);
}

/**
 * The text leg over `asks` (one column each, in the order of `boosts`): each column is read as a leg of its own,
 * and a row's score is the sum of boost × its score in each column. A row one column ranked among its best but
 * another did not is then scored in that other column too, by a read of that column limited to such rows, so
 * that every candidate's sum is whole. Candidates are the rows some column ranks among its best `ranked`: a row
 * no column ranks so high is not one, however its sum compares.
 */
export async function readTextFields(
  legs: LegReads,
  asks: readonly TextAsk[],
  boosts: readonly number[],
): Promise<LegHits> {
  // Row ids and scores only: the winners' columns are read once the legs are fused.
  const own: LegReads = { ...legs, both: true, carried: [] };
  const perField = await Promise.all(asks.map((ask) => readTextLeg(own, ask)));
  const sums = new Map<bigint, number>();
  const scoredIn = new Map<bigint, Set<number>>();
  const fresh = new Set<bigint>();
  const add = (key: bigint, field: number, score: number) => {
    sums.set(key, (sums.get(key) ?? 0) + (boosts[field] ?? 1) * score);
    const fields = scoredIn.get(key) ?? new Set<number>();
    fields.add(field);
    scoredIn.set(key, fields);
  };
  await Promise.all(
    perField.map(async (hits, field) => {
      const keys = await keysOf(own, hits);
      keys.forEach((key, i) => {
        if (key !== undefined) add(key, field, hits.values[i] as number);
      });
      for (const key of hits.fresh ?? []) fresh.add(key);
    }),
  );
  // Each column's scores of the candidates it did not rank (0 where it does not match them).
  await Promise.all(
    asks.map(async (ask, field) => {
      const missing = [...sums.keys()].filter((key) => !scoredIn.get(key)?.has(field));
      if (missing.length === 0) return;
      const filter = withinRowKeys(missing, legs.filter);
      const hits = await readTextLeg({ ...own, filter, ranked: missing.length }, ask);
      const keys = await keysOf(own, hits);
      keys.forEach((key, i) => {
        if (key !== undefined && sums.has(key) && !scoredIn.get(key)?.has(field)) {
          add(key, field, hits.values[i] as number);
        }
      });
    }),
  );
  const keys = [...sums.keys()];
  // Read beside the fresh rows only if some column's leg was (`explain` tells a leg's read by it).
  const beside = perField.some((hits) => hits.fresh !== undefined);
  return {
    rows: NO_ROWS,
    values: keys.map((key) => sums.get(key) as number),
    ids: [],
    keys,
    fresh: beside ? fresh : undefined,
  };
}
