import { FreshGone, type FreshKind, type FreshRead } from '../fresh/rows.js';
import { readingPredicate } from '../predicate/predicate.js';
import type { Hits, RowId, TextOperator } from '../rows/source.js';
import type { TableHandle } from '../tables/tables.js';
import type { VectorLegPlan } from './plan.js';
import { keysOf } from './result-rows.js';
import { gainOverIndex, rescored, scoredByIds, type TextScoring, textColumn, textsByIds } from './text-scoring.js';

// The two legs of a hybrid search, each read from the table's row source with every hit that ties at its window's
// edge.

/**
 * How many times deeper than a leg that reads columns a text leg reads when it scores its hits itself and cannot
 * bound how much higher an unread hit may score (the index may count deleted rows, or the rows outside it are not
 * all in this node's fresh tier): a row the index ranks lower can score higher over the live rows. On
 * bench/search.ts's corpus (200k rows, 10% tail, 5% of rows deleted), 50 text queries' top 10 were those of the
 * folded table for all 50 at 2 (49 at 1).
 */
const RESCORED_DEPTH = 2;

/** Texts a bounded hybrid text leg takes by id at most; more are read with its hits (`readBestScored`). */
const TAKEN_BY_ID = 32;

/**
 * How deep a text leg that can bound unread hits reads at most: `BOUNDED_DEPTH` times the first read of a leg that
 * reads columns, and at least `BOUNDED_READ` hits, so that one query cannot read the text of every row it matches;
 * a row its index ranks deeper than that is missed (docs/api.md, Freshness).
 */
const BOUNDED_DEPTH = 8;
const BOUNDED_READ = 1024;

/** Relative room for the index's scores, which Lance computes in 32-bit floats. */
const INDEX_SCORE_SLACK = 1e-5;

/**
 * Hits a text leg first reads past its window: BM25 scores tie often (same term counts, same length), and row
 * order can break a tie at the window's edge only with every tied row in hand (see `readLeg`).
 */
const TIE_SLACK = 32;

/**
 * How many hits a text leg first reads to rank `ranked` of them (`readLeg`); exported for bench/search.ts. A leg
 * that reads only row ids and scores (both legs run) reads further past: such hits cost little (~0.1 ms per
 * 100), a second read costs a whole query. On bench/search.ts's corpus (1.2M rows, 5,000-word Zipf vocabulary,
 * ranked = 100) the hits tied with the 100th best reached rank 152 at the median and 384 at most; reading 132
 * first read again for 139 of 200 queries (p50 3.5 ms), reading 400 for none (p50 1.8 ms).
 */
export const firstTextRead = (ranked: number, idsOnly: boolean): number =>
  ranked + (idsOnly ? Math.min(Math.max(TIE_SLACK, 3 * ranked), 1000) : TIE_SLACK);

/**
 * A leg's hits, with each one's row key when the leg resolved them (it added hits of its own to the index's), and
 * then the keys it found among the fresh rows beside the index.
 */
export interface LegHits extends Hits {
  keys?: (bigint | undefined)[];
  fresh?: ReadonlySet<bigint>;
}

/** What both legs share: the table, the filter, and how far and with which columns they read. */
export interface LegReads {
  table: TableHandle;
  filter: string | undefined;
  /** Whether both legs run: then each reads only row ids and its measure (`carried` is empty). */
  both: boolean;
  /** Hits a leg ranks: the window when both legs run, else the page's end. */
  ranked: number;
  /** The columns a leg alone reads with its hits. */
  carried: readonly string[];
  /** Rows up to one past the page's end. */
  page: number;
  /**
   * Whether the fresh rows may stand in for what the indexes miss: not where they follow the table and were not
   * brought to the search's version (nothing was outside the indexes), and never with a filter.
   */
  fresh: boolean;
}

