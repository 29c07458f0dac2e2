import { createRequire } from 'node:module';
import type * as ArrowModule from 'apache-arrow';
import type { Data } from 'apache-arrow';

/**
 * The one Arrow instance of the process. LanceDB `require`s apache-arrow; an ESM `import` could load a second
 * copy whose classes LanceDB does not recognise (LargeUtf8 fails with "Unrecognized type id 20"). Everyone
 * takes Arrow values from here; type-only imports of 'apache-arrow' are fine elsewhere.
 */
const require = createRequire(import.meta.url);
export const arrow: typeof ArrowModule = require('apache-arrow');

/**
 * Arrow JS writes an all-null Bool column with an empty values buffer, which arrow-rs (and so Lance) refuses:
 * "Need at least 1 bytes for bitmap in buffers[0]". Give the writer a zeroed bitmap of the right size instead;
 * the validity bitmap, written before this, still says every value is null.
 */
type BoolAssembler = (this: unknown, data: Data) => unknown;
// The module the IPC writers use (same file, same instance as the `require` above).
const assembler = (
  require('apache-arrow/visitor/vectorassembler') as { VectorAssembler: { prototype: { visitBool: BoolAssembler } } }
).VectorAssembler.prototype;
const assembleBool = assembler.visitBool;
assembler.visitBool = function (this: unknown, data: Data) {
  if (data.length === 0 || data.nullCount < data.length) return assembleBool.call(this, data);
  const zeros = new Uint8Array(Math.ceil(data.length / 8));
  return assembleBool.call(
    this,
    Object.create(data, { nullCount: { value: 0 }, values: { value: zeros }, offset: { value: 0 } }),
  );
};
