import { ApiError, describeProblem, EventRecord, get } from './api';
import { appDateTime, appZone } from './app-zone';
import { cellsRow, Dashboard } from './dashboard';
import { formatNumber } from './format';

// Ids of any length (a user id can be hundreds of characters) are cut to their column's width with
// an ellipsis; the whole id is in the cell's title. Each event's payload unfolds in its row.
const TRUNCATED = [2, 3, 4];

function payloadCell(e: EventRecord, open: Set<string>): HTMLTableCellElement {
  const td = document.createElement('td');
  const payload = e.payload ?? null;
  const keys = payload ? Object.keys(payload) : [];
  if (!payload || keys.length === 0) {
    td.textContent = '–';
    return td;
  }
  const details = document.createElement('details');
  details.className = 'payload';
  details.dataset.id = e.id;
  details.open = open.has(e.id);
  const summary = document.createElement('summary');
  summary.textContent = `${keys.length} key${keys.length === 1 ? '' : 's'}`;
  summary.title = keys.join(', ');
  const pre = document.createElement('pre');
  pre.textContent = JSON.stringify(payload, null, 2);
  details.append(summary, pre);
  td.append(details);
  return td;
}

function eventRow(e: EventRecord, open: Set<string>): HTMLTableRowElement {
  const tr = cellsRow(
    [
      appDateTime(e.receivedAt),
      e.eventName,
      e.anonymousUserId ?? '–',
      e.sessionId ?? '–',
      e.platform ?? '–',
      formatNumber(e.floatValue),
      e.isTestMode ? 'yes' : 'no',
    ],
    new Set([5]),
  );
  for (const i of TRUNCATED) {
    const td = tr.cells[i];
    td.classList.add('trunc');
    td.title = td.textContent ?? '';
  }
  tr.cells[1].classList.add('trunc');
  tr.cells[1].title = e.eventName;
  tr.append(payloadCell(e, open));
  return tr;
}

const LIVE_INTERVAL_MS = 5_000;
const LIVE_LIMIT = 50;

/** One read of the newest events of the chosen app, test mode and event. */
export async function fetchLive(d: Dashboard): Promise<void> {
  const { ui } = d;
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
    // A payload unfolded stays unfolded across polls.
    const open = new Set(
      [...ui.live.querySelectorAll<HTMLDetailsElement>('details.payload[open]')].map(
        (x) => x.dataset.id ?? '',
      ),
    );
    ui.live.tBodies[0].replaceChildren(...events.map((e) => eventRow(e, open)));
  } catch (err) {
    const p = err instanceof ApiError ? err.problem : null;
    ui.liveStatus.textContent = p ? describeProblem(p) : 'Live events could not be read.';
  }
}

export function startLive(d: Dashboard): void {
  stopLive(d);
  if (!d.ui.liveOn.checked) {
    d.ui.liveStatus.textContent = 'Paused.';
    return;
  }
  void d.pollLive();
  d.state.liveTimer = window.setInterval(() => void d.pollLive(), LIVE_INTERVAL_MS);
}

export function stopLive(d: Dashboard): void {
  window.clearInterval(d.state.liveTimer);
  d.state.liveTimer = undefined;
}

/** Whether the feed is polling (it is on and someone is signed in). */
export function liveRunning(d: Dashboard): boolean {
  return d.state.liveTimer !== undefined;
}
