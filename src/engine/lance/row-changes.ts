import type { RecordBatch, Schema, Table } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';
import { sameRow } from '../../arrow/same-row.js';
import type { TextChanges } from '../rows/source.js';
import { ROW_KEY } from '../tables/schema.js';
import { rowKeysOf } from '../writes/rows.js';
import type { DatasetCommits } from './commits.js';
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

/** Layouts kept: the statistics and the fresh rows each follow the table from a version of their own. */
const LAYOUTS_KEPT = 4;

/** Live rows of each fragment `RowChanges.within` gives its caller to look up: the first with a text will do. */
const SAMPLED_ROWS = 8;

/** Rows a read between two versions may have for it to be kept for the next asking the same (`RowChanges.last`). */
const SHARED_ROWS = 10_000;

/** The rows only one version holds: their row keys with some columns. */
export interface RowsBetween {
  /** The rows only the older version holds, with `ROW_KEY` and the columns asked of them. */
  gone: Table | undefined;
  /** The rows only the newer version holds, with `ROW_KEY` and the columns asked of them. */
  come: Table | undefined;
}

/**
 * How the live rows of one version differ from another's, for a reader that did not see the commits between
 * (another node's): what BM25's statistics and the fresh rows need to follow a table without reading every row
 * again. Lance never changes a row in place (a fragment's data files are immutable and its ids are never reused; a
 * delete marks rows, a replace or compaction writes them to new fragments), so a row address names one row's values
 * for good, and two versions differ by the addresses only one of them holds. The layouts of the last versions
 * followed to are kept, so that following a table version by version reads each one's row ids once; where every row
 * of the older version is still in the fragments it was in (an append, an index commit), only the rows outside them
 * are read, by address where the versions' manifests say so (`DatasetCommits`). A step across a compaction is read as the steps on either side of it: the rows it moved are on
 * neither side, rather than read twice (with their vectors) to find them unchanged.
 */
export class RowChanges {
  /** The layouts of the versions last followed to, latest last. */
  private layouts: Layout[] = [];
  /** The rows last read between two versions, when few: the statistics and the fresh rows follow the same steps. */
  private last: { from: number; to: number; gone: Set<string>; came: Set<string>; rows: RowsBetween } | undefined;

  constructor(
    private readonly open: VersionHandle,
    private readonly close: (lance: LanceTable) => void,
    /** Which versions a compaction made; without it, a compaction's rows are read as removed and added. */
    private readonly commits?: DatasetCommits,
  ) {}

  /**
   * The texts of `columns` of the rows only `from` holds (removed) and of those only `to` holds (added), less rows
   * found on both sides with the same row key and texts (moved by a compaction). Undefined when a version is no
   * longer kept or more than `maxRows` rows differ (reading them all again costs less).
   */
  async texts(from: number, to: number, columns: readonly string[], maxRows: number): Promise<TextChanges | undefined> {
    const rows = await this.between(from, to, columns, columns, maxRows);
    return rows === undefined ? undefined : unmoved(rows.gone, rows.come, columns);
  }

  /**
   * The rows only `from` holds (with `goneColumns`) and those only `to` holds (with `cameColumns`). A row a
   * compaction moved is on neither side where the versions' manifests say which versions compacted, and on both
   * otherwise. Undefined when a version is no longer kept or more than `maxRows` differ.
   */
  async between(
    from: number,
    to: number,
    goneColumns: readonly string[],
    cameColumns: readonly string[],
    maxRows: number,
  ): Promise<RowsBetween | undefined> {
    const last = this.last;
    if (
      last?.from === from &&
      last.to === to &&
      (last.rows.gone?.numRows ?? 0) + (last.rows.come?.numRows ?? 0) <= maxRows &&
      goneColumns.every((c) => last.gone.has(c)) &&
      cameColumns.every((c) => last.came.has(c))
    ) {
      // Each step has one other reader at most: the memory goes back once it has read.
      this.last = undefined;
      const { gone, come } = last.rows;
      return { gone: gone?.select([ROW_KEY, ...goneColumns]), come: come?.select([ROW_KEY, ...cameColumns, '_rowid']) };
    }
    const rows = await this.read(from, to, goneColumns, cameColumns, maxRows);
    if (rows !== undefined && (rows.gone?.numRows ?? 0) + (rows.come?.numRows ?? 0) <= SHARED_ROWS) {
      // Without vectors: the reader that comes second is BM25's statistics, which ask for texts, and vectors would
      // keep up to 15 MB a table (10k rows × 384-d) outside the fresh rows' budget.
      const gone = withoutVectors(rows.gone, goneColumns);
      const came = withoutVectors(rows.come, cameColumns);
      this.last = {
        from,
        to,
        gone: new Set(gone.columns),
        came: new Set(came.columns),
        rows: { gone: gone.rows, come: came.rows },
      };
    }
    return rows;
  }

