import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

// Built into the server's dist/ (src/http/console.ts serves it at /console/). JSX goes through esbuild's own
// Preact settings, so no framework plugin is needed.
export default defineConfig({
  root: here('.'),
  base: '/console/',
  publicDir: false,
  resolve: {
    // The client's sources, as the unit tests use them: the console calls the API through nothing else.
    alias: { '@strata/client': here('../packages/client/src/index.ts') },
  },
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: here('../dist/console'),
    emptyOutDir: true,
    target: 'es2022',
    // The preload polyfill and inlined assets would need 'unsafe-inline' or data: scripts under the page's CSP.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 1024,
    reportCompressedSize: false,
  },
});
