import type { Rollup } from './api';

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

/** One CSV cell: quoted when needed, and a leading formula character neutralised for spreadsheets. */
function cell(value: string | number | boolean | null): string {
  if (value === null) return '';
  let text = String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
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
        f?.sum ?? null,
        f?.min ?? null,
        f?.max ?? null,
        f?.avg ?? null,
        r.final,
      ]
        .map(cell)
        .join(','),
    );
  }
  return lines.join('\r\n') + '\r\n';
}