  private async read(
    from: number,
    to: number,
    goneColumns: readonly string[],
    cameColumns: readonly string[],
    maxRows: number,
    acrossCompactions = true,
  ): Promise<RowsBetween | undefined> {
    const target = await this.open(to);
    if (target === undefined) return undefined;
    let source: LanceTable | undefined;
    try {
      let before = this.layouts.find((layout) => layout.version === from);
      if (before === undefined) {
        source = await this.open(from);
        before = await this.layoutAt(source);
      }
      if (before === undefined) return undefined;
      const appended =
        (await this.appendedByManifest(target, before, from, to, cameColumns, maxRows)) ??
        (await this.appendedOnly(target, before, cameColumns, maxRows));
      if (appended === 'too many') return undefined;
      if (appended !== undefined) {
        this.keep({ ...appended.layout, version: to });
        return { gone: undefined, come: appended.rows };
      }
      const compactions = acrossCompactions ? await this.commits?.compactions(from, to) : undefined;
      if (compactions !== undefined && compactions.length > 0) {
        return await this.readAround(target, from, to, compactions, goneColumns, cameColumns, maxRows);
      }
      const after = await this.layoutAt(target);
      if (after === undefined) return undefined;
      this.keep({ ...after, version: to });
      const differing = difference(before, after, maxRows);
      if (differing === undefined) return undefined;
      const { removed, added } = differing;
      source ??= await this.open(from);
      if (source === undefined) return undefined;
      const gone = removed.length === 0 ? undefined : await take(source, removed, goneColumns);
      const come = added.length === 0 ? undefined : await take(target, added, cameColumns, true);
      // A row missing from a take (a version not what its layout said) makes the difference unknown.
      if ((gone?.numRows ?? 0) !== removed.length || (come?.numRows ?? 0) !== added.length) return undefined;
      return { gone, come };
    } finally {
      this.close(target);
      if (source !== undefined) this.close(source);
    }
  }

  /**
   * The step from `from` to `to` read as the steps between the versions `compactions` made, which moved rows without
   * changing them, composed by row key: a row removed after it was added in an earlier step is on neither side, a
   * row removed twice (replaced, then deleted) is gone once with its values at `from`. Rows come before a compaction
   * get their row ids at `to` (they name where the rows were before it moved them).
   */
  private async readAround(
    target: LanceTable,
    from: number,
    to: number,
    compactions: readonly number[],
    goneColumns: readonly string[],
    cameColumns: readonly string[],
    maxRows: number,
  ): Promise<RowsBetween | undefined> {
    const steps: [number, number][] = [];
    let start = from;
    for (const compaction of compactions) {
      if (compaction - 1 > start) steps.push([start, compaction - 1]);
      start = compaction;
    }
    if (to > start) steps.push([start, to]);
    const parts: RowsBetween[] = [];
    let left = maxRows;
    for (const [a, b] of steps) {
      const part = await this.read(a, b, goneColumns, cameColumns, left, false);
      if (part === undefined) return undefined;
      left -= (part.gone?.numRows ?? 0) + (part.come?.numRows ?? 0);
      parts.push(part);
    }
    const moved = new Set(parts.filter((_, i) => (steps[i] as [number, number])[1] < start));
    const rows = composed(parts, moved);
    if (rows === undefined || rows.moved.length === 0) return rows?.rows;
    const come = await withRowIdsAt(target, rows.rows.come as Table, rows.moved);
    return come === undefined ? undefined : { gone: rows.rows.gone, come };
  }

