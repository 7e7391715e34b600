import { serialLane, singleFlight, storedKey } from './api';
import { localDaysAgo, localToday, watchAppZone } from './app-zone';
import { createDashboard, Dashboard } from './dashboard';
import { fetchBreakdown, fetchInsights, renderFilters } from './insights';
import { fetchLive, liveRunning, startLive } from './live';
import { downloadCsv, fetchRollups, render } from './rollups-view';
import { signIn, signOut } from './session';

function wireControls(d: Dashboard): void {
  const { ui } = d;
  ui.controls.addEventListener('submit', (e) => {
    e.preventDefault();
    void d.loadRollups();
  });
  ui.app.addEventListener('change', () => {
    ui.event.value = '';
    d.state.filters = {};
    void d.loadRollups();
    startLive(d);
  });
  ui.range.addEventListener('change', () => {
    const custom = ui.range.value === 'custom';
    ui.customFrom.hidden = !custom;
    ui.customTo.hidden = !custom;
    if (custom) {
      ui.from.value ||= localDaysAgo(30);
      ui.to.value ||= localToday();
    }
    void d.loadRollups();
  });
  ui.from.addEventListener('change', () => void d.loadRollups());
  ui.to.addEventListener('change', () => void d.loadRollups());
  ui.event.addEventListener('change', () => {
    render(d);
    renderFilters(d);
    void d.loadInsights();
    if (liveRunning(d)) void d.pollLive();
  });
  ui.breakdownBy.addEventListener('change', () => void d.loadBreakdown());
  ui.testMode.addEventListener('change', () => {
    void d.loadRollups();
    void d.pollLive();
  });
}

function wire(d: Dashboard): void {
  const { ui } = d;
  ui.signInForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const key = ui.keyInput.value.trim();
    if (key) void signIn(d, key);
  });
  ui.signOut.addEventListener('click', () => signOut(d));
  wireControls(d);
  ui.csv.addEventListener('click', () => downloadCsv(d));
  ui.liveOn.addEventListener('change', () => startLive(d));
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && liveRunning(d)) void d.pollLive();
  });
  window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
    if (!ui.charts.hidden) Object.values(d.charts).forEach((c) => c.draw());
  });
}

/** Starts the dashboard on this page: wires the controls and signs in with the tab's key, if any. */
export function mount(): void {
  const d = createDashboard();
  // The board's reads share one lane: with the live feed's, at most two reads are in flight.
  const lane = serialLane();
  d.loadRollups = singleFlight(() => lane(() => fetchRollups(d)));
  d.loadInsights = singleFlight(() => lane(() => fetchInsights(d)));
  d.loadBreakdown = singleFlight(() => lane(() => fetchBreakdown(d)));
  d.pollLive = singleFlight(() => fetchLive(d));
  wire(d);
  watchAppZone(d.ui.app, () => d.state.key);
  const saved = storedKey();
  if (saved) void signIn(d, saved);
  else d.ui.keyInput.focus();
}

mount();
