/** Lays out rows under a header in aligned columns; `(none)` for no rows. */
export function table(header: string[], rows: string[][]): string {
  if (rows.length === 0) return '(none)';
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** A span as a person says it: `45s`, `12min`, `5h`, `3d`. */
function span(ms: number): string {
  if (ms < MINUTE) return `${Math.round(ms / 1000)}s`;
  if (ms < HOUR) return `${Math.round(ms / MINUTE)}min`;
  if (ms < DAY) return `${Math.round(ms / HOUR)}h`;
  return `${Math.round(ms / DAY)}d`;
}

/** An instant as `YYYY-MM-DD HH:MM` (UTC) with how long ago or ahead it is; `-` for none. */
export function instant(iso: string | null, now: number, none = '-'): string {
  if (!iso) return none;
  const at = Date.parse(iso);
  const when = iso.slice(0, 16).replace('T', ' ');
  return at <= now ? `${when} (${span(now - at)} ago)` : `${when} (in ${span(at - now)})`;
}