  /**
   * The rows `to` holds in the fragments `outside` picks, with their row keys, `columns` and row ids. `outside` is
   * given the first few live rows of each fragment (`SAMPLED_ROWS`, with the same columns and their row ids) and
   * answers the fragments to read. Undefined when the version is no longer kept or those fragments hold more than
   * `maxRows`.
   */
  async within(
    to: number,
    columns: readonly string[],
    maxRows: number,
    outside: (sample: Table) => Promise<Set<number>>,
  ): Promise<Table | undefined> {
    const target = await this.open(to);
    if (target === undefined) return undefined;
    try {
      let layout = this.layouts.find((l) => l.version === to);
      if (layout === undefined) {
        layout = await this.layoutAt(target);
        if (layout === undefined) return undefined;
        this.keep({ ...layout, version: to });
      }
      const sampled: bigint[] = [];
      for (const [fragment, offsets] of layout.fragments) {
        for (const offset of offsets.subarray(0, SAMPLED_ROWS)) {
          sampled.push((BigInt(fragment) << FRAGMENT_BITS) | BigInt(offset));
        }
      }
      const sample = await take(target, sampled, columns, true);
      if (sample.numRows !== sampled.length) return undefined;
      const read = [...(await outside(sample))];
      const rows = read.reduce((n, fragment) => n + (layout.fragments.get(fragment)?.length ?? 0), 0);
      if (rows > maxRows) return undefined;
      return await readAll(
        target
          .query()
          .where(inFragments(read))
          .select([ROW_KEY, ...columns])
          .withRowId(),
      );
    } finally {
      this.close(target);
    }
  }

  private keep(layout: Layout): void {
    this.layouts = [...this.layouts.filter((l) => l.version !== layout.version), layout].slice(-LAYOUTS_KEPT);
  }

  /**
   * Where the manifests say every commit after `before`'s version up to `to` only added fragments (or changed no
   * row), the rows of the fragments `to` lists and `before` does not, read by address: no row's id is filtered.
   * Undefined when they do not say, or the fragments are not what that makes them.
   */
  private async appendedByManifest(
    target: LanceTable,
    before: Layout,
    from: number,
    to: number,
    columns: readonly string[],
    maxRows: number,
  ): Promise<{ layout: Layout; rows: Table | undefined } | 'too many' | undefined> {
    const fragments = await this.commits?.fragmentsAdding(from, to);
    if (fragments === undefined) return undefined;
    const listed = new Set(fragments.map((f) => f.id));
    if ([...before.fragments.keys()].some((id) => !listed.has(id))) return undefined;
    const added = fragments.filter((f) => !before.fragments.has(f.id));
    if (added.some((f) => f.deletions)) return undefined;
    const count = added.reduce((n, f) => n + f.rows, 0);
    if (count > maxRows) return 'too many';
    const layout = { version: before.version, fragments: new Map(before.fragments), rows: before.rows + count };
    const ids: bigint[] = [];
    for (const { id, rows } of added) {
      layout.fragments.set(
        id,
        Uint32Array.from({ length: rows }, (_, i) => i),
      );
      for (let i = 0; i < rows; i++) ids.push((BigInt(id) << FRAGMENT_BITS) | BigInt(i));
    }
    if (ids.length === 0) return { layout, rows: undefined };
    const rows = await take(target, ids, columns, true);
    return rows.numRows === count ? { layout, rows } : undefined;
  }

