const DAY_MS = 86_400_000;

export function isoDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Every UTC day from `from` to `to`, both included. */
export function daysBetween(from: string, to: string): string[] {
  const out: string[] = [];
  const end = Date.parse(`${to}T00:00:00Z`);
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= end && out.length <= 366; t += DAY_MS) {
    out.push(isoDay(t));
  }
  return out;
}

export function epochSeconds(day: string): number {
  return Date.parse(`${day}T00:00:00Z`) / 1000;
}
