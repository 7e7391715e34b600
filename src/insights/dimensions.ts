import { hasControlCharacter } from '@app/common/control-characters';
import {
  DIMENSION_FIELDS,
  EVENT_COLUMN,
  eventField,
  type DimensionName,
} from '@app/common/events/event-fields';

/**
 * The breakdown dimensions: the stored event's built-in ones (the field table's `dimension`
 * fields, by their API name and column), and the payload keys an app declares. This is the one
 * place that maps a dimension to the events table.
 */
export const BUILT_IN_DIMENSIONS = DIMENSION_FIELDS;

export type BuiltInDimension = DimensionName;

export const PAYLOAD_PREFIX = 'payload.';

/** The dimensions a breakdown takes, as its error names them. */
export const DIMENSION_CHOICES = `${BUILT_IN_DIMENSIONS.map((d) => d.name).join(', ')} or ${PAYLOAD_PREFIX}<key>`;

/** Dimensions that take an equality filter on a breakdown (every built-in one but eventName, which has its own). */
export const FILTER_DIMENSIONS = BUILT_IN_DIMENSIONS.filter((d) => d.name !== 'eventName');

const LEGACY_PAYLOAD = eventField('payload').legacyColumn;

/** At most this many payload keys per app. */
export const MAX_DECLARED_DIMENSIONS = 10;

/** A declared payload key: 1 to 128 characters (the payload's key rule), no control characters. */
export function isValidPayloadKey(key: string): boolean {
  return key.length >= 1 && key.length <= 128 && !hasControlCharacter(key);
}

/** The column of a built-in dimension, or undefined for any other name. */
export function builtInColumn(name: string): string | undefined {
  return BUILT_IN_DIMENSIONS.find((d) => d.name === name)?.column;
}

/** Every dimension the app's breakdowns keep, built-in first, then `payload.<key>` per declared key. */
export function dimensionsOf(declared: readonly string[]): string[] {
  return [...BUILT_IN_DIMENSIONS.map((d) => d.name), ...declared.map((k) => `${PAYLOAD_PREFIX}${k}`)];
}

/**
 * The SQL expression of a dimension over the events alias `e`. `param` is the placeholder that
 * holds a payload key (keys are passed as parameters, never spliced in).
 */
export function dimensionSql(name: string, param: () => string): string {
  const column = builtInColumn(name);
  if (column) return `e.${column}::text`;
  const p = param();
  return `coalesce(e.${EVENT_COLUMN.payload} ->> ${p}, e.${LEGACY_PAYLOAD} ->> ${p})`;
}