  /**
   * When every row of `before` is still live at `target`'s version, in the fragments it was in (as many rows there),
   * the rows outside those fragments are exactly those added since: a row never returns to a fragment, and a
   * fragment is never rewritten in place. (Not "above the top fragment": a compaction reserves its fragments' ids
   * when it starts, and commits them below those of appends that landed meanwhile.)
   */
  private async appendedOnly(
    target: LanceTable,
    before: Layout,
    columns: readonly string[],
    maxRows: number,
  ): Promise<{ layout: Layout; rows: Table } | 'too many' | undefined> {
    const old = inFragments([...before.fragments.keys()]);
    if ((await target.countRows(old)) !== before.rows) return undefined;
    if ((await target.countRows()) - before.rows > maxRows) return 'too many';
    const rows = await readAll(
      target
        .query()
        .where(`NOT (${old})`)
        .select([ROW_KEY, ...columns])
        .withRowId(),
    );
    const layout = { version: before.version, fragments: new Map(before.fragments), rows: before.rows + rows.numRows };
    for (const [fragment, offsets] of layoutOf(rows).fragments) layout.fragments.set(fragment, offsets);
    return { layout, rows };
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

/** A filter of the rows of `fragments`, consecutive ids as one range. */
function inFragments(fragments: readonly number[]): string {
  if (fragments.length === 0) return 'false';
  const sorted = [...fragments].sort((a, b) => a - b);
  const ranges: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let end = i;
    while (end + 1 < sorted.length && sorted[end + 1] === (sorted[end] as number) + 1) end++;
    const low = BigInt(sorted[i] as number) << FRAGMENT_BITS;
    const high = BigInt((sorted[end] as number) + 1) << FRAGMENT_BITS;
    ranges.push(`(_rowid >= ${low} AND _rowid < ${high})`);
    i = end + 1;
  }
  return ranges.join(' OR ');
}

/**
 * The row ids only `before` holds, and those only `after` holds; undefined when more than `maxRows` differ (counted
 * before any id is made: a compaction of a large table moves every row).
 */
function difference(
  before: Layout,
  after: Layout,
  maxRows: number,
): { removed: bigint[]; added: bigint[] } | undefined {
  const onlyIn = (a: Uint32Array, b: Uint32Array | undefined, fragment: number, out: bigint[] | undefined) => {
    if (b === undefined) {
      if (out !== undefined) for (const offset of a) out.push((BigInt(fragment) << FRAGMENT_BITS) | BigInt(offset));
      return a.length;
    }
    let n = 0;
    let j = 0;
    for (const offset of a) {
      while (j < b.length && (b[j] as number) < offset) j++;
      if (j < b.length && b[j] === offset) continue;
      n++;
      out?.push((BigInt(fragment) << FRAGMENT_BITS) | BigInt(offset));
    }
    return n;
  };
  let differing = 0;
  for (const [fragment, offsets] of before.fragments)
    differing += onlyIn(offsets, after.fragments.get(fragment), fragment, undefined);
  for (const [fragment, offsets] of after.fragments)
    differing += onlyIn(offsets, before.fragments.get(fragment), fragment, undefined);
  if (differing > maxRows) return undefined;
  const removed: bigint[] = [];
  const added: bigint[] = [];
  for (const [fragment, offsets] of before.fragments) onlyIn(offsets, after.fragments.get(fragment), fragment, removed);
  for (const [fragment, offsets] of after.fragments) onlyIn(offsets, before.fragments.get(fragment), fragment, added);
  return { removed, added };
}

/** Rows of a read, each by a run of one row (see `composed`). */
type Picked = Map<bigint, readonly [RecordBatch, number]>;

/**
 * Steps read one after the other, as one: by row key, the rows gone are those gone in some step and not come in an
 * earlier one (with the values of the first step that removed them), and the rows come those come in some step and
 * not gone in a later one (with the values of the last step that added them); `moved`: the keys of those that came
 * last in one of the parts `moved` holds. Undefined where the steps' reads do not share a schema (the table's
 * changed between them).
 */
function composed(
  parts: readonly RowsBetween[],
  moved: ReadonlySet<RowsBetween>,
): { rows: RowsBetween; moved: bigint[] } | undefined {
  const gone: Picked = new Map();
  const come: Picked = new Map();
  const comeMoved = new Set<bigint>();
  const rowsOf = (table: Table | undefined, each: (key: bigint, at: readonly [RecordBatch, number]) => void) => {
    if (table === undefined) return;
    const keys = rowKeysOf(table);
    let i = 0;
    for (const batch of table.batches)
      for (let row = 0; row < batch.numRows; row++) each(keys[i++] as bigint, [batch, row]);
  };
  for (const part of parts) {
    rowsOf(part.gone, (key, at) => {
      comeMoved.delete(key);
      if (!come.delete(key) && !gone.has(key)) gone.set(key, at);
    });
    rowsOf(part.come, (key, at) => {
      come.set(key, at);
      if (moved.has(part)) comeMoved.add(key);
      else comeMoved.delete(key);
    });
  }
  const tableOf = (rows: Picked, side: 'gone' | 'come'): Table | undefined | 'mixed' => {
    // A read of no rows may have no columns at all.
    const schemas = parts.flatMap((part) => (part[side]?.numRows ? [part[side].schema] : []));
    if (rows.size === 0) return undefined;
    const schema = schemas[0] as Schema;
    if (schemas.some((s) => !sameSchema(s, schema))) return 'mixed';
    // Consecutive rows of one batch as one slice: a step's rows are mostly kept whole.
    const slices: RecordBatch[] = [];
    let run: [RecordBatch, number, number] | undefined;
    for (const [batch, row] of rows.values()) {
      if (run !== undefined && run[0] === batch && run[2] === row) run[2]++;
      else {
        if (run !== undefined) slices.push(run[0].slice(run[1], run[2]));
        run = [batch, row, row + 1];
      }
    }
    if (run !== undefined) slices.push(run[0].slice(run[1], run[2]));
    return new arrow.Table(schema, slices);
  };
  const goneRows = tableOf(gone, 'gone');
  const comeRows = tableOf(come, 'come');
  if (goneRows === 'mixed' || comeRows === 'mixed') return undefined;
  return { rows: { gone: goneRows, come: comeRows }, moved: [...comeMoved] };
}

/** Keys looked up at once where rows' ids are read again by key. */
const KEYS_AT_ONCE = 1000;

/**
 * `rows` with the row ids `lance` gives the rows of `keys` (looked up by key); undefined when one of them is not
 * there.
 */
async function withRowIdsAt(lance: LanceTable, rows: Table, keys: readonly bigint[]): Promise<Table | undefined> {
  const idOf = new Map<bigint, bigint>();
  for (let at = 0; at < keys.length; at += KEYS_AT_ONCE) {
    const found = await readAll(
      lance
        .query()
        .where(`${ROW_KEY} IN (${keys.slice(at, at + KEYS_AT_ONCE).join(', ')})`)
        .select([ROW_KEY])
        .withRowId(),
    );
    const ids = found.getChild('_rowid')?.toArray() as BigUint64Array | undefined;
    for (const [i, key] of rowKeysOf(found).entries()) idOf.set(key, ids?.[i] as bigint);
  }
  if (keys.some((key) => !idOf.has(key))) return undefined;
  const before = rows.getChild('_rowid')?.toArray() as BigUint64Array | undefined;
  const ids = new BigUint64Array(rows.numRows);
  for (const [i, key] of rowKeysOf(rows).entries()) ids[i] = idOf.get(key) ?? (before?.[i] as bigint);
  const others = rows.schema.fields.map((f) => f.name).filter((name) => name !== '_rowid');
  return rows.select(others).assign(new arrow.Table({ _rowid: arrow.makeVector(ids) }));
}

function sameSchema(a: Schema, b: Schema): boolean {
  return (
    a.fields.length === b.fields.length &&
    a.fields.every((f, i) => f.name === b.fields[i]?.name && String(f.type) === String(b.fields[i]?.type))
  );
}

/** The rows of `ids` with their row keys and `columns` (and their row ids, `withIds`). */
function take(lance: LanceTable, ids: readonly bigint[], columns: readonly string[], withIds = false): Promise<Table> {
  const query = lance.takeRowIds([...ids]).select([ROW_KEY, ...columns]);
  return readAll(withIds ? query.withRowId() : query);
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
  const goneAt = new Map<bigint, number>();
  if (gone !== undefined) {
    for (const [i, key] of rowKeysOf(gone).entries()) goneAt.set(key, i);
  }
  const movedGone = new Set<number>();
  const movedCome = new Set<number>();
  if (gone !== undefined && come !== undefined) {
    rowKeysOf(come).forEach((key, j) => {
      const i = goneAt.get(key);
      if (i !== undefined && !movedGone.has(i) && sameRow(gone, i, come, j, columns)) {
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

/** The rows with `columns` less the vector ones (and the row keys and ids they came with). */
function withoutVectors(
  rows: Table | undefined,
  columns: readonly string[],
): { rows: Table | undefined; columns: string[] } {
  if (rows === undefined) return { rows, columns: [...columns] };
  const vectors = new Set(rows.schema.fields.filter((f) => arrow.DataType.isFixedSizeList(f.type)).map((f) => f.name));
  const kept = columns.filter((c) => !vectors.has(c));
  if (kept.length === columns.length) return { rows, columns: kept };
  const carried = rows.schema.fields.map((f) => f.name).filter((c) => !columns.includes(c));
  return { rows: rows.select([...carried, ...kept]), columns: kept };
}
