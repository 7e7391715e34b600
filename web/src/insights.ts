import { ActiveUsersRow, ApiError, BreakdownRow, describeProblem, get, KeyApp } from './api';
import { Dashboard } from './dashboard';
import { formatNumber } from './format';
import { rangeParams } from './range';

// The active-users chart (GET /api/v1/active-users) and the breakdown panel (GET /api/v1/breakdown).
// A value clicked in the breakdown filters the page: an event name through the event picker, which
// every read takes; another built-in dimension as an equality filter of the breakdown, the one read
// that takes it. The other reads cannot filter by it, and the filter bar says so.

/** The rolling windows drawn: daily, weekly and monthly active users. */
export const WINDOWS = [1, 7, 28] as const;
/** The values the breakdown lists by name; the rest are its "other" line. */
export const BREAKDOWN_LIMIT = 10;

export const BUILT_IN_DIMENSIONS: [string, string][] = [
  ['eventName', 'Event name'],
  ['platform', 'Platform'],
  ['appVersion', 'App version'],
  ['osVersion', 'OS version'],
  ['deviceModel', 'Device model'],
  ['locale', 'Locale'],
];
const LABELS = new Map(BUILT_IN_DIMENSIONS);

export function dimensionLabel(by: string): string {
  return LABELS.get(by) ?? by;
}

/** Only built-in dimensions can be filtered on (payload keys and the missing value cannot). */
function filterable(by: string, row: BreakdownRow): row is BreakdownRow & { value: string } {
  return LABELS.has(by) && row.value !== null && !row.other;
}

function selectedApp(d: Dashboard): KeyApp | undefined {
  return d.state.key?.apps.find((a) => a.id === d.ui.app.value);
}

/** The parameters every insight read shares: app, range, test mode and the picked event. */
function commonParams(d: Dashboard): Record<string, string> | null {
  const appId = d.ui.app.value;
  const range = rangeParams(d);
  if (!appId || !range) return null;
  const eventName = d.ui.event.value;
  return {
    appId,
    ...range.params,
    testMode: d.ui.testMode.checked ? 'true' : 'false',
    ...(eventName ? { eventName } : {}),
  };
}

function problemText(err: unknown, what: string): string {
  return err instanceof ApiError ? describeProblem(err.problem) : `${what} could not be read.`;
}

/** Reads the three active-user curves one after another (one read in flight) and draws them. */
export async function fetchActiveUsers(d: Dashboard): Promise<void> {
  const params = commonParams(d);
  if (!params) return;
  const days = d.state.days;
  const values: number[][] = [];
  const open = days.map(() => false);
  try {
    for (const window of WINDOWS) {
      const rows = await get<ActiveUsersRow[]>('/api/v1/active-users', {
        ...params,
        interval: 'day',
        window: String(window),
      });
      const byDay = new Map(rows.map((r) => [r.end, r]));
      values.push(days.map((day) => byDay.get(day)?.users ?? 0));
      days.forEach((day, i) => (open[i] ||= byDay.get(day)?.final === false));
    }
  } catch (err) {
    d.ui.activeNote.textContent = problemText(err, 'Active users');
    d.ui.activeNote.hidden = false;
    return;
  }
  d.ui.activeNote.hidden = true;
  d.charts.active.render({ days, values, open });
}

/** Fills the dimension picker: the built-in dimensions and the app's declared payload keys. */
export function fillDimensionPicker(d: Dashboard): void {
  const picker = d.ui.breakdownBy;
  const chosen = picker.value || 'eventName';
  const declared = (selectedApp(d)?.dimensions ?? []).map((k) => [`payload.${k}`, `payload.${k}`]);
  const options = [...BUILT_IN_DIMENSIONS, ...declared].map(([value, label]) => {
    const option = document.createElement('option');
    option.value = value;
    option.textContent = label;
    return option;
  });
  picker.replaceChildren(...options);
  picker.value = options.some((o) => o.value === chosen) ? chosen : 'eventName';
}

/** Reads the breakdown of the picked dimension, with the page's filters, and lists it. */
export async function fetchBreakdown(d: Dashboard): Promise<void> {
  const params = commonParams(d);
  if (!params) return;
  const by = d.ui.breakdownBy.value || 'eventName';
  const filters = Object.entries(d.state.filters).filter(([dim]) => dim !== by);
  if (by === 'eventName') delete params.eventName;
  let rows: BreakdownRow[];
  try {
    rows = await get<BreakdownRow[]>('/api/v1/breakdown', {
      ...params,
      ...Object.fromEntries(filters),
      by,
      limit: String(BREAKDOWN_LIMIT),
    });
  } catch (err) {
    d.ui.breakdown.tBodies[0].replaceChildren();
    d.ui.breakdownNote.textContent = problemText(err, 'The breakdown');
    return;
  }
  d.ui.breakdownNote.textContent = rows.length
    ? `Top ${BREAKDOWN_LIMIT} values of ${dimensionLabel(by)} by events.` +
      (LABELS.has(by) ? ' Click a value to filter the page by it.' : '')
    : 'No events in this range.';
  renderBreakdown(d, by, rows);
}

