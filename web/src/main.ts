import {
  ApiError,
  describeProblem,
  EventRecord,
  forgetKey,
  get,
  KeyInfo,
  Rollup,
  singleFlight,
  storedKey,
  storeKey,
} from './api';
import { DailyChart } from './charts';
import { rollupsCsv } from './csv';
import { daysBetween } from './dates';
import { appDateTime, appZone, localDaysAgo, localToday, watchAppZone } from './app-zone';
import { fetchAllRollups, renderTopEvents, topEvents } from './top-events';
import { DataQualityView } from './data-quality';

const LIVE_INTERVAL_MS = 5_000;
const LIVE_LIMIT = 50;
// Rows past this many are left to the CSV: a page of tens of thousands of rows is not readable.
const TABLE_LIMIT = 1_000;

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

const ui = {
  message: $<HTMLDivElement>('message'),
  signIn: $<HTMLElement>('sign-in'),
  signInForm: $<HTMLFormElement>('sign-in-form'),
  keyInput: $<HTMLInputElement>('api-key'),
  keyLabel: $<HTMLParagraphElement>('key-label'),
  signOut: $<HTMLButtonElement>('sign-out'),
  board: $<HTMLElement>('board'),
  controls: $<HTMLFormElement>('controls'),
  app: $<HTMLSelectElement>('app'),
  range: $<HTMLSelectElement>('range'),
  customFrom: $<HTMLDivElement>('custom-from'),
  customTo: $<HTMLDivElement>('custom-to'),
  from: $<HTMLInputElement>('from'),
  to: $<HTMLInputElement>('to'),
  event: $<HTMLSelectElement>('event'),
  testMode: $<HTMLInputElement>('test-mode'),
  refresh: $<HTMLButtonElement>('refresh'),
  empty: $<HTMLDivElement>('empty'),
  curl: $<HTMLElement>('curl'),
  charts: $<HTMLDivElement>('charts'),
  rows: $<HTMLTableElement>('rows'),
  csv: $<HTMLButtonElement>('csv'),
  liveOn: $<HTMLInputElement>('live-on'),
  liveStatus: $<HTMLParagraphElement>('live-status'),
  live: $<HTMLTableElement>('live'),
};

const charts = {
  events: new DailyChart($('chart-events'), 'Events'),
  users: new DailyChart($('chart-users'), 'Unique users'),
  sessions: new DailyChart($('chart-sessions'), 'Unique sessions'),
};

const dataQuality = new DataQualityView(ui.board);

const state = {
  key: null as KeyInfo | null,
  rollups: [] as Rollup[],
  shown: [] as Rollup[],
  days: [] as string[],
  liveTimer: undefined as number | undefined,
  retryTimer: undefined as number | undefined,
};

function showMessage(text: string, kind: 'info' | 'error' = 'error'): void {
  ui.message.textContent = text;
  ui.message.classList.toggle('error', kind === 'error');
  ui.message.hidden = false;
}

function clearMessage(): void {
  ui.message.hidden = true;
  ui.message.textContent = '';
}

/** Shows a failed call's message; a 429 or 503 schedules one retry after Retry-After. */
function fail(err: unknown, retry?: () => void): void {
  if (!(err instanceof ApiError)) {
    showMessage(`Unexpected error: ${err instanceof Error ? err.message : String(err)}`);
    return;
  }
  const p = err.problem;
  showMessage(describeProblem(p, state.key !== null));
  if (retry && (p.status === 429 || p.status === 503)) {
    window.clearTimeout(state.retryTimer);
    ui.refresh.disabled = true;
    state.retryTimer = window.setTimeout(
      () => {
        ui.refresh.disabled = false;
        retry();
      },
      (p.retryAfterSeconds ?? (p.status === 429 ? 1 : 5)) * 1000,
    );
  }
}

function cellsRow(cells: (string | number)[], numeric: Set<number>): HTMLTableRowElement {
  const tr = document.createElement('tr');
  cells.forEach((value, i) => {
    const td = document.createElement('td');
    td.textContent = String(value);
    if (numeric.has(i)) td.className = 'num';
    tr.append(td);
  });
  return tr;
}

function fmt(n: number | undefined): string {
  if (n === undefined) return '–';
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}

// ---- sign-in ----