/** What a text leg searches: its query and column, how terms combine, and how it reads (see `readTextLeg`). */
export interface TextAsk {
  /** The query's words outside its phrases. */
  query: string;
  phrases: readonly string[];
  /** The words widened by `prefix` or `fuzziness`, each to the terms it stands for (`query` is then empty). */
  anyOf?: readonly (readonly string[])[];
  field: string;
  operator: TextOperator;
  indexedOnly: boolean;
  scoring: TextScoring | undefined;
  /**
   * The search's version and the rows outside the index there, when the index's statistics are otherwise the live
   * rows' (it counts no row deleted since it was built); undefined when it may count some.
   */
  outside: { version: number; rows: number } | undefined;
}

/**
 * The BM25 leg: hits of `query` over `field`, higher scores first; `indexedOnly`: none outside its index. With
 * `scoring`, the leg scores its hits over the live rows from their texts. It reads deeper then, as the index's
 * ranking is only an approximation of that one: beside fresh rows that are all the index lacks, until no unread hit
 * can score above the `ranked`-th best (`gainOverIndex`; a hybrid leg reads hits by id and index score first, and
 * the texts of just those that can, `readBestScored`); else `RESCORED_DEPTH` times as deep.
 */
export function readTextLeg(legs: LegReads, ask: TextAsk): Promise<LegHits> {
  const { table, filter, both, carried, ranked } = legs;
  const { query, phrases, anyOf, field, operator, indexedOnly, scoring, outside } = ask;
  const columns = scoring === undefined || carried.includes(field) ? carried : [...carried, field];
  const read = (fresh: boolean, limit: number, selected: readonly string[]) =>
    readingFilter(() =>
      table.rows.textLeg({
        query,
        phrases,
        anyOf,
        field,
        operator,
        filter,
        limit,
        columns: selected,
        ids: both,
        indexedOnly: indexedOnly || fresh,
      }),
    );
  /** Reads `limit` hits, scored again when the leg scores them, with the lowest score the index gave them. */
  const indexRead = (fresh: boolean) => async (limit: number) => {
    const hits = await read(fresh, limit, columns);
    let lowest = Number.POSITIVE_INFINITY;
    for (const value of hits.values) lowest = Math.min(lowest, value);
    return { ...(scoring === undefined ? hits : await rescored(hits, scoring)), lowest };
  };
  const index = async (fresh: FreshRead | undefined): Promise<Hits> => {
    if (scoring === undefined) {
      return readLeg(indexRead(fresh !== undefined), 'higher', ranked, firstTextRead(ranked, both));
    }
    // Scoring reads each hit's text, which costs as a take of columns does: as deep as a leg that reads columns.
    const first = firstTextRead(ranked, false);
    const deepest = Math.max(BOUNDED_DEPTH * first, BOUNDED_READ);
    // Rows let go of meanwhile (FreshGone) are the fresh search's to notice: this read is then unbounded.
    const beside =
      fresh === undefined || outside === undefined
        ? undefined
        : await table.fresh.statisticsOutside(fresh, field, scoring.query, outside).catch(() => undefined);
    const indexedOnly = fresh !== undefined;
    // When both legs run, hits are read by row id and score alone and then scored, from the tokens held of them
    // (`scoredByIds`) and the texts of the rest. Many such texts are read with the leg's hits, down to the deepest
    // of them: Lance reads texts that way at about half the cost a row of a take by id.
    const texts = (depth: number) => async (missing: ReadonlyMap<RowId, bigint>) => {
      if (missing.size <= TAKEN_BY_ID) return textsByIds(missing, scoring);
      const hits = await read(indexedOnly, depth, [field]);
      const column = textColumn(hits.rows, field);
      const out = new Map<RowId, string | null>();
      hits.ids.forEach((id, i) => {
        if (missing.has(id)) out.set(id, column[i] ?? null);
      });
      const wanted = new Map([...missing].filter(([id]) => !out.has(id)));
      if (wanted.size > 0) for (const [id, text] of await textsByIds(wanted, scoring)) out.set(id, text);
      return out;
    };
    const idsRead = (limit: number) => read(indexedOnly, limit, []);
    const scored = (ids: readonly RowId[], depth: number) => scoredByIds(ids, scoring, texts(depth));
    const bounds = beside === undefined ? undefined : gainOverIndex(scoring, beside);
    if (bounds === undefined || !Number.isFinite(bounds.gain) || !(bounds.shrink > 0)) {
      // Phrases score positions, which are not held: their texts are read with the hits, in one read.
      if (!both || scoring.clauses !== undefined) {
        return readLeg(indexRead(indexedOnly), 'higher', ranked, RESCORED_DEPTH * first);
      }
      const scoredRead = async (limit: number) => {
        const hits = await idsRead(limit);
        const found = await scored(hits.ids, limit);
        return { ...hits, ids: found.ids, values: found.values };
      };
      return readLeg(scoredRead, 'higher', ranked, RESCORED_DEPTH * first);
    }
    if (both) return readBestScored(idsRead, scored, bounds, ranked, firstTextRead(ranked, true), deepest);
    // An unread hit scores at most `gain` times its index score: one scoring less cannot reach the edge.
    const reaches = (edge: number, indexScore: number) => !(bounds.gain * indexScore * (1 + INDEX_SCORE_SLACK) < edge);
    return readLeg(
      indexRead(true),
      'higher',
      ranked,
      first,
      (edge, limit, hits) => limit < deepest && reaches(edge, hits.lowest),
    );
  };
  return readBeside(legs, 'text', {
    index,
    // The fresh rows' scores are BM25 over the live rows: only beside an index whose scores are rescored so too.
    // They hold no positions, nor search widened words: such a query reads the rows outside the index Lance's way.
    fresh:
      scoring === undefined || indexedOnly || phrases.length > 0 || anyOf !== undefined
        ? undefined
        : (read) => table.fresh.searchText(read, field, scoring.query, operator, scoring.stats, ranked),
  });
}

