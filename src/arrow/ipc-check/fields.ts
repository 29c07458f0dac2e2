import {
  checkCustomMetadata,
  damaged,
  type Flatbuffer,
  MAX_DEPTH,
  SAFE,
  T,
  type Table,
  typeName,
  type Vec,
} from './wire.js';

// What each field of a stream's schema needs in a record batch: field nodes, buffers, and their layouts.

/** How a field is laid out in a record batch body. */
type Layout =
  | { kind: 'null' }
  | { kind: 'bool' }
  | { kind: 'fixed'; width: number; range?: 'safe' | 'safe-after-1000' }
  | { kind: 'bytes'; offsetWidth: 4 | 8; utf8: boolean }
  | { kind: 'list' }
  | { kind: 'fixed-list'; size: number }
  | { kind: 'struct' }
  /** Indices into dictionary `id`; the values arrive in dictionary batches, laid out as the value field. */
  | { kind: 'dictionary'; id: number; width: 1 | 2 | 4; signed: boolean };

export interface FieldSpec {
  path: string;
  layout: Layout;
  children: FieldSpec[];
  /** Field nodes and buffers this field and its descendants take in every record batch. */
  nodes: number;
  buffers: number;
}

const TIME_UNITS = 4; // SECOND, MILLISECOND, MICROSECOND, NANOSECOND

function layoutOf(fb: Flatbuffer, f: Table, typeId: number, children: number, where: string): Layout {
  const params = (): Table =>
    fb.table(f, 3, `${where} type`) ?? damaged(`${where} is of type ${typeName(typeId)} but has no type parameters`);
  const leaf = (layout: Layout): Layout =>
    children === 0 ? layout : damaged(`${where}: type ${typeName(typeId)} cannot have child fields`);
  const oneChild = (layout: Layout): Layout =>
    children === 1 ? layout : damaged(`${where}: type ${typeName(typeId)} needs exactly one child field`);
  switch (typeId) {
    case T.Null:
      return leaf({ kind: 'null' });
    case T.Int: {
      const t = params();
      const bits = fb.int32(t, 0, 0, `${where} bit width`);
      fb.has(t, 1, `${where} signedness`);
      if (bits !== 8 && bits !== 16 && bits !== 32 && bits !== 64) damaged(`${where} has integer bit width ${bits}`);
      return leaf({ kind: 'fixed', width: bits / 8 });
    }
    case T.FloatingPoint: {
      const precision = fb.int16(params(), 0, 0, `${where} precision`);
      if (precision < 0 || precision > 2) damaged(`${where} has floating point precision ${precision}`);
      return leaf({ kind: 'fixed', width: 2 ** (precision + 1) });
    }
    case T.Binary:
    case T.Utf8:
    case T.LargeBinary:
    case T.LargeUtf8: {
      const large = typeId === T.LargeBinary || typeId === T.LargeUtf8;
      return leaf({ kind: 'bytes', offsetWidth: large ? 8 : 4, utf8: typeId === T.Utf8 || typeId === T.LargeUtf8 });
    }
    case T.Bool:
      return leaf({ kind: 'bool' });
    case T.Decimal: {
      const t = params();
      fb.int32(t, 0, 0, `${where} precision`);
      fb.int32(t, 1, 0, `${where} scale`);
      const bits = fb.int32(t, 2, 128, `${where} bit width`);
      // Arrow JS 18 reads decimals as 32-bit words; narrower decimals came to the format later.
      if (bits !== 128 && bits !== 256) damaged(`${where} has decimal bit width ${bits}; 128 and 256 are supported`);
      return leaf({ kind: 'fixed', width: bits / 8 });
    }
    case T.Date: {
      const unit = fb.int16(params(), 0, 1, `${where} unit`);
      if (unit !== 0 && unit !== 1) damaged(`${where} has date unit ${unit}`);
      // Arrow JS turns millisecond dates into Numbers and throws past ±2^53.
      return leaf(unit === 0 ? { kind: 'fixed', width: 4 } : { kind: 'fixed', width: 8, range: 'safe' });
    }
    case T.Time: {
      const t = params();
      const unit = fb.int16(t, 0, 1, `${where} unit`);
      const bits = fb.int32(t, 1, 32, `${where} bit width`);
      if (unit < 0 || unit >= TIME_UNITS || bits !== (unit < 2 ? 32 : 64)) {
        damaged(`${where} has time unit ${unit} with bit width ${bits}`);
      }
      return leaf({ kind: 'fixed', width: bits / 8 });
    }
    case T.Timestamp: {
      const t = params();
      const unit = fb.int16(t, 0, 0, `${where} unit`);
      fb.string(t, 1, `${where} time zone`);
      if (unit < 0 || unit >= TIME_UNITS) damaged(`${where} has time unit ${unit}`);
      // Arrow JS reads timestamps as Numbers of milliseconds and throws when that is not a safe integer.
      const range = unit < 2 ? 'safe' : unit === 2 ? 'safe-after-1000' : undefined;
      return leaf(range ? { kind: 'fixed', width: 8, range } : { kind: 'fixed', width: 8 });
    }
    case T.Interval: {
      const unit = fb.int16(params(), 0, 0, `${where} unit`);
      // Arrow JS 18 knows only YEAR_MONTH (4 bytes) and DAY_TIME (8 bytes).
      if (unit !== 0 && unit !== 1) damaged(`${where} has interval unit ${unit}, which is not supported`);
      return leaf({ kind: 'fixed', width: 4 * (unit + 1) });
    }
    case T.List:
      return oneChild({ kind: 'list' });
    case T.Struct:
      return { kind: 'struct' };
    case T.FixedSizeBinary: {
      const width = fb.int32(params(), 0, 0, `${where} byte width`);
      if (width < 0) damaged(`${where} has byte width ${width}`);
      return leaf({ kind: 'fixed', width });
    }
    case T.FixedSizeList: {
      const size = fb.int32(params(), 0, 0, `${where} list size`);
      if (size < 0) damaged(`${where} has list size ${size}`);
      return oneChild({ kind: 'fixed-list', size });
    }
    case T.Map:
      fb.has(params(), 0, `${where} keysSorted`);
      return oneChild({ kind: 'list' });
    case T.Duration: {
      const unit = fb.int16(params(), 0, 1, `${where} unit`);
      if (unit < 0 || unit >= TIME_UNITS) damaged(`${where} has time unit ${unit}`);
      return leaf({ kind: 'fixed', width: 8 });
    }
    default:
      return damaged(`${where} is of type ${typeName(typeId)}, which is not supported`);
  }
}

