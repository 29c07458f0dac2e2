import type { DataType, Table } from 'apache-arrow';
import { arrow } from '../arrow/arrow.js';

export type Format = 'table' | 'json' | 'csv' | 'arrow';
export const FORMATS: readonly Format[] = ['table', 'json', 'csv', 'arrow'];

/** A decimal's unscaled digits with its point put back: what the service's JSON answers for it (docs/api.md). */
function decimalText(digits: string, scale: number): string {
  if (scale <= 0) return digits;
  const negative = digits.startsWith('-');
  const whole = (negative ? digits.slice(1) : digits).padStart(scale + 1, '0');
  return `${negative ? '-' : ''}${whole.slice(0, -scale)}.${whole.slice(-scale)}`;
}

/** A value as JSON holds it: 64-bit integers as numbers when exact (else strings), vectors and lists as arrays. */
function plain(value: unknown, type?: DataType): unknown {
  if (value === null || value === undefined) return null;
  // Arrow JS gives a decimal (and SQL's HUGEINT, a decimal of scale 0) as a big number whose toJSON is a quoted
  // string already: its digits and the column's scale make the text instead.
  if (type !== undefined && type.typeId === arrow.Type.Decimal) {
    return decimalText(String(value), (type as InstanceType<typeof arrow.Decimal>).scale);
  }
  if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  if (value instanceof Date) return value.toISOString();
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (typeof value === 'object') {
    const child = type?.children?.[0]?.type as DataType | undefined;
    const json = (value as { toJSON?: () => unknown }).toJSON?.() ?? value;
    if (Array.isArray(json)) return json.map((item) => plain(item, child));
    if (typeof json === 'object' && json !== null) {
      const fields = new Map((type?.children ?? []).map((f) => [f.name, f.type as DataType]));
      return Object.fromEntries(Object.entries(json).map(([k, v]) => [k, plain(v, fields.get(k))]));
    }
    return json;
  }
  return value;
}

/** A value as one cell of text. */
function cell(json: unknown): string {
  if (json === null || json === undefined) return '';
  return typeof json === 'object' ? JSON.stringify(json) : String(json);
}

const csvCell = (text: string) => (/[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text);

/** A cell on one line of an aligned table: line breaks, tabs and other control characters as escapes. */
const oneLine = (text: string) =>
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it escapes
  text.replace(/[\u0000-\u001f\u007f]/g, (c) =>
    c === '\n'
      ? '\\n'
      : c === '\r'
        ? '\\r'
        : c === '\t'
          ? '\\t'
          : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );

/** Rows of JSON values under `names`, as the format asks (every format but arrow). */
function renderRows(names: readonly string[], rows: readonly unknown[][], format: Exclude<Format, 'arrow'>): string {
  if (format === 'json') {
    return rows
      .map((row) => `${JSON.stringify(Object.fromEntries(names.map((name, c) => [name, row[c] ?? null])))}\n`)
      .join('');
  }
  const texts = rows.map((row) => names.map((_, c) => cell(row[c])));
  if (format === 'csv') return [names, ...texts].map((row) => `${row.map(csvCell).join(',')}\n`).join('');
  const cut = (text: string) => {
    const line = oneLine(text);
    return line.length > 60 ? `${line.slice(0, 57)}...` : line;
  };
  const cells = [[...names], ...texts].map((row) => row.map(cut));
  const widths = names.map((_, c) => Math.max(...cells.map((row) => (row[c] ?? '').length)));
  const line = (row: string[]) =>
    `${row
      .map((text, c) => text.padEnd(widths[c] ?? 0))
      .join('  ')
      .trimEnd()}\n`;
  const rule = `${widths.map((w) => '-'.repeat(w)).join('  ')}\n`;
  const count = `(${rows.length} row${rows.length === 1 ? '' : 's'})\n`;
  return `${line(cells[0] ?? [])}${rule}${cells.slice(1).map(line).join('')}${count}`;
}

/** A result as the format asks: an aligned table for people; JSON lines, CSV or an Arrow IPC stream for pipes. */
export function render(table: Table, format: Format): string | Uint8Array {
  // The client's Arrow instance made the table; its own writer encodes it.
  if (format === 'arrow') return arrow.tableToIPC(table, 'stream');
  const fields = table.schema.fields;
  const columns = fields.map((f) => table.getChild(f.name));
  const rows = Array.from({ length: table.numRows }, (_, i) =>
    columns.map((column, c) => plain(column?.get(i), fields[c]?.type as DataType)),
  );
  return renderRows(
    fields.map((f) => f.name),
    rows,
    format,
  );
}

/**
 * A list the service answered (databases, tables, a schema's columns) as the format asks, its columns those of
 * `names` and then any other field the items carry. Arrow is for rows of tables: a list is refused it earlier.
 */
export function renderList(
  items: readonly object[],
  names: readonly string[],
  format: Exclude<Format, 'arrow'>,
): string {
  // The named columns no item has (a schema without vectors has no dim) are left out.
  const all =
    items.length === 0
      ? [...names]
      : names.filter((name) => items.some((item) => (item as Record<string, unknown>)[name] !== undefined));
  for (const item of items) for (const key of Object.keys(item)) if (!all.includes(key)) all.push(key);
  const rows = items.map((item) => all.map((name) => plain((item as Record<string, unknown>)[name])));
  return renderRows(all, rows, format);
}
