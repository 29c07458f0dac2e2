import { type Table, tableToIPC } from 'apache-arrow';

export type Format = 'table' | 'json' | 'csv' | 'arrow';
export const FORMATS: readonly Format[] = ['table', 'json', 'csv', 'arrow'];

/** A value as JSON holds it: 64-bit integers as numbers when exact (else strings), vectors and lists as arrays. */
function plain(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  if (value instanceof Date) return value.toISOString();
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (typeof value === 'object') {
    const json = (value as { toJSON?: () => unknown }).toJSON?.() ?? value;
    if (Array.isArray(json)) return json.map(plain);
    if (typeof json === 'object' && json !== null) {
      return Object.fromEntries(Object.entries(json).map(([k, v]) => [k, plain(v)]));
    }
    return json;
  }
  return value;
}

/** A value as one cell of text. */
function cell(value: unknown): string {
  const json = plain(value);
  if (json === null) return '';
  return typeof json === 'object' ? JSON.stringify(json) : String(json);
}

const csvCell = (text: string) => (/[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text);

/** A result as the format asks: an aligned table for people; JSON lines, CSV or an Arrow IPC stream for pipes. */
export function render(table: Table, format: Format): string | Uint8Array {
  if (format === 'arrow') return tableToIPC(table, 'stream');
  const names = table.schema.fields.map((f) => f.name);
  const values = Array.from({ length: table.numRows }, (_, i) => names.map((name) => table.getChild(name)?.get(i)));
  if (format === 'json') {
    return values
      .map((row) => `${JSON.stringify(Object.fromEntries(names.map((name, c) => [name, plain(row[c])])))}\n`)
      .join('');
  }
  const rows = values.map((row) => row.map(cell));
  if (format === 'csv') return [names, ...rows].map((row) => `${row.map(csvCell).join(',')}\n`).join('');
  const cut = (text: string) => (text.length > 60 ? `${text.slice(0, 57)}...` : text);
  const cells = [names, ...rows].map((row) => row.map(cut));
  const widths = names.map((_, c) => Math.max(...cells.map((row) => (row[c] ?? '').length)));
  const line = (row: string[]) =>
    `${row
      .map((text, c) => text.padEnd(widths[c] ?? 0))
      .join('  ')
      .trimEnd()}\n`;
  const rule = `${widths.map((w) => '-'.repeat(w)).join('  ')}\n`;
  const count = `(${table.numRows} row${table.numRows === 1 ? '' : 's'})\n`;
  return `${line(cells[0] ?? [])}${rule}${cells.slice(1).map(line).join('')}${count}`;
}