/**
 * A bounded text leg's hits when both legs run, scored over the live rows: hits by row id and index score alone,
 * as deep as an unread hit could still reach the edge, then the scores of just those that can (`scored`, given how
 * deep the last of them is). The edge, the `ranked`-th best live score, is at least `shrink` times the `ranked`-th
 * best index score (those hits all score that much), and a hit scores at most `gain` times its index score.
 */
async function readBestScored(
  idsRead: (limit: number) => Promise<Hits>,
  scored: (ids: readonly RowId[], depth: number) => Promise<{ ids: RowId[]; values: number[] }>,
  bounds: { gain: number; shrink: number },
  ranked: number,
  first: number,
  deepest: number,
): Promise<Hits> {
  for (let limit = first; ; limit = Math.min(2 * limit, deepest)) {
    const hits = await idsRead(limit);
    const { values } = hits;
    const sorted = values.slice().sort((a, b) => b - a);
    const edge = sorted[ranked - 1];
    const floor = edge === undefined ? 0 : bounds.shrink * edge * (1 - INDEX_SCORE_SLACK);
    const reaches = (indexScore: number) => !(bounds.gain * indexScore * (1 + INDEX_SCORE_SLACK) < floor);
    const lowest = sorted[sorted.length - 1] as number;
    if (hits.rows.numRows === limit && limit < deepest && reaches(lowest)) continue;
    let depth = 0;
    const picked = hits.ids.filter((_, i) => {
      const can = reaches(values[i] as number);
      if (can) depth = i + 1;
      return can;
    });
    const found = await scored(picked, depth);
    return { ...hits, ids: found.ids, values: found.values };
  }
}

