// The largest finite double, as a numeric literal.
const MAX_DOUBLE = '1.7976931348623157e308::numeric';

/**
 * A numeric SQL expression (a sum taken in numeric, exact and independent of row order) as a
 * double precision that saturates at the largest finite double instead of failing: finite
 * values can add up past the float8 range. The rollups' and insights' float-value sums.
 */
export function saturatedDouble(numeric: string): string {
  return `greatest(least(${numeric}, ${MAX_DOUBLE}), -${MAX_DOUBLE})::double precision`;
}
