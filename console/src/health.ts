import type { ColumnDescriptor, LegExplain, StrataTable } from '@strata/client';

/** What one search index of a table looks like from a probe search's explain (docs/api.md, Explain). */
export interface IndexHealth {
  column: string;
  kind: 'fts' | 'vector';
  /** How the leg read: `index`, `index_and_fresh`, `index_and_scan`, or `scan` when no index is built yet. */
  read: LegExplain['read'];
  /** Rows the leg read outside the index: written since upkeep last folded them in. */
  outsideIndex: number;
  ms: number;
  version: number;
}

/**
 * The API keeps no per-index report, but every explained search says how each leg read and how many rows it found
 * outside its index: a one-row search per index tells what a real one would meet. Under `strong` consistency the
 * leg reads every row the index lacks, whatever the query, so the probe's words do not matter.
 */
/** A word no analyzer drops (a stop word such as "a" would leave the text leg with nothing to run). */
const PROBE_WORD = 'strata';

export async function probeHealth(table: StrataTable, schema: readonly ColumnDescriptor[]): Promise<IndexHealth[]> {
  const projection = schema[0] === undefined ? undefined : [schema[0].name];
  const probes: Promise<IndexHealth | undefined>[] = [];
  for (const column of schema) {
    for (const index of column.indexes ?? []) {
      if (index.kind === 'fts') {
        probes.push(
          table
            .searchWithReceipt(
              { text: PROBE_WORD, textField: column.name, k: 1, projection, explain: true },
              { rows: true },
            )
            .then(({ explain }) => healthOf(column.name, 'fts', explain?.legs.text, explain?.version)),
        );
      } else if (index.kind === 'vector' && column.dim !== undefined) {
        const vector = Array.from({ length: column.dim }, () => 1);
        probes.push(
          table
            .searchWithReceipt({ vector, vectorField: column.name, k: 1, projection, explain: true }, { rows: true })
            .then(({ explain }) => healthOf(column.name, 'vector', explain?.legs.vector, explain?.version)),
        );
      }
    }
  }
  return (await Promise.all(probes)).filter((health) => health !== undefined);
}

function healthOf(
  column: string,
  kind: IndexHealth['kind'],
  leg: LegExplain | undefined,
  version: number | undefined,
): IndexHealth | undefined {
  if (leg === undefined) return undefined;
  return { column, kind, read: leg.read, outsideIndex: leg.outside_index, ms: leg.ms, version: version ?? Number.NaN };
}

/** The words a person reads for a leg's way of reading. */
export const READ_WORDS: Readonly<Record<LegExplain['read'], string>> = {
  index: 'all rows indexed',
  index_and_fresh: 'index + rows written since the last upkeep (held in memory)',
  index_and_scan: 'index + rows written since the last upkeep (scanned)',
  scan: 'no index built yet: every row scanned',
};