/** Buffers a field of each layout takes itself: validity first (except Null), then offsets and/or values. */
const OWN_BUFFERS: Record<Layout['kind'], number> = {
  null: 0,
  bool: 2,
  fixed: 2,
  bytes: 3,
  list: 2,
  'fixed-list': 1,
  struct: 1,
  dictionary: 2,
};

/** A stream's schema: its columns, and the value field of each dictionary id (as Arrow JS resolves them). */
export interface SchemaSpec {
  fields: FieldSpec[];
  dictionaries: Map<number, FieldSpec>;
}

/** The index side of a dictionary-encoded field, as it appears in record batches. */
function dictionarySpec(fb: Flatbuffer, encoding: Table, path: string, where: string): FieldSpec {
  const id = fb.int64(encoding, 0, `${where} dictionary id`);
  if (!(Math.abs(id) <= SAFE)) damaged(`${where} has dictionary id ${id}`);
  fb.has(encoding, 2, `${where} dictionary ordering`);
  const index = fb.table(encoding, 1, `${where} dictionary index type`);
  const bits = index ? fb.int32(index, 0, 0, `${where} dictionary index bit width`) : 32;
  const signed = index ? fb.uint8(index, 1, 0, `${where} dictionary index signedness`) !== 0 : true;
  // Arrow JS 18 cannot look a BigInt index up in its dictionary ("Cannot mix BigInt and other types").
  if (bits !== 8 && bits !== 16 && bits !== 32)
    damaged(`${where} has ${bits}-bit dictionary indices; 8, 16 and 32 are supported`);
  return {
    path,
    layout: { kind: 'dictionary', id, width: (bits / 8) as 1 | 2 | 4, signed },
    children: [],
    nodes: 1,
    buffers: 2,
  };
}

function fieldSpec(
  fb: Flatbuffer,
  f: Table,
  path: string,
  depth: number,
  dictionaries: Map<number, FieldSpec>,
): FieldSpec {
  const where = `column "${path}"`;
  if (depth > MAX_DEPTH) damaged(`${where} nests deeper than ${MAX_DEPTH} levels`);
  fb.has(f, 1, `${where} nullable flag`);
  checkCustomMetadata(fb, f, 6, where);
  const encoding = fb.table(f, 4, `${where} dictionary encoding`);
  if (encoding) {
    const indices = dictionarySpec(fb, encoding, path, where);
    const { id } = indices.layout as { id: number };
    // As Arrow JS: a later field with a known id takes the first one's values, and its own type is not read.
    if (!dictionaries.has(id)) dictionaries.set(id, valueSpec(fb, f, path, depth, dictionaries, where));
    return indices;
  }
  return valueSpec(fb, f, path, depth, dictionaries, where);
}

/** A field as its values are laid out (for a dictionary-encoded field: the layout of its dictionary). */
function valueSpec(
  fb: Flatbuffer,
  f: Table,
  path: string,
  depth: number,
  dictionaries: Map<number, FieldSpec>,
  where: string,
): FieldSpec {
  const typeId = fb.uint8(f, 2, 0, `${where} type`);
  const kids = fb.vector(f, 5, 4, `${where} children`);
  const children: FieldSpec[] = [];
  for (let i = 0; i < (kids?.length ?? 0); i++) {
    const child = fb.tableIn(kids as Vec, i, `${where} child ${i}`);
    const name = fb.string(child, 0, `${where} child ${i} name`) ?? '';
    children.push(fieldSpec(fb, child, `${path}.${name}`, depth + 1, dictionaries));
  }
  const layout = layoutOf(fb, f, typeId, children.length, where);
  if (typeId === T.Map) {
    const entries = children[0] as FieldSpec;
    if (entries.layout.kind !== 'struct' || entries.children.length !== 2) {
      damaged(`${where}: a map's entries must be a struct of key and value`);
    }
  }
  return {
    path,
    layout,
    children,
    nodes: 1 + children.reduce((n, c) => n + c.nodes, 0),
    buffers: OWN_BUFFERS[layout.kind] + children.reduce((n, c) => n + c.buffers, 0),
  };
}

export function schemaSpec(fb: Flatbuffer, schema: Table): SchemaSpec {
  if (fb.int16(schema, 0, 0, 'the schema endianness') !== 0)
    damaged('the schema is big-endian, which is not supported');
  checkCustomMetadata(fb, schema, 2, 'the schema');
  const fields = fb.vector(schema, 1, 4, 'the schema fields');
  const out: SchemaSpec = { fields: [], dictionaries: new Map() };
  for (let i = 0; i < (fields?.length ?? 0); i++) {
    const f = fb.tableIn(fields as Vec, i, `schema field ${i}`);
    out.fields.push(fieldSpec(fb, f, fb.string(f, 0, `schema field ${i} name`) ?? '', 0, out.dictionaries));
  }
  return out;
}