/** The vector leg: the nearest rows of `field` to `query` by `metric`, nearest first; `indexedOnly` as above. */
export function readVectorLeg(legs: LegReads, vector: VectorLegPlan, ask: VectorAsk): Promise<LegHits> {
  const { table, filter, both, carried, ranked, page } = legs;
  const indexRead = (fresh: boolean) => (limit: number) =>
    readingFilter(() =>
      table.rows.vectorLeg({
        field: vector.field,
        vector: vector.query,
        metric: vector.metric,
        filter,
        limit,
        columns: carried,
        ids: both,
        wanted: page,
        indexedOnly: ask.indexedOnly || fresh,
      }),
    );
  const query = Float32Array.from(vector.query);
  return readBeside(legs, 'vector', {
    // Distances rarely tie: one row past the window shows whether they do.
    index: (fresh) => readLeg(indexRead(fresh !== undefined), 'lower', ranked, ranked + 1),
    // Without an index the leg scans the column exactly in any case, fresh rows included.
    fresh:
      ask.indexed && !ask.indexedOnly
        ? (read) => table.fresh.searchVector(read, vector.field, query, ranked)
        : undefined,
  });
}

/** How a vector leg reads: whether its ANN index exists, and whether it reads only what that covers (eventual). */
export interface VectorAsk {
  indexed: boolean;
  indexedOnly: boolean;
}

/**
 * How long a leg waits for a replace under way to tell the fresh rows what it wrote; past it (a write stuck on its
 * bucket), the leg reads Lance's own way.
 */
const REWRITE_WAIT_MS = 2_000;

/**
 * Reads of an index and the followed rows beside it a leg makes before it reads Lance's own way: each further one
 * follows a commit that removed rows (a replace, a delete, a compaction) during the one before.
 */
const FOLLOWED_READS = 3;

type FreshHits = { keys: bigint[]; values: number[] };

/**
 * A leg's hits: from its index alone and, beside them, from the fresh rows outside that kind of index (`FreshRows`:
 * those this node wrote since its last fold, or followed from the table where nodes share it), when they may stand
 * in for the rest (`LegReads.fresh`); else from the index and whatever Lance reads outside it. The fold is taken
 * before the index is read, so that no row falls between.
 */
async function readBeside(
  legs: LegReads,
  kind: FreshKind,
  read: {
    /** The index's hits; `fresh`: the read of the fresh rows beside it, which it then reads alone. */
    index: (fresh: FreshRead | undefined) => Promise<Hits>;
    /** How the fresh rows are searched; undefined where they may not stand in for what the index misses. */
    fresh: ((read: FreshRead) => Promise<FreshHits>) | undefined;
  },
): Promise<LegHits> {
  const { table } = legs;
  const searchFresh = read.fresh;
  // A filter only Lance evaluates: the by-key reads of a search over several columns are filtered too.
  const freshRead =
    searchFresh !== undefined && legs.fresh && legs.filter === undefined ? table.fresh.begin(kind) : undefined;
  if (searchFresh === undefined || freshRead === undefined) return read.index(undefined);
  const fresh = async (): Promise<FreshHits | undefined> => {
    try {
      return await searchFresh(freshRead);
    } catch (err) {
      // The budget took the fresh rows away meanwhile, or they could not be read (a text only Lance tokenizes,
      // which failed; until the next fold): this search reads Lance's own way.
      if (!(err instanceof FreshGone)) table.fresh.unsettled();
      return undefined;
    }
  };
  try {
    const rewrites = table.changes.rewrites;
    let both = await readBoth(table, read.index, freshRead, fresh);
    // Followed rows (nodes sharing the table): a commit that landed before the index read ended may have moved rows
    // out of the rows searched and into the index after it read (a compaction, then a fold), or left a replaced
    // row out of both. Following up to the latest version tells: where it removed rows, both are read again, and
    // Lance's own way once the table keeps moving or a step takes longer than a search waits. Commits that only
    // added rows or moved them unchanged (as their manifests say) are not waited for.
    for (let attempt = 1; both !== undefined && table.fresh.follows; attempt++) {
      const latest = await table.rows.version();
      if (!(await table.fresh.removesNoneTo(latest)) && !(await table.fresh.followWithin(latest))) {
        both = undefined;
        break;
      }
      if (table.fresh.followedMark === both.mark) break;
      both = attempt < FOLLOWED_READS ? await readBoth(table, read.index, freshRead, fresh) : undefined;
    }
    if (both === undefined) return await read.index(undefined);
    let found: FreshHits | undefined = both.found;
    // A replace this node committed meanwhile may be in the index read (the old row deleted there) and not in the
    // fresh rows searched before it was told (the new row): once it has told them, they are searched again.
    if (table.changes.rewroteSince(rewrites)) {
      // One still under way may have landed unanswered (a slow bucket) and be in the index read: Lance's own way.
      if (!(await table.changes.writesEnded(REWRITE_WAIT_MS))) return await read.index(undefined);
      found = await fresh();
      if (found === undefined) return await read.index(undefined);
    }
    return await besideFresh(legs, both.hits, found);
  } finally {
    table.fresh.end(freshRead);
  }
}

