/** How long a cell's text may be in a grid before it is cut; the row opened in full shows it whole. */
const CELL_CHARS = 80;
/** How many numbers of a vector a grid shows. */
const VECTOR_ITEMS = 4;

/** A value as plain JSON text: what the API sent, with bigint (from Arrow) as its decimal digits. */
export function jsonText(value: unknown, indent?: number): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), indent) ?? 'null';
}

/** A cell's shortened text: long strings and vectors cut, with their full size said. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return cut(value);
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : roundNumber(value);
  if (Array.isArray(value)) {
    const items = value
      .slice(0, VECTOR_ITEMS)
      .map((item) => (typeof item === 'number' ? roundNumber(item) : jsonText(item)));
    return cut(
      value.length > VECTOR_ITEMS ? `[${items.join(', ')}, … ${value.length} items]` : `[${items.join(', ')}]`,
    );
  }
  return cut(typeof value === 'object' ? jsonText(value) : String(value));
}

function cut(text: string): string {
  return text.length <= CELL_CHARS ? text : `${text.slice(0, CELL_CHARS)}… (${text.length} chars)`;
}

function roundNumber(value: number): string {
  return Number.isFinite(value) ? String(Number(value.toPrecision(6))) : String(value);
}

/** A duration for people: milliseconds under a second, seconds above. */
export function duration(ms: number): string {
  return ms < 1000 ? `${ms.toFixed(ms < 10 ? 1 : 0)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

/** The columns of a set of rows, in first-seen order. */
export function columnsOf(rows: readonly Record<string, unknown>[]): string[] {
  const seen = new Set<string>();
  for (const row of rows) for (const name of Object.keys(row)) seen.add(name);
  return [...seen];
}

/** RFC 4180 CSV: every field that holds a comma, quote or line break quoted; nested values as JSON. */
export function toCsv(columns: readonly string[], rows: readonly Record<string, unknown>[]): string {
  const field = (value: unknown): string => {
    if (value === null || value === undefined) return '';
    const text = typeof value === 'string' ? value : typeof value === 'object' ? jsonText(value) : String(value);
    return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
  };
  const lines = [columns.map(field).join(','), ...rows.map((row) => columns.map((name) => field(row[name])).join(','))];
  return `${lines.join('\r\n')}\r\n`;
}
