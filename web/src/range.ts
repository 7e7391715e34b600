import { localDaysAgo, localToday } from './app-zone';
import { Dashboard, showMessage } from './dashboard';

/** The range picked: as API parameters, and its first and last local days. */
export function rangeParams(
  d: Dashboard,
): { params: Record<string, string>; from: string; to: string } | null {
  const { ui } = d;
  const today = localToday();
  if (ui.range.value !== 'custom') {
    const n = Number(ui.range.value);
    return { params: { range: `${n}d` }, from: localDaysAgo(n), to: today };
  }
  const from = ui.from.value;
  const to = ui.to.value || today;
  if (!from) {
    showMessage(d, 'Choose a start date for the custom range.');
    return null;
  }
  return { params: { fromDate: from, toDate: to }, from, to };
}
