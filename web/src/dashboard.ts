import { ApiError, describeProblem, KeyInfo, Rollup } from './api';
import { DailyChart } from './charts';
import { DataQualityView } from './data-quality';

// What the dashboard's parts share: the page's elements, the charts, the state of the session,
// and the two reads (each in a single flight) that the parts trigger in one another.

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

function findElements() {
  return {
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
    emptyTitle: $<HTMLHeadingElement>('empty-title'),
    emptyHint: $<HTMLParagraphElement>('empty-hint'),
    curl: $<HTMLElement>('curl'),
    activeNote: $<HTMLParagraphElement>('active-note'),
    filters: $<HTMLDivElement>('filters'),
    breakdownBy: $<HTMLSelectElement>('breakdown-by'),
    breakdownNote: $<HTMLParagraphElement>('breakdown-note'),
    breakdown: $<HTMLTableElement>('breakdown-table'),
    charts: $<HTMLDivElement>('charts'),
    rows: $<HTMLTableElement>('rows'),
    topEvents: $<HTMLTableElement>('top-events'),
    csv: $<HTMLButtonElement>('csv'),
    liveOn: $<HTMLInputElement>('live-on'),
    liveStatus: $<HTMLParagraphElement>('live-status'),
    live: $<HTMLTableElement>('live'),
  };
}

export type Elements = ReturnType<typeof findElements>;

export interface Dashboard {
  ui: Elements;
  charts: { events: DailyChart; users: DailyChart; sessions: DailyChart; active: DailyChart };
  dataQuality: DataQualityView;
  state: {
    key: KeyInfo | null;
    rollups: Rollup[];
    shown: Rollup[];
    days: string[];
    /** Equality filters on built-in dimensions other than eventName (the event picker is that one). */
    filters: Record<string, string>;
    liveTimer: number | undefined;
    retryTimer: number | undefined;
  };
  /** Reads the rollups of the current choice; at most one read in flight, the last choice wins. */
  loadRollups: () => Promise<void>;
  /** Reads the active users and the breakdown again, after the rollups' lane. */
  loadInsights: () => Promise<void>;
  /** Reads the breakdown again, after the rollups' lane. */
  loadBreakdown: () => Promise<void>;
  /** Reads the live feed once; at most one read in flight. */
  pollLive: () => Promise<void>;
}

/** The dashboard of this page, with its reads still to be attached by `mount()`. */
export function createDashboard(): Dashboard {
  const ui = findElements();
  return {
    ui,
    charts: {
      events: new DailyChart($('chart-events'), 'Events'),
      users: new DailyChart($('chart-users'), 'Unique users'),
      sessions: new DailyChart($('chart-sessions'), 'Unique sessions'),
      active: new DailyChart($('chart-active'), [
        { label: 'Daily', key: 'daily', color: '--series' },
        { label: 'Weekly (7 days)', key: 'weekly', color: '--series-2' },
        { label: 'Monthly (28 days)', key: 'monthly', color: '--series-3' },
      ]),
    },
    dataQuality: new DataQualityView(ui.board),
    state: {
      key: null,
      rollups: [],
      shown: [],
      days: [],
      filters: {},
      liveTimer: undefined,
      retryTimer: undefined,
    },
    loadRollups: () => Promise.resolve(),
    loadInsights: () => Promise.resolve(),
    loadBreakdown: () => Promise.resolve(),
    pollLive: () => Promise.resolve(),
  };
}

export function showMessage(d: Dashboard, text: string, kind: 'info' | 'error' = 'error'): void {
  d.ui.message.textContent = text;
  d.ui.message.classList.toggle('error', kind === 'error');
  d.ui.message.hidden = false;
}

export function clearMessage(d: Dashboard): void {
  d.ui.message.hidden = true;
  d.ui.message.textContent = '';
}

/** Shows a failed call's message; a 429 or 503 schedules one retry after Retry-After. */
export function fail(d: Dashboard, err: unknown, retry?: () => void): void {
  if (!(err instanceof ApiError)) {
    showMessage(d, `Unexpected error: ${err instanceof Error ? err.message : String(err)}`);
    return;
  }
  const p = err.problem;
  showMessage(d, describeProblem(p, d.state.key !== null));
  if (retry && (p.status === 429 || p.status === 503)) {
    window.clearTimeout(d.state.retryTimer);
    d.ui.refresh.disabled = true;
    d.state.retryTimer = window.setTimeout(
      () => {
        d.ui.refresh.disabled = false;
        retry();
      },
      (p.retryAfterSeconds ?? (p.status === 429 ? 1 : 5)) * 1000,
    );
  }
}

/** A table row of text cells; the cells at the `numeric` indexes are right-aligned. */
export function cellsRow(cells: (string | number)[], numeric: Set<number>): HTMLTableRowElement {
  const tr = document.createElement('tr');
  cells.forEach((value, i) => {
    const td = document.createElement('td');
    td.textContent = String(value);
    if (numeric.has(i)) td.className = 'num';
    tr.append(td);
  });
  return tr;
}
