import type { Table } from 'apache-arrow';
import type { TextChanges } from '../rows/source.js';
import { ROW_KEY } from '../tables/schema.js';
import { rowKeysOf } from '../writes/rows.js';
import { type LanceTable, readAll } from './lance.js';

/** Row ids share their upper 32 bits per fragment (Lance's row addresses). */
const FRAGMENT_BITS = 32n;

/** One version's live rows: each fragment's live row offsets, ascending. */
interface Layout {
  version: number;
  fragments: Map<number, Uint32Array>;
  rows: number;
}

/** Opens a read-only handle at a version; undefined once the version is no longer kept. */
export type VersionHandle = (version: number) => Promise<LanceTable | undefined>;

/**
 * How the live rows of one version differ from another's, for a reader that did not see the commits between
 * (another node's): what the rows' BM25 statistics need to follow them without reading every row again. Lance never
 * changes a row in place (a fragment's data files are immutable and its ids are never reused; a delete marks rows,
 * a replace or compaction writes them to new fragments), so a row address names one row's values for good, and two
 * versions differ by the addresses only one of them holds. The last version's layout is kept, so that following a
 * table version by version reads each one's row ids once; where the rows at or below the fragments of the last
 * layout are all still there (an append, an index commit), only the rows above them are read.
 */
export class RowChanges {
  private last: Layout | undefined;

  constructor(
    private readonly open: VersionHandle,
    private readonly close: (lance: LanceTable) => void,
  ) {}

  /**
   * The texts of `columns` of the rows only `from` holds (removed) and of those only `to` holds (added), less rows
   * found on both sides with the same row key and texts (moved by a compaction). Undefined when a version is no
   * longer kept or more than `maxRows` rows differ (reading them all again costs less).
   */
  async between(
    from: number,
    to: number,
    columns: readonly string[],
    maxRows: number,
  ): Promise<TextChanges | undefined> {
    const target = await this.open(to);
    if (target === undefined) return undefined;
    let source: LanceTable | undefined;
    try {
      let before = this.last?.version === from ? this.last : undefined;
      if (before === undefined) {
        source = await this.open(from);
        before = await this.layoutAt(source);
      }
      if (before === undefined) return undefined;
      const appended = await this.appendedOnly(target, before, columns);
      if (appended !== undefined) {
        this.last = { ...appended.layout, version: to };
        return appended.changes;
      }
      const after = await this.layoutAt(target);
      if (after === undefined) return undefined;
      this.last = { ...after, version: to };
      const { removed, added } = difference(before, after);
      if (removed.length + added.length > maxRows) return undefined;
      source ??= await this.open(from);
      if (source === undefined) return undefined;
      const gone = removed.length === 0 ? undefined : await take(source, removed, columns);
      const come = added.length === 0 ? undefined : await take(target, added, columns);
      return unmoved(gone, come, columns);
    } finally {
      this.close(target);
      if (source !== undefined) this.close(source);
    }
  }

  /** Lets go of the layout kept (a table closing). */
  forget(): void {
    this.last = undefined;
  }

  /**
   * When every row of `before` is still live at `target`'s version (as many rows at or below its top fragment), the
   * rows above it are exactly those added since: Lance numbers new fragments above every fragment it ever made.
   */
  private async appendedOnly(
    target: LanceTable,
    before: Layout,
    columns: readonly string[],
  ): Promise<{ layout: Layout; changes: TextChanges } | undefined> {
    let top = -1;
    for (const fragment of before.fragments.keys()) top = Math.max(top, fragment);
    const above = BigInt(top + 1) << FRAGMENT_BITS;
    if ((await target.countRows(`_rowid < ${above}`)) !== before.rows) return undefined;
    const rows = await readAll(
      target
        .query()
        .where(`_rowid >= ${above}`)
        .select([...columns])
        .withRowId(),
    );
    const layout = { version: before.version, fragments: new Map(before.fragments), rows: before.rows + rows.numRows };
    for (const [fragment, offsets] of layoutOf(rows).fragments) layout.fragments.set(fragment, offsets);
    return { layout, changes: { removed: new Map(), added: textsByColumn(rows, columns, () => true) } };
  }

  private async layoutAt(lance: LanceTable | undefined): Promise<Layout | undefined> {
    if (lance === undefined) return undefined;
    return { ...layoutOf(await readAll(lance.query().select([]).withRowId())), version: await lance.version() };
  }
}

