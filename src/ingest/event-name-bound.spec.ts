import { DAY_MS } from '@app/common/time';
import { EventNameBound } from './event-name-bound';

const NOW = Date.UTC(2026, 10, 25, 12);

function bound(limit: number, load: (appId: string, day: string) => Promise<string[]> = async () => []) {
  let reached = 0;
  const b = new EventNameBound(
    { limit, maxAgeDays: 7, refreshMs: 60_000, onLimitReached: () => reached++ },
    load,
  );
  return { b, reached: () => reached };
}

describe('EventNameBound', () => {
  it('admits up to the limit of new names per app and UTC day, and known names after it', () => {
    const { b, reached } = bound(2);
    const a = b.forApp('app', NOW);
    expect([a.admit('x', NOW), a.admit('y', NOW), a.admit('z', NOW), a.admit('x', NOW)]).toEqual([
      true,
      true,
      false,
      true,
    ]);
    expect(reached()).toBe(1);
    // Another day and another app have budgets of their own.
    expect(a.admit('z', NOW - DAY_MS)).toBe(true);
    expect(b.forApp('other', NOW).admit('z', NOW)).toBe(true);
    // The state outlives the request.
    expect(b.forApp('app', NOW).admit('z', NOW)).toBe(false);
    expect(a.message).toContain('INGEST_MAX_EVENT_NAMES_PER_DAY');
  });

  it('merges the stored names of the day in the background, once per refresh interval', async () => {
    const calls: string[] = [];
    const { b } = bound(2, async (appId, day) => {
      calls.push(`${appId} ${day}`);
      return ['stored.1', 'stored.2'];
    });
    expect(b.forApp('app', NOW).admit('new', NOW)).toBe(true);
    await b.settled();
    const later = b.forApp('app', NOW + 1000);
    expect(later.admit('stored.2', NOW)).toBe(true);
    expect(later.admit('another', NOW)).toBe(false);
    expect(calls).toEqual(['app 2026-11-25']);
    b.forApp('app', NOW + 61_000).admit('new', NOW);
    await b.settled();
    expect(calls).toHaveLength(2);
  });

  it('retries a failed load on the next request and rests on its own names meanwhile', async () => {
    let fail = true;
    const { b } = bound(1, async () => {
      if (fail) throw new Error('down');
      return ['stored'];
    });
    expect(b.forApp('app', NOW).admit('mine', NOW)).toBe(true);
    await b.settled();
    fail = false;
    expect(b.forApp('app', NOW).admit('mine', NOW)).toBe(true);
    await b.settled();
    expect(b.forApp('app', NOW).admit('stored', NOW)).toBe(true);
  });

  it('forgets days too old to receive events', () => {
    const { b } = bound(1);
    b.forApp('app', NOW).admit('old', NOW);
    const muchLater = NOW + 10 * DAY_MS;
    expect(b.forApp('app', muchLater).admit('fresh', NOW)).toBe(true);
  });
});
