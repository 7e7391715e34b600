// Numbers as people read them. Averages and sums of `floatValue` are computed in binary floating
// point, so 29.99 and 89.99 average to 59.989999999999995: shown, they are rounded to cents.

const whole = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const cents = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });

/** A count or an amount for the page: whole numbers grouped, others with two decimals; `–` for none. */
export function formatNumber(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  return Number.isInteger(n) ? whole.format(n) : cents.format(n);
}

/**
 * A computed number (a sum, an average) for a file (CSV): without the noise of binary floating
 * point, i.e. at most 15 significant digits, which a double always holds (59.989999999999995 →
 * 59.99).
 */
export function plainNumber(n: number): number {
  return Number.isInteger(n) ? n : Number(n.toPrecision(15));
}
