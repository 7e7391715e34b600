import { ApiError, describeProblem, EventRecord, get } from './api';
import { appDateTime, appZone } from './app-zone';
import { cellsRow, Dashboard } from './dashboard';

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
