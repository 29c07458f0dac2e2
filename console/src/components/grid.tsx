import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import { cellText, columnsOf, jsonText } from '../format';

interface GridProps {
  rows: readonly Record<string, unknown>[];
  /** Columns in this order first (a projection, a schema); any others the rows hold follow. */
  columns?: readonly string[];
  /** Extra content for a row opened in full (the explain of a hit). */
  detail?: (row: Record<string, unknown>) => preact.ComponentChildren;
  caption?: string;
}

/**
 * Rows in a table whose cells are shortened (long text, vectors); Enter or a click on a row's button opens it in
 * full in a dialog, which Escape closes.
 */
export function Grid({ rows, columns, detail, caption }: GridProps) {
  const [open, setOpen] = useState<number | undefined>(undefined);
  const names = [...new Set([...(columns ?? []), ...columnsOf(rows)])].filter((name) => name !== '_explain');
  if (rows.length === 0) return <p class="muted">No rows.</p>;
  // Numbers line up on the right, headers over them too.
  const numeric = new Set(
    names.filter((name) =>
      rows.every((row) => row[name] === null || row[name] === undefined || typeof row[name] === 'number'),
    ),
  );
  const opened = open === undefined ? undefined : rows[open];
  return (
    <div class="grid-wrap">
      <table class="grid">
        {caption === undefined ? null : <caption>{caption}</caption>}
        <thead>
          <tr>
            <th scope="col">
              <span class="visually-hidden">Open</span>
            </th>
            {names.map((name) => (
              <th scope="col" key={name} class={numeric.has(name) ? 'num' : undefined}>
                {name}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row, index) => (
            <tr key={index}>
              <td>
                <button
                  type="button"
                  class="link open-row"
                  onClick={() => setOpen(index)}
                  aria-label={`Open row ${index + 1}`}
                >
                  {index + 1}
                </button>
              </td>
              {names.map((name) => (
                <td key={name} class={typeof row[name] === 'number' ? 'num' : undefined}>
                  {cellText(row[name])}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      {opened === undefined ? null : (
        <RowDialog row={opened} onClose={() => setOpen(undefined)}>
          {detail?.(opened)}
        </RowDialog>
      )}
    </div>
  );
}

function RowDialog({
  row,
  onClose,
  children,
}: {
  row: Record<string, unknown>;
  onClose: () => void;
  children?: preact.ComponentChildren;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  // Shown as a modal before the next paint, so that Escape closes it however soon it is pressed.
  useLayoutEffect(() => {
    const dialog = ref.current;
    if (dialog !== null && !dialog.open) dialog.showModal();
  }, []);
  const { _explain: _, ...fields } = row;
  return (
    <dialog ref={ref} class="row-dialog" onClose={onClose} aria-label="Row in full">
      <div class="dialog-head">
        <h3>Row in full</h3>
        <button type="button" onClick={() => ref.current?.close()}>
          Close
        </button>
      </div>
      {children}
      <pre class="row-json">{jsonText(fields, 2)}</pre>
    </dialog>
  );
}