async function signIn(key: string): Promise<void> {
  storeKey(key);
  try {
    state.key = await get<KeyInfo>('/api/v1/key');
  } catch (err) {
    forgetKey();
    state.key = null;
    fail(err);
    ui.keyInput.focus();
    return;
  }
  clearMessage();
  ui.keyInput.value = '';
  ui.signIn.hidden = true;
  ui.board.hidden = false;
  ui.signOut.hidden = false;
  ui.keyLabel.hidden = false;
  ui.keyLabel.textContent = `${state.key.prefix} · ${state.key.scopes.join(', ')}`;
  ui.app.replaceChildren(
    ...state.key.apps.map((a) => {
      const option = document.createElement('option');
      option.value = a.id;
      option.textContent = a.name;
      return option;
    }),
  );
  if (state.key.apps.length === 0) {
    showMessage('This key grants access to no app that still exists. Issue a key for an app.');
    return;
  }
  await loadRollups();
  startLive();
}

function signOut(): void {
  forgetKey();
  stopLive();
  window.clearTimeout(state.retryTimer);
  state.key = null;
  state.rollups = [];
  ui.board.hidden = true;
  ui.signOut.hidden = true;
  ui.keyLabel.hidden = true;
  ui.signIn.hidden = false;
  ui.refresh.disabled = false;
  ui.rows.tBodies[0].replaceChildren();
  ui.live.tBodies[0].replaceChildren();
  showMessage('Signed out. The key was removed from this tab.', 'info');
  ui.keyInput.focus();
}

// ---- rollups ----

function rangeParams(): { params: Record<string, string>; from: string; to: string } | null {
  const today = localToday();
  if (ui.range.value !== 'custom') {
    const n = Number(ui.range.value);
    return { params: { range: `${n}d` }, from: localDaysAgo(n), to: today };
  }
  const from = ui.from.value;
  const to = ui.to.value || today;
  if (!from) {
    showMessage('Choose a start date for the custom range.');
    return null;
  }
  return { params: { fromDate: from, toDate: to }, from, to };
}

async function fetchRollups(): Promise<void> {
  const appId = ui.app.value;
  const range = rangeParams();
  if (!appId || !range) return;
  try {
    state.rollups = await fetchAllRollups({
      appId,
      ...range.params,
      testMode: ui.testMode.checked ? 'true' : 'false',
    });
  } catch (err) {
    state.rollups = [];
    render([]);
    fail(err, () => void loadRollups());
    return;
  }
  clearMessage();
  state.days = daysBetween(range.from, range.to);
  fillEventPicker();
  render(state.days);
  renderTopEvents($<HTMLTableElement>('top-events'), state.rollups);
  void dataQuality.load(state.key, appId, range.from, range.to);
}

const loadRollups = singleFlight(fetchRollups);

function fillEventPicker(): void {
  const chosen = ui.event.value;
  const names = topEvents(state.rollups).names.map((e) => e.name);
  const all = document.createElement('option');
  all.value = '';
  all.textContent = 'All events';
  ui.event.replaceChildren(
    all,
    ...names.map((n) => {
      const option = document.createElement('option');
      option.value = n;
      option.textContent = n;
      return option;
    }),
  );
  ui.event.value = names.includes(chosen) ? chosen : '';
}

