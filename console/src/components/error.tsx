import { StrataError } from '@strata/client';

/** A failure as the server worded it, with its stable code and status, or the browser's own words. */
export function ErrorNote({ error }: { error: unknown }) {
  if (error === undefined || error === null) return null;
  if (error instanceof StrataError) {
    return (
      <p class="error" role="alert">
        <span class="error-message">{error.message}</span>{' '}
        <code class="error-code">
          {error.code ?? 'error'}
          {error.status > 0 ? ` · HTTP ${error.status}` : ''}
        </code>
      </p>
    );
  }
  return (
    <p class="error" role="alert">
      <span class="error-message">{error instanceof Error ? error.message : String(error)}</span>
    </p>
  );
}
