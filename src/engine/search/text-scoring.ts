import type { Table } from 'apache-arrow';
import type { Hits, RowId, TextOperator } from '../rows/source.js';
import { ROW_KEY } from '../tables/schema.js';
import type { TableHandle } from '../tables/tables.js';
import { bm25Scorer, type CollectionStatistics, highestGain } from '../text/bm25.js';
import { type Clause, clausesScorer } from '../text/clauses.js';
import { keysOf } from './result-rows.js';
import type { TextQuery } from './text-query.js';

/**
 * How a text leg scores its hits itself: BM25 over the live rows (docs/api.md, Freshness), for a leg whose index's
 * own statistics no longer describe them (rows outside it, or deletions it still counts).
 */
export interface TextScoring {
  field: string;
  /** The query's tokens under the column's analyzer. */
  query: string[];
  /** With phrases, the query's clauses (its words, each phrase), scored as Lance scores them (`clausesScorer`). */
  clauses: Clause[] | undefined;
  operator: TextOperator;
  stats: CollectionStatistics;
  table: TableHandle;
}

/** The scoring of a text leg over `field` at `version`; undefined when the column's statistics cannot be had. */
export async function textScoring(
  table: TableHandle,
  version: number,
  field: string,
  query: TextQuery,
  operator: TextOperator,
): Promise<TextScoring | undefined> {
  const stats = await table.text.at(version, field);
  if (stats === undefined) return undefined;
  const [tokens = []] = await table.text.tokensOf([query.words], field);
  const widened = (query.anyOf ?? []).map((terms): Clause => ({ tokens: terms, any: true }));
  if (query.phrases.length === 0 && widened.length === 0) {
    return { field, query: tokens, clauses: undefined, operator, stats, table };
  }
  const phrases = await table.text.positionedTokensOf(query.phrases, field);
  const clauses: Clause[] = phrases
    .filter((p) => p.tokens.length > 0)
    .map((p) => ({ tokens: p.tokens, offsets: p.positions.map((at) => at - (p.positions[0] as number)) }));
  if (tokens.length > 0) clauses.push({ tokens });
  clauses.push(...widened);
  return { field, query: tokens, clauses, operator, stats, table };
}

/** The hits with their scores replaced by BM25 over the live rows, from the texts the leg read with them. */
export async function rescored(hits: Hits, scoring: TextScoring): Promise<Hits> {
  return { ...hits, values: await liveScores(textColumn(hits.rows, scoring.field), scoring) };
}

/** Texts of a full-text column by row id, given each row's key: of the rows asked for that are still there. */
export type TextsById = (keys: ReadonlyMap<RowId, bigint>) => Promise<Map<RowId, string | null>>;

/**
 * The BM25 scores over the live rows of the rows of `ids` (those not deleted since): from the tokens the node holds
 * of them (`TableHandle.scoredTokens`), and for the rest from their texts, read by `texts` (by default taken by id).
 */
export async function scoredByIds(
  ids: readonly RowId[],
  scoring: TextScoring,
  texts: TextsById = (missing) => textsByIds(missing, scoring),
): Promise<{ ids: RowId[]; values: number[] }> {
  if (ids.length === 0) return { ids: [], values: [] };
  const { table, field } = scoring;
  const tableId = table.record.tableId;
  const keys = await table.rows.keysOf(ids);
  // Phrases score positions, which are not held.
  const held = scoring.clauses === undefined;
  const tokens = new Map<RowId, readonly string[]>();
  const missing = new Map<RowId, bigint>();
  ids.forEach((id, i) => {
    const key = keys[i];
    if (key === undefined) return;
    const known = held ? table.scoredTokens.get(tableId, field, id) : undefined;
    if (known === undefined) missing.set(id, key);
    else tokens.set(id, known);
  });
  const read = missing.size === 0 ? new Map<RowId, string | null>() : await texts(missing);
  const readIds = [...read.keys()];
  if (!held) return { ids: readIds, values: await liveScores([...read.values()], scoring) };
  const analyzed = await table.text.tokensOf([...read.values()], field);
  readIds.forEach((id, i) => {
    const row = analyzed[i] ?? [];
    tokens.set(id, row);
    table.scoredTokens.set(tableId, field, id, row);
  });
  const found = ids.filter((id) => tokens.has(id));
  const score = bm25Scorer(scoring.query, scoring.stats, (term) => term);
  return { ids: found, values: found.map((id) => score(tokens.get(id) as readonly string[])) };
}

/** The texts of the rows of `keys` (by row id, with each one's key) still there, taken by id. */
export async function textsByIds(
  keys: ReadonlyMap<RowId, bigint>,
  scoring: TextScoring,
): Promise<Map<RowId, string | null>> {
  const idOf = new Map<bigint, RowId>();
  for (const [id, key] of keys) idOf.set(key, id);
  const out = new Map<RowId, string | null>();
  for (const rows of await scoring.table.rows.rowsByKey([...idOf.keys()], [ROW_KEY, scoring.field], idOf)) {
    const texts = textColumn(rows, scoring.field);
    keysOf(rows).forEach((key, i) => {
      out.set(idOf.get(key) as RowId, texts[i] ?? null);
    });
  }
  return out;
}

/** Each text's BM25 score over the live rows. */
async function liveScores(texts: readonly (string | null)[], scoring: TextScoring): Promise<number[]> {
  if (scoring.clauses !== undefined) {
    const rows = await scoring.table.text.positionedTokensOf(texts, scoring.field);
    return rows.map(clausesScorer(scoring.clauses, scoring.operator, scoring.stats));
  }
  const tokens = await scoring.table.text.tokensOf(texts, scoring.field);
  return tokens.map(bm25Scorer(scoring.query, scoring.stats, (term) => term));
}

/**
 * How many times its index score a hit can score over the live rows, at most (`gain`) and at least (`shrink`), when
 * the index's statistics are those of the live rows but `outside` (the rows outside it, none deleted since it was
 * built): nothing else then tells them apart. The least is the inverse of the most the other way round.
 */
export function gainOverIndex(scoring: TextScoring, outside: CollectionStatistics): { gain: number; shrink: number } {
  const live = scoring.stats;
  const index: CollectionStatistics = {
    docs: live.docs - outside.docs,
    tokens: live.tokens - outside.tokens,
    docsWith: (term) => live.docsWith(term) - outside.docsWith(term),
  };
  return { gain: highestGain(scoring.query, live, index), shrink: 1 / highestGain(scoring.query, index, live) };
}

export function textColumn(rows: Table, field: string): (string | null)[] {
  const column = rows.getChild(field);
  return Array.from({ length: rows.numRows }, (_, i) => (column?.get(i) as string | null | undefined) ?? null);
}
