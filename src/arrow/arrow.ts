import { createRequire } from 'node:module';
import type * as ArrowModule from 'apache-arrow';

/**
 * The one Arrow instance of the process. LanceDB `require`s apache-arrow; an ESM `import` could load a second
 * copy whose classes LanceDB does not recognise (LargeUtf8 fails with "Unrecognized type id 20"). Everyone
 * takes Arrow values from here; type-only imports of 'apache-arrow' are fine elsewhere.
 */
export const arrow: typeof ArrowModule = createRequire(import.meta.url)('apache-arrow');
