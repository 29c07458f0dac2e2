import type { Table } from 'apache-arrow';

/**
 * Whether row `i` of `a` and row `j` of `b` hold the same value in every one of `columns`: a row a compaction
 * moved, told from one a write replaced. Values of list and fixed-size list columns (vectors) are compared byte for
 * byte, nested ones by their JSON; a NaN equals a NaN.
 */
export function sameRow(a: Table, i: number, b: Table, j: number, columns: readonly string[]): boolean {
  return columns.every((column) => sameValue(a.getChild(column)?.get(i), b.getChild(column)?.get(j)));
}

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || a === undefined || b === null || b === undefined) return (a ?? null) === (b ?? null);
  if (typeof a === 'number' && typeof b === 'number') return Number.isNaN(a) && Number.isNaN(b);
  if (typeof a !== 'object' || typeof b !== 'object') return false;
  const arrayOf = (v: object) => (v as { toArray?: () => unknown }).toArray?.() ?? v;
  const x = arrayOf(a);
  const y = arrayOf(b);
  if (ArrayBuffer.isView(x) && ArrayBuffer.isView(y)) {
    if (x.byteLength !== y.byteLength || x.constructor !== y.constructor) return false;
    const p = new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
    const q = new Uint8Array(y.buffer, y.byteOffset, y.byteLength);
    return p.every((byte, k) => byte === q[k]);
  }
  const text = (v: unknown) => JSON.stringify(v, (_, w: unknown) => (typeof w === 'bigint' ? `${w}n` : w));
  return text(x) === text(y);
}