function render(days: string[]): void {
  const name = ui.event.value || null;
  // The charts of "All events" draw the app-wide total row of each day, which carries the true
  // daily users; its table lists the total rows and the per-event rows, as the API returned them.
  const plotted = state.rollups.filter((r) => r.eventName === name);
  state.shown = name === null ? state.rollups : plotted;
  const byDay = new Map(plotted.map((r) => [r.date, r]));
  const series = (pick: (r: Rollup) => number) => ({
    days,
    values: days.map((d) => {
      const row = byDay.get(d);
      return row ? pick(row) : 0;
    }),
  });
  const empty = state.rollups.length === 0;
  ui.empty.hidden = !empty;
  ui.charts.hidden = empty;
  if (empty) ui.curl.textContent = curlLine();
  else {
    charts.events.render(series((r) => r.events));
    charts.users.render(series((r) => r.uniqueUsers));
    charts.sessions.render(series((r) => r.uniqueSessions));
  }
  renderTable();
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

function renderTable(): void {
  const numeric = new Set([2, 3, 4, 5, 6, 7, 8, 9]);
  const body = ui.rows.tBodies[0];
  if (state.shown.length === 0) {
    body.replaceChildren(noteRow('No rows for this selection.'));
    ui.csv.disabled = true;
    return;
  }
  ui.csv.disabled = false;
  const more = state.shown.length - TABLE_LIMIT;
  body.replaceChildren(
    ...state.shown.slice(0, TABLE_LIMIT).map((r) => {
      const f = r.floatValue;
      const tr = cellsRow(
        [
          r.date,
          r.eventName ?? 'All events',
          r.events,
          r.uniqueUsers,
          r.uniqueSessions,
          f ? f.count : '–',
          fmt(f?.sum),
          fmt(f?.min),
          fmt(f?.max),
          fmt(f?.avg),
        ],
        numeric,
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
    }),
    ...(more > 0 ? [noteRow(`${more.toLocaleString()} more rows: Download CSV for all of them.`)] : []),
  );
}

function curlLine(): string {
  return [
    `curl -X POST ${location.origin}/api/ingest \\`,
    `  -H 'Authorization: Bearer tly_live_…' \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  -d '{"events":[{"eventName":"App.opened"}]}'`,
  ].join('\n');
}

function downloadCsv(): void {
  const blob = new Blob([rollupsCsv(state.shown)], { type: 'text/csv;charset=utf-8' });
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  const app = ui.app.selectedOptions[0]?.textContent ?? 'app';
  const slug = app.replace(/[^A-Za-z0-9_-]+/g, '-').slice(0, 40) || 'app';
  a.href = url;
  a.download = `tally-${slug}-${state.days[0] ?? ''}-${state.days.at(-1) ?? ''}.csv`;
  document.body.append(a);
  a.click();
  a.remove();
  window.setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

// ---- live ----

async function fetchLive(): Promise<void> {
  const appId = ui.app.value;
  if (!appId || document.hidden) return;
  try {
    const eventName = ui.event.value;
    const events = await get<EventRecord[]>('/api/v1/events', {
      appId,
      limit: String(LIVE_LIMIT),
      testMode: ui.testMode.checked ? 'true' : 'false',
      ...(eventName ? { eventName } : {}),
    });
    const which = eventName ? `${eventName} events` : 'events';
    const updated = appDateTime(Date.now()).slice(11);
    ui.liveStatus.textContent = `Newest ${events.length} ${which}, updated ${updated} (${appZone()}).`;
    ui.live.tBodies[0].replaceChildren(
      ...events.map((e) =>
        cellsRow(
          [
            appDateTime(e.receivedAt),
            e.eventName,
            e.anonymousUserId ?? '–',
            e.sessionId ?? '–',
            e.platform ?? '–',
            e.floatValue ?? '–',
            e.isTestMode ? 'yes' : 'no',
          ],
          new Set([5]),
        ),
      ),
    );
  } catch (err) {
    const p = err instanceof ApiError ? err.problem : null;
    ui.liveStatus.textContent = p ? describeProblem(p) : 'Live events could not be read.';
  }
}

const pollLive = singleFlight(fetchLive);

function startLive(): void {
  stopLive();
  if (!ui.liveOn.checked) {
    ui.liveStatus.textContent = 'Paused.';
    return;
  }
  void pollLive();
  state.liveTimer = window.setInterval(() => void pollLive(), LIVE_INTERVAL_MS);
}

function stopLive(): void {
  window.clearInterval(state.liveTimer);
  state.liveTimer = undefined;
}

// ---- wiring ----

ui.signInForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const key = ui.keyInput.value.trim();
  if (key) void signIn(key);
});
ui.signOut.addEventListener('click', signOut);
ui.controls.addEventListener('submit', (e) => {
  e.preventDefault();
  void loadRollups();
});
ui.app.addEventListener('change', () => {
  ui.event.value = '';
  void loadRollups();
  startLive();
});
ui.range.addEventListener('change', () => {
  const custom = ui.range.value === 'custom';
  ui.customFrom.hidden = !custom;
  ui.customTo.hidden = !custom;
  if (custom) {
    ui.from.value ||= localDaysAgo(30);
    ui.to.value ||= localToday();
  }
  void loadRollups();
});
ui.from.addEventListener('change', () => void loadRollups());
ui.to.addEventListener('change', () => void loadRollups());
ui.event.addEventListener('change', () => {
  render(state.days);
  if (state.liveTimer !== undefined) void pollLive();
});
ui.testMode.addEventListener('change', () => {
  void loadRollups();
  void pollLive();
});
ui.csv.addEventListener('click', downloadCsv);
ui.liveOn.addEventListener('change', startLive);
document.addEventListener('visibilitychange', () => {
  if (!document.hidden && state.liveTimer !== undefined) void pollLive();
});
window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
  if (!ui.charts.hidden) Object.values(charts).forEach((c) => c.draw());
});

watchAppZone(ui.app, () => state.key);

const saved = storedKey();
if (saved) void signIn(saved);
else ui.keyInput.focus();