function cell(text: string, numeric = false): HTMLTableCellElement {
  const td = document.createElement('td');
  td.textContent = text;
  if (numeric) td.className = 'num';
  return td;
}

function valueCell(d: Dashboard, by: string, row: BreakdownRow): HTMLTableCellElement {
  if (row.other) return cell('Other (all other values)');
  if (!filterable(by, row)) {
    const td = cell(row.value ?? '(none)');
    if (row.value === null) td.className = 'muted';
    td.title = row.value ?? 'Events without this field';
    return td;
  }
  const td = document.createElement('td');
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'link trunc';
  button.textContent = row.value;
  button.title = `Filter the page by ${dimensionLabel(by)} = ${row.value}`;
  const active = (by === 'eventName' ? d.ui.event.value : d.state.filters[by]) === row.value;
  button.setAttribute('aria-pressed', String(active));
  button.addEventListener('click', () => setFilter(d, by, active ? null : row.value));
  td.append(button);
  return td;
}

function renderBreakdown(d: Dashboard, by: string, rows: BreakdownRow[]): void {
  const total = rows.reduce((n, r) => n + r.events, 0);
  d.ui.breakdown.tBodies[0].replaceChildren(
    ...rows.map((r) => {
      const tr = document.createElement('tr');
      if (r.other) tr.className = 'other muted';
      tr.append(
        valueCell(d, by, r),
        cell(formatNumber(r.events), true),
        cell(total ? `${((100 * r.events) / total).toFixed(1)} %` : '–', true),
        cell(formatNumber(r.users), true),
        cell(formatNumber(r.sessions), true),
        cell(formatNumber(r.floatValue?.avg), true),
      );
      return tr;
    }),
  );
}

/** Sets (or with null clears) the filter on one dimension, then reads what it narrows again. */
export function setFilter(d: Dashboard, by: string, value: string | null): void {
  if (by === 'eventName') {
    const picker = d.ui.event;
    // A name past the picker's top names gets its own option.
    if (value !== null && ![...picker.options].some((o) => o.value === value)) {
      const option = document.createElement('option');
      option.value = value;
      option.textContent = value;
      picker.append(option);
    }
    picker.value = value ?? '';
    picker.dispatchEvent(new Event('change'));
    renderFilters(d);
    return;
  }
  if (value === null) delete d.state.filters[by];
  else d.state.filters[by] = value;
  renderFilters(d);
  void d.loadBreakdown();
}

/** The filter bar: one removable chip per filter, and what each one narrows. */
export function renderFilters(d: Dashboard): void {
  const chips: [string, string][] = [
    ...(d.ui.event.value ? [['eventName', d.ui.event.value] as [string, string]] : []),
    ...Object.entries(d.state.filters),
  ];
  const bar = d.ui.filters;
  bar.hidden = chips.length === 0;
  bar.replaceChildren(
    ...chips.map(([by, value]) => {
      const chip = document.createElement('button');
      chip.type = 'button';
      chip.className = 'chip';
      chip.dataset.dimension = by;
      chip.textContent = `${dimensionLabel(by)} = ${value} ✕`;
      chip.title = 'Remove this filter';
      chip.setAttribute('aria-label', `Remove the filter ${dimensionLabel(by)} = ${value}`);
      chip.addEventListener('click', () => setFilter(d, by, null));
      return chip;
    }),
  );
  const others = Object.keys(d.state.filters).map(dimensionLabel);
  if (others.length) {
    const note = document.createElement('span');
    note.className = 'muted small';
    note.textContent = `${others.join(', ')} narrow${others.length === 1 ? 's' : ''} the breakdown only: the charts, rollups and live feed cannot be filtered by ${others.length === 1 ? 'it' : 'them'}.`;
    bar.append(note);
  }
}

/** Both insight reads of the current choice, one after the other. */
export async function fetchInsights(d: Dashboard): Promise<void> {
  fillDimensionPicker(d);
  renderFilters(d);
  await fetchActiveUsers(d);
  await fetchBreakdown(d);
}
