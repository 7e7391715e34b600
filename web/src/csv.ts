import type { Rollup } from './api';
import { plainNumber } from './format';

const HEADER = [
  'date',
  'eventName',
  'isTestMode',
  'events',
  'uniqueUsers',
  'uniqueSessions',
  'floatValueCount',
  'floatValueSum',
  'floatValueMin',
  'floatValueMax',
  'floatValueAvg',
  'final',
];

/**
 * A cell a spreadsheet could read as a formula (OWASP, CSV injection): one that starts with
 * `=`, `+`, `-`, `@`, `;`, `|` or `%`, or their fullwidth forms (`＝`, `＋`, `－`, `＠`, `；`, `｜`,
 * `％`), possibly behind leading whitespace of any kind (spaces, tabs, line breaks, no-break and
 * other Unicode spaces, a byte order mark), which spreadsheets skip; or that starts with a tab,
 * a carriage return or a line feed.
 */
const FORMULA_START = /^[\s\uFEFF]*[=+\-@;|%\uFF1D\uFF0B\uFF0D\uFF20\uFF1B\uFF5C\uFF05]|^[\t\r\n]/;

/** Text cells only: numbers and booleans are written by the dashboard itself and are safe. */
export function neutraliseCell(text: string): string {
  return FORMULA_START.test(text) ? `'${text}` : text;
}

/** One CSV cell: quoted when needed, and a text that a spreadsheet could run neutralised. */
export function csvCell(value: string | number | boolean | null): string {
  if (value === null) return '';
  const text = typeof value === 'string' ? neutraliseCell(value) : String(value);
  return /[",\r\n]/.test(text) || text !== String(value) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function rollupsCsv(rows: Rollup[]): string {
  const lines = [HEADER.join(',')];
  for (const r of rows) {
    const f = r.floatValue;
    lines.push(
      [
        r.date,
        r.eventName,
        r.isTestMode,
        r.events,
        r.uniqueUsers,
        r.uniqueSessions,
        f?.count ?? null,
        f ? plainNumber(f.sum) : null,
        f?.min ?? null,
        f?.max ?? null,
        f ? plainNumber(f.avg) : null,
        r.final,
      ]
        .map(csvCell)
        .join(','),
    );
  }
  return lines.join('\r\n') + '\r\n';
}
