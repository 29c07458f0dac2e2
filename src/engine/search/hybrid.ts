import type { Table } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { declarationKey } from '../indexes/registry.js';
import { readingPredicate } from '../predicate/predicate.js';
import type { RowId } from '../rows/source.js';
import { ROW_KEY } from '../tables/schema.js';
import type { TableHandle } from '../tables/tables.js';
import { explainData, type LegRead, type LegReport } from './explain.js';
import { freshnessOf } from './freshness.js';
import { type Fused, fuse, inReach, rankLeg } from './fusion.js';
import { type LegHits, type LegReads, readTextLeg, readVectorLeg, type TextAsk } from './legs.js';
import { type HybridPlan, planHybrid } from './plan.js';
import type { HybridRequest, RowsResult } from './request.js';
import { inRowOrder, keysOf, rowsByKeys } from './result-rows.js';
import { readTextFields } from './text-fields.js';
import { clausesOf, widened } from './text-query.js';
import { textScoring } from './text-scoring.js';

// Hybrid search: a BM25 leg and a vector leg (legs.ts) run side by side, fused by reciprocal rank (fusion.ts).

/** BM25 + vector search fused by reciprocal rank (docs/api.md). */
export async function hybridSearch(table: TableHandle, req: HybridRequest): Promise<RowsResult> {
  const plan = planHybrid(table, req);
  if (plan.filterOnly) return filtered(table, plan, req);
  const { fields, offset, window, operator, filter, textQuery, phrases, widening, textFields, vector } = plan;
  // Each text column's index is its own: one may lag where another does not.
  const texts = textQuery === undefined ? [] : textFields;
  const freshness = await freshnessOf(
    table,
    [
      ...texts.map((t) => declarationKey('fts', t.field)),
      vector === undefined ? undefined : declarationKey('vector', vector.field),
    ],
    req.consistency === 'eventual',
  );
  const { receipt } = freshness;
  // Where nodes share the table, the fresh rows beside the indexes follow it to the search's version first, and are
  // read only then; a step of following that stalls past what a search waits leaves it to Lance's own way.
  const following = table.fresh.follows;
  const wanted = filter === undefined && (!following || freshness.outside.some((rows) => rows > 0));
  const beside = wanted && (!following || (await table.fresh.followWithin(receipt.version)));
  const n = texts.length;
  const textIndexed = n > 0 && freshness.indexed.slice(0, n).every(Boolean);
  const textOutside = Math.max(0, ...freshness.outside.slice(0, n));
  const vectorIndexed = freshness.indexed[n] ?? false;
  const vectorOutside = freshness.outside[n] ?? 0;
  const vectorOnlyIndexed = freshness.indexedOnly[n] ?? false;
  // No leg runs for k = 0: nothing was read outside an index.
  if (req.k === 0) {
    const none = await rowsByKeys(table, [], fields, [], req.explain === true ? { explain: NO_EXPLAIN } : {});
    const members =
      req.explain === true ? { explain: { version: receipt.version, rrf_k: req.rrf_k ?? 60, legs: {} } } : undefined;
    return { ...none, receipt: { ...receipt, freshRows: 0 }, ...(members === undefined ? {} : { members }) };
  }
  // BM25 over the live rows whatever the index state; eventual asks for the index's answer, its scores included.
  // A column where the query makes no token (stop words alone) is not read: it would match nothing.
  const asked = (
    await Promise.all(
      texts.map(async ({ field, boost }, i) => {
        const clauses = await clausesOf(table, field, { words: textQuery as string, phrases });
        const query =
          clauses === undefined ? undefined : await widened(table, receipt.version, field, clauses, widening, operator);
        if (query === undefined) return [];
        const indexedOnly = freshness.indexedOnly[i] ?? false;
        const exact = freshness.exactIndex[i] ?? true;
        const scoring =
          exact || indexedOnly ? undefined : await textScoring(table, receipt.version, field, query, operator);
        const { words, anyOf } = query;
        const outside = freshness.countsDeleted
          ? undefined
          : { version: receipt.version, rows: freshness.outside[i] ?? 0 };
        const ask: TextAsk = {
          query: words,
          phrases: query.phrases,
          anyOf,
          field,
          operator,
          indexedOnly,
          scoring,
          outside,
        };
        return [{ ask, boost }];
      }),
    )
  ).flat();
  const asks = asked.map((a) => a.ask);
  const boosts = asked.map((a) => a.boost);

  // One leg alone ranks as it fuses, so it needs only the rows up to the page's end, not the whole window; but a
  // text leg over several columns draws its candidates from each column's best `window` (`readTextFields`).
  const both = asks.length > 0 && vector !== undefined;
  const ranked = both || asks.length > 1 ? window : offset + req.k;
  // Both legs read only row ids and their measure, and the winners' columns are read after fusion: Lance's
  // take of columns for every candidate cost more than the search (lance/row-keys.ts). One leg alone reads its
  // few candidates' columns with them, as the extra read after it would cost more (~1.4 ms) than it saves.
  const carried = both ? [] : [ROW_KEY, ...fields.map((f) => f.name)];
  // The row id each ranked key had in its leg, for reading the winners' columns (`rowsByKeys`).
  const rowIds = new Map<bigint, RowId>();
  const ranking = async (
    { rows: hits, values, ids, keys: resolved }: LegHits,
    better: 'higher' | 'lower',
    weight: number | undefined,
  ) => {
    const keys = resolved ?? (both ? [] : keysOf(hits));
    // The row key of each hit in `at`; undefined for a row deleted since the leg read it.
    const keysAt = (at: readonly number[]) =>
      both && resolved === undefined
        ? table.rows.keysOf(at.map((i) => ids[i] as RowId))
        : Promise.resolve(at.map((i) => keys[i]));
    // Only hits as good as the `ranked`-th best can be ranked; the rest were read for ties and need no key,
    // unless a deleted row (no key, left out as a later read would leave it out) frees a place for them.
    let at = inReach(values, better, ranked);
    let found = await keysAt(at);
    if (at.length < values.length && found.includes(undefined)) {
      at = values.map((_, i) => i);
      found = await keysAt(at);
    }
    const kept = found.flatMap((key, j) => (key === undefined ? [] : [j]));
    // Hits of the leg's own (fresh rows) have no identity in the row source: they are read by key.
    if (both) {
      for (const j of kept) {
        const id = ids[at[j] as number];
        if (id !== undefined) rowIds.set(found[j] as bigint, id);
      }
    }
    return {
      ...rankLeg(
        kept.map((j) => found[j] as bigint),
        kept.map((j) => values[at[j] as number] as number),
        better,
        ranked,
      ),
      weight: weight ?? 1,
      hits: both ? undefined : hits,
    };
  };
  const legs: LegReads = { table, filter, both, ranked, carried, page: offset + req.k + 1, fresh: beside };
  // What each leg did, for `explain`.
  const reports: { text?: LegReport & { fresh: ReadonlySet<bigint> }; vector?: typeof reports.text } = {};
  const report = (hits: LegHits, started: number, indexed: boolean, outside: number, weight = 1) => ({
    read: readOf(hits, indexed, outside),
    ms: Number((performance.now() - started).toFixed(3)),
    candidates: hits.values.length,
    outside_index: outside,
    weight,
    fresh: hits.fresh ?? new Set<bigint>(),
  });
  const textLeg = async () => {
    const [one] = asks;
    if (one === undefined) return undefined;
    const started = performance.now();
    const hits =
      asks.length === 1 && boosts[0] === 1 ? await readTextLeg(legs, one) : await readTextFields(legs, asks, boosts);
    const ranked = await ranking(hits, 'higher', req.text_weight);
    reports.text = report(hits, started, textIndexed, textOutside, req.text_weight);
    return ranked;
  };
  const vectorLeg = async () => {
    if (vector === undefined) return undefined;
    const started = performance.now();
    const ask = { indexed: vectorIndexed, indexedOnly: vectorOnlyIndexed };
    const hits = await readVectorLeg(legs, vector, ask);
    const ranked = await ranking(hits, 'lower', req.vector_weight);
    reports.vector = report(hits, started, vectorIndexed, vectorOutside, req.vector_weight);
    return ranked;
  };
  const [text, vec] = await Promise.all([textLeg(), vectorLeg()]);
  const rrfK = req.rrf_k ?? 60;
  const winners = fuse(text, vec, { rrfK, offset, k: req.k });
  const fetched = [text?.hits, vec?.hits].filter((hits): hits is Table => hits !== undefined);
  // Winners found among the fresh rows are at hand there: read by key, a row outside the indexes costs a scan.
  const fresh = winners
    .map((w) => w.key)
    .filter((key) => reports.text?.fresh.has(key) || reports.vector?.fresh.has(key));
  const freshBatches = fresh.length === 0 ? [] : table.fresh.rowsOf(fresh);
  if (freshBatches.length > 0) fetched.push(new arrow.Table(freshBatches));
  const explain = req.explain === true ? (rows: readonly Fused[]) => explainData(rows, reports, rrfK) : undefined;
  const rows = await rowsByKeys(
    table,
    winners.map((w) => w.key),
    fields,
    winners,
    { fetched, rowIds, explain },
  );
  if (req.explain !== true) return { ...rows, receipt };
  const legReport = (r: typeof reports.text) => {
    if (r === undefined) return undefined;
    const { fresh: _, ...shown } = r;
    return shown;
  };
  const members = {
    explain: {
      version: receipt.version,
      rrf_k: rrfK,
      legs: { text: legReport(reports.text), vector: legReport(reports.vector) },
    },
  };
  return { ...rows, receipt, members };
}

