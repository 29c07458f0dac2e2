import type { Table } from 'apache-arrow';
import { declarationKey } from '../indexes/registry.js';
import type { RowId } from '../rows/source.js';
import { ROW_KEY } from '../tables/schema.js';
import type { TableHandle } from '../tables/tables.js';
import { freshnessOf } from './freshness.js';
import { fuse, inReach, rankLeg } from './fusion.js';
import { type LegHits, type LegReads, readTextLeg, readVectorLeg } from './legs.js';
import { planHybrid } from './plan.js';
import type { HybridRequest, RowsResult } from './request.js';
import { keysOf, rowsByKeys } from './result-rows.js';
import { textScoring } from './text-scoring.js';

// Hybrid search: a BM25 leg and a vector leg (legs.ts) run side by side, fused by reciprocal rank (fusion.ts).

/** BM25 + vector search fused by reciprocal rank (docs/api.md). */
export async function hybridSearch(table: TableHandle, req: HybridRequest): Promise<RowsResult> {
  const { fields, offset, window, operator, filter, textQuery, textField, vector } = planHybrid(table, req);
  const {
    receipt,
    indexed: [, vectorIndexed = false],
    indexedOnly: [textOnlyIndexed = false, vectorOnlyIndexed = false],
    exactIndex: [textIndexExact = true],
  } = await freshnessOf(
    table,
    [
      textQuery === undefined || textField === undefined ? undefined : declarationKey('fts', textField),
      vector === undefined ? undefined : declarationKey('vector', vector.field),
    ],
    req.consistency === 'eventual',
  );
  // No leg runs for k = 0: nothing was read outside an index.
  if (req.k === 0) return { ...(await rowsByKeys(table, [], fields, [])), receipt: { ...receipt, freshRows: 0 } };
  // BM25 over the live rows whatever the index state; eventual asks for the index's answer, its scores included.
  const scoring =
    textQuery === undefined || textField === undefined || textIndexExact || textOnlyIndexed
      ? undefined
      : await textScoring(table, receipt.version, textField, textQuery);

  // One leg alone ranks as it fuses, so it needs only the rows up to the page's end, not the whole window.
  const both = textQuery !== undefined && vector !== undefined;
  const ranked = both ? window : offset + req.k;
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
  const legs: LegReads = { table, filter, both, ranked, carried, page: offset + req.k + 1 };
  const textLeg = async () => {
    if (textQuery === undefined || textField === undefined) return undefined;
    const ask = { query: textQuery, field: textField, operator, indexedOnly: textOnlyIndexed, scoring };
    const hits = await readTextLeg(legs, ask);
    return ranking(hits, 'higher', req.text_weight);
  };
  const vectorLeg = async () => {
    if (vector === undefined) return undefined;
    const ask = { indexed: vectorIndexed, indexedOnly: vectorOnlyIndexed };
    return ranking(await readVectorLeg(legs, vector, ask), 'lower', req.vector_weight);
  };
  const [text, vec] = await Promise.all([textLeg(), vectorLeg()]);
  const winners = fuse(text, vec, { rrfK: req.rrf_k ?? 60, offset, k: req.k });
  const fetched = [text?.hits, vec?.hits].filter((hits): hits is Table => hits !== undefined);
  const rows = await rowsByKeys(
    table,
    winners.map((w) => w.key),
    fields,
    winners,
    { fetched, rowIds },
  );
  return { ...rows, receipt };
}
