/**
 * When a day that gained events can take only those events: the rows a computation of the whole
 * day would write are then the stored rows with the new events' rows added to them (counts and
 * sums added, minimums and maximums taken, member lists and bitmaps joined). Two of the day's
 * rules look at every event of the day, and decide here whether that still holds:
 *
 * - The value bound keeps the `maxValues` values of a dimension with the most events and folds
 *   the rest into one row of kind 2. Where a dimension of the day has that row, events only add
 *   to the kept values' counts, so the same values stay kept, as long as every new event's value
 *   is one of them; a value folded before, or never seen, could now rank among them, and only
 *   the whole day can tell. Where it has none, every value is kept until there are more than
 *   `maxValues` of them.
 * - The per-name user sets follow the event names of the day's rollups. A name the rollups gained
 *   starts a set from the new events alone only if no stored event had it: the stored eventName
 *   breakdown keeps no row of it, and folds no value into `other`.
 */

/** A breakdown row's key: dimension, mode, kind (0 a value, 1 no value, 2 the other values), value. */
export interface BreakdownKey {
  dimension: string;
  m: boolean;
  kind: number;
  value: string;
}

/** Kind of the row that holds a dimension's values past the bound. */
const OTHER = 2;

export function canAddToDay(
  stored: readonly BreakdownKey[],
  added: readonly BreakdownKey[],
  addedNames: readonly string[],
  maxValues: number,
): boolean {
  const kept = new Map<string, Set<string>>();
  const folded = new Set<string>();
  for (const row of stored) {
    if (row.kind === OTHER) folded.add(row.dimension);
    else valuesOf(kept, row.dimension).add(valueKey(row));
  }
  const names = kept.get('eventName');
  if (addedNames.length && folded.has('eventName')) return false;
  for (const name of addedNames) if (names?.has(valueKey({ kind: 0, value: name }))) return false;
  for (const row of added) {
    if (row.kind === OTHER) return false;
    const values = valuesOf(kept, row.dimension);
    const key = valueKey(row);
    if (values.has(key)) continue;
    if (folded.has(row.dimension)) return false;
    values.add(key);
    if (values.size > maxValues) return false;
  }
  return true;
}

function valueKey(row: Pick<BreakdownKey, 'kind' | 'value'>): string {
  return `${row.kind}:${row.value}`;
}

function valuesOf(kept: Map<string, Set<string>>, dimension: string): Set<string> {
  let values = kept.get(dimension);
  if (!values) kept.set(dimension, (values = new Set()));
  return values;
}
