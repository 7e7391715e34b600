import type { Rollup } from './api';
import { localToday } from './app-zone';
import { rollupsCsv } from './csv';
import { cellsRow, clearMessage, Dashboard, fail } from './dashboard';
import { daysBetween } from './dates';
import { formatNumber } from './format';
import { fetchInsights } from './insights';
import { rangeParams } from './range';
import { fetchAllRollups, renderTopEvents, topEvents } from './top-events';

// Rows past this many are left to the CSV: a page of tens of thousands of rows is not readable.
const TABLE_LIMIT = 1_000;

/** One read of the rollups of the chosen app, range and test mode, then the view of them. */
export async function fetchRollups(d: Dashboard): Promise<void> {
  const { ui, state } = d;
  const appId = ui.app.value;
  const range = rangeParams(d);
  if (!appId || !range) return;
  try {
    state.rollups = await fetchAllRollups({
      appId,
      ...range.params,
      testMode: ui.testMode.checked ? 'true' : 'false',
    });
  } catch (err) {
    state.rollups = [];
    render(d);
    fail(d, err, () => void d.loadRollups());
    return;
  }
  clearMessage(d);
  state.days = daysBetween(range.from, range.to);
  fillEventPicker(d);
  render(d);
  renderTopEvents(ui.topEvents, state.rollups);
  void d.dataQuality.load(state.key, appId, range.from, range.to);
  await fetchInsights(d);
}

function fillEventPicker(d: Dashboard): void {
  const picker = d.ui.event;
  const chosen = picker.value;
  const names = topEvents(d.state.rollups).names.map((e) => e.name);
  const all = document.createElement('option');
  all.value = '';
  all.textContent = 'All events';
  picker.replaceChildren(
    all,
    ...names.map((n) => {
      const option = document.createElement('option');
      option.value = n;
      option.textContent = n;
      return option;
    }),
  );
  // A name picked (or clicked in the breakdown) stays picked even when it is not among the top ones.
  if (chosen && !names.includes(chosen)) {
    const option = document.createElement('option');
    option.value = chosen;
    option.textContent = chosen;
    picker.append(option);
  }
  picker.value = chosen;
}

/** Draws the charts and the table of the rows read, for the picked event. */
export function render(d: Dashboard): void {
  const { ui, state, charts } = d;
  const days = state.days;
  const name = ui.event.value || null;
  // The charts of "All events" draw the app-wide total row of each day, which carries the true
  // daily users; its table lists the total rows and the per-event rows, as the API returned them.
  const plotted = state.rollups.filter((r) => r.eventName === name);
  state.shown = name === null ? state.rollups : plotted;
  const byDay = new Map(plotted.map((r) => [r.date, r]));
  // A day is open while its row is not final; a day with no row is open only if it is today.
  const today = localToday();
  const open = days.map((day) => {
    const row = byDay.get(day);
    return row ? !row.final : day >= today;
  });
  const series = (pick: (r: Rollup) => number) => ({
    days,
    open,
    values: [
      days.map((day) => {
        const row = byDay.get(day);
        return row ? pick(row) : 0;
      }),
    ],
  });
  const empty = state.rollups.length === 0;
  ui.empty.hidden = !empty;
  ui.charts.hidden = empty;
  if (empty) showEmpty(d);
  else {
    charts.events.render(series((r) => r.events));
    charts.users.render(series((r) => r.uniqueUsers));
    charts.sessions.render(series((r) => r.uniqueSessions));
  }
  renderTable(d);
}

function noteRow(text: string): HTMLTableRowElement {
  const tr = document.createElement('tr');
  const td = document.createElement('td');
  td.colSpan = 11;
  td.className = 'muted';
  td.textContent = text;
  tr.append(td);
  return tr;
}

function rollupRow(r: Rollup): HTMLTableRowElement {
  const f = r.floatValue;
  const tr = cellsRow(
    [
      r.date,
      r.eventName ?? 'All events',
      formatNumber(r.events),
      formatNumber(r.uniqueUsers),
      formatNumber(r.uniqueSessions),
      formatNumber(f?.count),
      formatNumber(f?.sum),
      formatNumber(f?.min),
      formatNumber(f?.max),
      formatNumber(f?.avg),
    ],
    new Set([2, 3, 4, 5, 6, 7, 8, 9]),
  );
  const status = document.createElement('td');
  if (r.final) status.textContent = 'final';
  else {
    const mark = document.createElement('span');
    mark.className = 'open';
    mark.textContent = 'open';
    mark.title = 'The day is not over or not yet recomputed; its numbers can still change.';
    status.append(mark);
  }
  tr.append(status);
  return tr;
}

function renderTable(d: Dashboard): void {
  const { ui, state } = d;
  const body = ui.rows.tBodies[0];
  if (state.shown.length === 0) {
    body.replaceChildren(noteRow('No rows for this selection.'));
    ui.csv.disabled = true;
    return;
  }
  ui.csv.disabled = false;
  const more = state.shown.length - TABLE_LIMIT;
  body.replaceChildren(
    ...state.shown.slice(0, TABLE_LIMIT).map(rollupRow),
    ...(more > 0 ? [noteRow(`${more.toLocaleString()} more rows: Download CSV for all of them.`)] : []),
  );
}

/**
 * The empty state. Test data is what the app's test key (`tly_test_…`) sends, so with "Test data"
 * on, the hint names that key; otherwise the live key (`tly_live_…`).
 */
function showEmpty(d: Dashboard): void {
  const test = d.ui.testMode.checked;
  d.ui.emptyTitle.textContent = test ? 'No test events in this range yet' : 'No events in this range yet';
  d.ui.emptyHint.textContent = test
    ? "Test data is what the app's test key (tly_test_…) sends; the live key's events are not in it. Send a first event with the test key, then refresh in a minute, once the rollups have run:"
    : "Send a first event with the app's live ingest key (tly_live_…), then refresh in a minute, once the rollups have run:";
  d.ui.curl.textContent = curlLine(test ? 'tly_test_…' : 'tly_live_…');
}

function curlLine(key: string): string {
  return [
    `curl -X POST ${location.origin}/api/ingest \\`,
    `  -H 'Authorization: Bearer ${key}' \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  -d '{"events":[{"eventName":"App.opened"}]}'`,
  ].join('\n');
}

/** Downloads the rows shown as a CSV file named after the app and the days. */
export function downloadCsv(d: Dashboard): void {
  const blob = new Blob([rollupsCsv(d.state.shown)], { type: 'text/csv;charset=utf-8' });
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  const app = d.ui.app.selectedOptions[0]?.textContent ?? 'app';
  const slug = app.replace(/[^A-Za-z0-9_-]+/g, '-').slice(0, 40) || 'app';
  const days = d.state.days;
  a.href = url;
  a.download = `tally-${slug}-${days[0] ?? ''}-${days.at(-1) ?? ''}.csv`;
  document.body.append(a);
  a.click();
  a.remove();
  window.setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