/** The live rows of a read made `withRowId()`, by fragment. */
function layoutOf(rows: Table): Omit<Layout, 'version'> {
  const halves = new Uint32Array(rows.numRows * 2);
  let at = 0;
  for (const chunk of rows.getChild('_rowid')?.data ?? []) {
    const values = chunk.values as BigUint64Array;
    halves.set(new Uint32Array(values.buffer, values.byteOffset, chunk.length * 2), at);
    at += chunk.length * 2;
  }
  // A row id's low half (little-endian: first) is its offset in its fragment, its high half the fragment. Rows come
  // fragment by fragment: a run of one fragment's rows is copied at once.
  const runs = new Map<number, Uint32Array[]>();
  for (let i = 0; i < halves.length; ) {
    const fragment = halves[i + 1] as number;
    const start = i;
    for (; i < halves.length && halves[i + 1] === fragment; i += 2);
    const offsets = new Uint32Array((i - start) / 2);
    for (let j = 0; j < offsets.length; j++) offsets[j] = halves[start + 2 * j] as number;
    runs.set(fragment, [...(runs.get(fragment) ?? []), offsets]);
  }
  const fragments = new Map<number, Uint32Array>();
  for (const [fragment, parts] of runs) {
    const offsets = new Uint32Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const part of parts) {
      offsets.set(part, at);
      at += part.length;
    }
    fragments.set(fragment, offsets.sort());
  }
  return { fragments, rows: rows.numRows };
}

/** The row ids only `before` holds, and those only `after` holds. */
function difference(before: Layout, after: Layout): { removed: bigint[]; added: bigint[] } {
  const removed: bigint[] = [];
  const added: bigint[] = [];
  const onlyIn = (a: Uint32Array, b: Uint32Array | undefined, fragment: number, out: bigint[]) => {
    const base = BigInt(fragment) << FRAGMENT_BITS;
    let j = 0;
    for (const offset of a) {
      while (b !== undefined && j < b.length && (b[j] as number) < offset) j++;
      if (b === undefined || j >= b.length || b[j] !== offset) out.push(base | BigInt(offset));
    }
  };
  for (const [fragment, offsets] of before.fragments) onlyIn(offsets, after.fragments.get(fragment), fragment, removed);
  for (const [fragment, offsets] of after.fragments) onlyIn(offsets, before.fragments.get(fragment), fragment, added);
  return { removed, added };
}

/** The rows of `ids` with their row keys and `columns`. */
function take(lance: LanceTable, ids: readonly bigint[], columns: readonly string[]): Promise<Table> {
  return readAll(lance.takeRowIds([...ids]).select([ROW_KEY, ...columns]));
}

/** Each column's texts of the rows `keep` keeps (null for a null text). */
function textsByColumn(
  rows: Table,
  columns: readonly string[],
  keep: (row: number) => boolean,
): Map<string, (string | null)[]> {
  const out = new Map<string, (string | null)[]>();
  for (const column of columns) {
    const values = rows.getChild(column);
    const texts: (string | null)[] = [];
    for (let i = 0; i < rows.numRows; i++)
      if (keep(i)) texts.push((values?.get(i) as string | null | undefined) ?? null);
    out.set(column, texts);
  }
  return out;
}

/** The texts of the rows gone and come, less the rows on both sides with the same key and texts. */
function unmoved(gone: Table | undefined, come: Table | undefined, columns: readonly string[]): TextChanges {
  const same = (a: Table, i: number, b: Table, j: number) =>
    columns.every((c) => (a.getChild(c)?.get(i) ?? null) === (b.getChild(c)?.get(j) ?? null));
  const goneAt = new Map<bigint, number>();
  if (gone !== undefined) {
    for (const [i, key] of rowKeysOf(gone).entries()) goneAt.set(key, i);
  }
  const movedGone = new Set<number>();
  const movedCome = new Set<number>();
  if (gone !== undefined && come !== undefined) {
    rowKeysOf(come).forEach((key, j) => {
      const i = goneAt.get(key);
      if (i !== undefined && !movedGone.has(i) && same(gone, i, come, j)) {
        movedGone.add(i);
        movedCome.add(j);
      }
    });
  }
  const none = new Map(columns.map((c) => [c, []] as const));
  return {
    removed: gone === undefined ? none : textsByColumn(gone, columns, (i) => !movedGone.has(i)),
    added: come === undefined ? none : textsByColumn(come, columns, (j) => !movedCome.has(j)),
  };
}
