import type { Data, RecordBatch } from 'apache-arrow';
import { arrow } from '../../arrow/arrow.js';

/**
 * A vector column of a batch, row by row: views of the batch's own 32-bit floats (copies for other widths), null
 * for a null row.
 */
export function vectorsOf(batch: RecordBatch, column: string): (Float32Array | null)[] {
  const vector = batch.getChild(column);
  if (vector === null) return [];
  const out: (Float32Array | null)[] = [];
  for (const data of vector.data) {
    const dim = (data.type as InstanceType<typeof arrow.FixedSizeList>).listSize;
    const items = data.children[0] as Data;
    const floats = floatsOf(items, data.length * dim);
    for (let i = 0; i < data.length; i++) {
      out.push(data.getValid(i) ? floats.subarray(i * dim, (i + 1) * dim) : null);
    }
  }
  return out;
}

/** The first `n` items of a float column as 32-bit floats. */
function floatsOf(items: Data, n: number): Float32Array {
  const values = items.values as Float32Array | Float64Array | Uint16Array;
  if (values instanceof Float32Array) return values;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const value = values[i] ?? 0;
    out[i] = values instanceof Uint16Array ? arrow.util.uint16ToFloat64(value) : value;
  }
  return out;
}
