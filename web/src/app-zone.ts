import type { KeyInfo } from './api';
import { isoDay } from './dates';

// Rollup days are calendar days in the app's own time zone (GET /api/v1/key lists it for each
// app). The range picker, "today", the live feed's times and the labels follow the selected app's
// zone, and every time shown names it.

let zoneOf: () => string = () => 'UTC';

/** `YYYY-MM-DD` of the instant `ms` in `zone`. */
function localDay(ms: number, zone: string): string {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
  }).formatToParts(ms);
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? '';
  return `${get('year')}-${get('month')}-${get('day')}`;
}

/** `YYYY-MM-DD HH:MM:SS` of the instant `ms` in the selected app's zone (24-hour clock). */
export function appDateTime(ms: number): string {
  return new Intl.DateTimeFormat('sv-SE', {
    timeZone: appZone(),
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  }).format(ms);
}

/** The selected app's time zone. */
export function appZone(): string {
  return zoneOf();
}

/** Today in the selected app's zone. */
export function localToday(): string {
  return localDay(Date.now(), appZone());
}

/** The first day of "the last n days including today", in the selected app's zone. */
export function localDaysAgo(n: number): string {
  return isoDay(Date.parse(`${localToday()}T00:00:00Z`) - (n - 1) * 86_400_000);
}

function relabel(): void {
  const zone = appZone();
  for (const id of ['from', 'to']) {
    const label = document.querySelector(`label[for="${id}"]`);
    if (label) label.textContent = `${id === 'from' ? 'From' : 'To'} (${zone})`;
  }
  const dateHead = document.querySelector('#rows thead th');
  if (dateHead) dateHead.textContent = `Date (${zone})`;
  const receivedHead = document.querySelector('#live thead th');
  if (receivedHead) receivedHead.textContent = `Received (${zone})`;
  const picker = document.getElementById('app') as HTMLSelectElement | null;
  if (picker) picker.title = `Days are calendar days in ${zone}`;
}

/**
 * Follows the app picker: the selected app's zone labels the days and the custom range, which
 * picks local dates. Call once, with the picker and the signed-in key's description.
 */
export function watchAppZone(picker: HTMLSelectElement, key: () => KeyInfo | null): void {
  zoneOf = () => key()?.apps.find((a) => a.id === picker.value)?.timezone ?? 'UTC';
  picker.addEventListener('change', relabel);
  new MutationObserver(relabel).observe(picker, { childList: true });
  relabel();
}
