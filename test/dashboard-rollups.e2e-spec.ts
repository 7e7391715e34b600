/// <reference lib="dom" />
import type { AddressInfo } from 'node:net';
import { RollupsService } from '@app/rollups/rollups.service';
import { utcDateString } from '@app/common/time';
import { fetchAllRollups, topEvents, EVENT_DISPLAY_LIMIT } from '../web/src/top-events';
import { makeTenant } from './factories';
import { seedEvents } from './factories/events';
import { useTestApp } from './support/test-app';

// The dashboard's own code (web/src/top-events.ts) against the real server: the browser globals
// it uses are the page's origin for relative URLs and the key in sessionStorage.
describe('the dashboard reads every rollups page and shows the top event names', () => {
  const t = useTestApp({ ROLLUPS_MAX_ROWS: '10' });
  const realFetch = globalThis.fetch;
  afterAll(() => {
    globalThis.fetch = realFetch;
    delete (globalThis as { sessionStorage?: unknown }).sessionStorage;
  });

  it('follows the cursor, then lists the top names by events and folds the rest into one line', async () => {
    const tenant = await makeTenant(t.app);
    const now = Date.now();
    // 30 names today; name i has i + 1 events.
    const names = Array.from({ length: 30 }, (_, i) => `Screen.${String(i).padStart(2, '0')}`);
    await seedEvents(
      t.db,
      tenant.appId,
      names.flatMap((eventName, i) => Array.from({ length: i + 1 }, () => ({ eventName, receivedAt: now }))),
    );
    await t.app
      .get(RollupsService)
      .compute({ appId: tenant.appId, from: utcDateString(now), to: utcDateString(now) });

    await new Promise<void>((resolve) => t.app.getHttpServer().listen(0, '127.0.0.1', resolve));
    const { port } = t.http.address() as AddressInfo;
    const requested: string[] = [];
    globalThis.fetch = ((input: string, init?: RequestInit) => {
      requested.push(input);
      return realFetch(`http://127.0.0.1:${port}${input}`, init);
    }) as typeof fetch;
    (globalThis as { sessionStorage?: unknown }).sessionStorage = { getItem: () => tenant.apiKey };

    const rows = await fetchAllRollups({ appId: tenant.appId, range: '30d', testMode: 'false' });
    expect(rows).toHaveLength(31);
    expect(requested).toHaveLength(4);
    expect(requested.slice(1).every((url) => url.includes('cursor='))).toBe(true);

    const top = topEvents(rows);
    expect(top.names).toHaveLength(EVENT_DISPLAY_LIMIT);
    expect(top.names[0]).toEqual({ name: 'Screen.29', events: 30 });
    expect(top.names.map((e) => e.name)).toEqual([...names].reverse().slice(0, EVENT_DISPLAY_LIMIT));
    // The 10 smallest names, 1 + 2 + … + 10 events.
    expect(top.other).toEqual({ names: 10, events: 55 });
    expect(topEvents(rows, 100).other).toBeNull();
  });
});