/**
 * The index's hits and the fresh rows' at once (Lance reads the index on its own threads meanwhile), with the
 * fresh rows' followed mark from before the index read began; undefined where the fresh rows could not be read
 * (the index's read is then not awaited).
 */
async function readBoth(
  table: TableHandle,
  index: (fresh: FreshRead) => Promise<Hits>,
  read: FreshRead,
  fresh: () => Promise<FreshHits | undefined>,
): Promise<{ hits: Hits; found: FreshHits; mark: string } | undefined> {
  const mark = table.fresh.followedMark;
  const reading = index(read);
  reading.catch(() => undefined);
  const found = await fresh();
  return found === undefined ? undefined : { hits: await reading, found, mark };
}

/**
 * A leg's hits from its index with those of the fresh rows beside them, every hit's row key resolved: a row both
 * hold (written just before a fold began, which covered it) is the index's hit.
 */
async function besideFresh(
  legs: LegReads,
  indexed: Hits,
  fresh: { keys: bigint[]; values: number[] },
): Promise<LegHits> {
  const keys: (bigint | undefined)[] = legs.both ? await legs.table.rows.keysOf(indexed.ids) : keysOf(indexed.rows);
  const held = new Set(keys);
  const values = [...indexed.values];
  const found = new Set<bigint>();
  fresh.keys.forEach((key, i) => {
    if (held.has(key)) return;
    keys.push(key);
    values.push(fresh.values[i] as number);
    found.add(key);
  });
  return { ...indexed, values, keys, fresh: found };
}

/**
 * Reads a leg's best `ranked` hits and every hit that ties with the last of them, so that row order decides
 * ties there and not the row source. Reads `first` hits, then twice as many while the worst hit read still ties with
 * the `ranked`-th best (an unread hit could tie too), or while `deeper` says an unread hit could pass `edge`, the
 * `ranked`-th best value read.
 */
async function readLeg<H extends Hits>(
  read: (limit: number) => Promise<H>,
  better: 'higher' | 'lower',
  ranked: number,
  first: number,
  deeper?: (edge: number, limit: number, hits: H) => boolean,
): Promise<H> {
  for (let limit = first; ; limit *= 2) {
    const hits = await read(limit);
    const { values } = hits;
    if (hits.rows.numRows < limit) return hits;
    const sorted = values.slice().sort((a, b) => (better === 'higher' ? b - a : a - b));
    const edge = sorted[ranked - 1] as number;
    if (edge !== sorted[sorted.length - 1] && (deeper === undefined || !deeper(edge, limit, hits))) return hits;
  }
}

/** A filter is a predicate too: Lance's refusals of it become 400s. */
const readingFilter = <T>(read: () => Promise<T>): Promise<T> => readingPredicate(read, 'filter');
