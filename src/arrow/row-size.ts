import type { DataType, Field } from 'apache-arrow';
import { arrow } from './arrow.js';

const { Type } = arrow;

/**
 * The fewest bytes one value of `type` takes in Arrow memory: fixed-width values whole, variable-width ones
 * their offset alone. Multiplied by a row count it bounds a result from below before any row is read.
 */
function minValueBytes(type: DataType): number {
  switch (type.typeId) {
    case Type.Bool:
      return 1 / 8;
    case Type.Int:
    case Type.Float:
    case Type.Date:
    case Type.Time:
    case Type.Timestamp:
    case Type.Duration:
    case Type.Interval:
      return (type as DataType & { ArrayType: { BYTES_PER_ELEMENT: number } }).ArrayType.BYTES_PER_ELEMENT;
    case Type.Decimal:
      return (type as InstanceType<typeof arrow.Decimal>).bitWidth / 8;
    case Type.FixedSizeBinary:
      return (type as InstanceType<typeof arrow.FixedSizeBinary>).byteWidth;
    case Type.FixedSizeList: {
      const list = type as InstanceType<typeof arrow.FixedSizeList>;
      return list.listSize * minValueBytes(list.children[0]?.type as DataType);
    }
    case Type.Struct:
      return type.children.reduce((sum: number, child: Field) => sum + minValueBytes(child.type), 0);
    case Type.LargeUtf8:
    case Type.LargeBinary:
      return 8;
    default:
      return 4;
  }
}

/** The fewest bytes `rows` rows of `fields` take. */
export const minRowsBytes = (fields: readonly Field[], rows: number): number =>
  rows * fields.reduce((sum, field) => sum + minValueBytes(field.type), 0);
