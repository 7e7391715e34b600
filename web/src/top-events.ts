import { getPage, Rollup } from './api';

/** Event names the dashboard lists by name; the rest are one "other" line. */
export const EVENT_DISPLAY_LIMIT = 20;
// The server answers at most ROLLUPS_MAX_ROWS rows per page; past this many pages the view stops
// reading (an app at the name limit fills about 24 pages of 5,000 rows in 30 days).
const MAX_PAGES = 60;

export interface TopEvents {
  /** The names with the most events over the rows, most first (ties by name). */
  names: { name: string; events: number }[];
  /** The names past the display limit, folded into one line; null when there are none. */
  other: { names: number; events: number } | null;
}

/** Every rollup row of a query, following `X-Next-Cursor` page after page. */
export async function fetchAllRollups(params: Record<string, string>): Promise<Rollup[]> {
  const rows: Rollup[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < MAX_PAGES; page++) {
    const answer: { body: Rollup[]; nextCursor: string | null } = await getPage<Rollup[]>(
      '/api/v1/rollups',
      cursor === null ? params : { ...params, cursor },
    );
    for (const row of answer.body) rows.push(row);
    cursor = answer.nextCursor;
    if (cursor === null) break;
  }
  return rows;
}

/** The top event names by events over `rows` (total rows excluded), and the rest as "other". */
export function topEvents(rows: readonly Rollup[], limit = EVENT_DISPLAY_LIMIT): TopEvents {
  const totals = new Map<string, number>();
  for (const r of rows) {
    if (r.eventName !== null) totals.set(r.eventName, (totals.get(r.eventName) ?? 0) + r.events);
  }
  const ranked = [...totals.entries()]
    .map(([name, events]) => ({ name, events }))
    .sort((a, b) => b.events - a.events || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const rest = ranked.slice(limit);
  return {
    names: ranked.slice(0, limit),
    other: rest.length ? { names: rest.length, events: rest.reduce((n, e) => n + e.events, 0) } : null,
  };
}

/** Fills the "Top events" table: one line per top name, then the "other" line. */
export function renderTopEvents(table: HTMLTableElement, rows: readonly Rollup[]): void {
  const top = topEvents(rows);
  const line = (label: string, events: number, className?: string) => {
    const tr = document.createElement('tr');
    if (className) tr.className = className;
    const name = document.createElement('td');
    name.textContent = label;
    const count = document.createElement('td');
    count.className = 'num';
    count.textContent = events.toLocaleString();
    tr.append(name, count);
    return tr;
  };
  const lines = top.names.map((e) => line(e.name, e.events));
  if (top.other) {
    const n = top.other.names;
    lines.push(
      line(`Other (${n.toLocaleString()} more event name${n === 1 ? '' : 's'})`, top.other.events, 'muted'),
    );
  }
  table.tBodies[0].replaceChildren(...lines);
  table.closest('section')!.hidden = lines.length === 0;
}