/**
 * A search with a filter and no leg (docs/api.md): the rows the filter matches in row order, paged by `offset` and
 * `k`, unscored. Every matching row's key is read to order them (keys only: ~8 bytes a row).
 */
async function filtered(table: TableHandle, plan: HybridPlan, req: HybridRequest): Promise<RowsResult> {
  const version = await table.rows.version();
  const matched = await readingPredicate(
    () => table.rows.rowsWhere(plan.filter as string, [ROW_KEY], { userDriven: true }),
    'filter',
  );
  const page = inRowOrder(matched).slice(plan.offset, plan.offset + req.k);
  const unscored = page.map((key) => ({ key, score: 0, bm25: null, distance: null, textRank: null, vectorRank: null }));
  const explain = req.explain === true ? NO_EXPLAIN : undefined;
  const rows = await rowsByKeys(table, page, plan.fields, unscored, { explain, unranked: true });
  const receipt = { version, freshRows: 0 };
  if (req.explain !== true) return { ...rows, receipt };
  return { ...rows, receipt, members: { explain: { version, rrf_k: req.rrf_k ?? 60, legs: {} } } };
}

/** The `_explain` column of no rows. */
const NO_EXPLAIN = (rows: readonly Fused[]) => explainData(rows, {}, 60);

/** How a leg read (`explain`): beside the fresh rows, its index alone, its index and rows outside it, or a scan. */
function readOf(hits: LegHits, indexed: boolean, outside: number): LegRead {
  if (!indexed) return 'scan';
  if (outside === 0) return 'index';
  return hits.fresh === undefined ? 'index_and_scan' : 'index_and_fresh';
}
