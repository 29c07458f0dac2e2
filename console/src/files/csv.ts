/**
 * RFC 4180 records: fields separated by `delimiter`, quoted fields holding delimiters, quotes (doubled) and line
 * breaks; CRLF or LF ends a record; a blank last line is no record.
 */
export function parseCsv(text: string, delimiter = ','): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let quoted = false;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  const endRecord = () => {
    record.push(field);
    field = '';
    if (!(record.length === 1 && record[0] === '')) records.push(record);
    record = [];
  };
  while (i < text.length) {
    const char = text[i] as string;
    if (quoted) {
      if (char === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i += 2;
          continue;
        }
        quoted = false;
      } else {
        field += char;
      }
      i++;
      continue;
    }
    if (char === '"' && field === '') quoted = true;
    else if (char === delimiter) {
      record.push(field);
      field = '';
    } else if (char === '\n') endRecord();
    else if (char === '\r') {
      if (text[i + 1] !== '\n') endRecord();
    } else field += char;
    i++;
  }
  if (quoted) throw new Error('the file ends inside a quoted field');
  if (field !== '' || record.length > 0) endRecord();
  return records;
}

/** A column's type as the table's schema spells it (docs/api.md, column descriptors). */
export interface ColumnShape {
  name: string;
  type: string;
}

const INTEGER = /^[+-]?\d+$/;

/**
 * A CSV field as the JSON value the table's column takes: the API never coerces (`"5"` is not `5`), so the text
 * of a number, a bool or a vector must become one here. An empty field is null, as `strata load` reads it; text
 * that does not parse is sent as it is, for the server to refuse with the row and column named.
 */
export function valueFor(type: string | undefined, text: string): unknown {
  if (text === '') return null;
  switch (type) {
    case 'i8':
    case 'i16':
    case 'i32':
    case 'u8':
    case 'u16':
    case 'u32':
    case 'i64':
    case 'u64': {
      const trimmed = text.trim();
      if (!INTEGER.test(trimmed)) return text;
      const number = Number(trimmed);
      // i64 and u64 take decimal strings: the digits beyond 2^53 survive.
      return Number.isSafeInteger(number) ? number : trimmed.replace(/^\+/, '');
    }
    case 'f16':
    case 'f32':
    case 'f64': {
      const number = Number(text.trim());
      return text.trim() !== '' && !Number.isNaN(number) ? number : text;
    }
    case 'bool': {
      const word = text.trim().toLowerCase();
      if (word === 'true' || word === '1') return true;
      if (word === 'false' || word === '0') return false;
      return text;
    }
    case 'vector':
    case 'list':
      try {
        return JSON.parse(text) as unknown;
      } catch {
        return text;
      }
    default:
      return text;
  }
}

/** CSV records (the first is the header) as row objects typed by the table's columns. */
export function rowsOfCsv(records: readonly string[][], columns: readonly ColumnShape[]): Record<string, unknown>[] {
  const [header, ...body] = records;
  if (header === undefined) return [];
  // Column names are unique ignoring case (docs/api.md, Names): a header spelled otherwise still finds its column.
  const byName = new Map(columns.map((column) => [column.name.toLowerCase(), column]));
  return body.map((record) => {
    const row: Record<string, unknown> = {};
    header.forEach((name, index) => {
      const column = byName.get(name.toLowerCase());
      row[column?.name ?? name] = valueFor(column?.type, record[index] ?? '');
    });
    return row;
  });
}

/** JSON Lines: one object per non-blank line; a bad line is named by its number. */
export function rowsOfJsonLines(text: string): Record<string, unknown>[] {
  const rows: Record<string, unknown>[] = [];
  text.split(/\r?\n/).forEach((line, index) => {
    if (line.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      throw new Error(`line ${index + 1} is not JSON: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      throw new Error(`line ${index + 1} is not a JSON object`);
    rows.push(value as Record<string, unknown>);
  });
  return rows;
}
