import fs from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { BrowserContext } from 'playwright-core';
import { RollupsService } from '@app/rollups/rollups.service';
import { RezoneService } from '@app/rollups/rezone.service';
import { makeApiKey, makeApp, makeTenant } from '../factories';
import { startTestApp, TestApp } from '../support/test-app';
import {
  chartValues,
  DAY_MS,
  eventually,
  launchBrowser,
  openPage as open,
  SCREENSHOTS,
  shown,
  signIn,
  tableRows,
} from './browser-support';

const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

interface Rollup {
  date: string;
  eventName: string | null;
  isTestMode: boolean;
  events: number;
  uniqueUsers: number;
  uniqueSessions: number;
  floatValue: { count: number; sum: number; min: number; max: number; avg: number } | null;
  final: boolean;
}

describe('dashboard in Chromium', () => {
  let t: TestApp;
  let base: string;
  let browser: Awaited<ReturnType<typeof launchBrowser>>;
  let context: BrowserContext;
  let tenant: Awaited<ReturnType<typeof makeTenant>>;
  let emptyApp: { id: string; name: string };
  let apiKey: string;

  const post = (key: string, events: object[]) =>
    fetch(`${base}/api/ingest`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ events }),
    });
  const rollups = async (testMode: boolean): Promise<Rollup[]> => {
    const res = await fetch(
      `${base}/api/v1/rollups?appId=${tenant.appId}&range=30d&testMode=${String(testMode)}`,
      { headers: { Authorization: `Bearer ${apiKey}` } },
    );
    expect(res.status).toBe(200);
    return (await res.json()) as Rollup[];
  };

  const openPage = () => open(context, base);

  const expectedRow = (r: Rollup) => [
    r.date,
    r.eventName ?? 'All events',
    shown(r.events),
    shown(r.uniqueUsers),
    shown(r.uniqueSessions),
    shown(r.floatValue?.count),
    shown(r.floatValue?.sum),
    shown(r.floatValue?.min),
    shown(r.floatValue?.max),
    shown(r.floatValue?.avg),
    r.final ? 'final' : 'open',
  ];

  beforeAll(async () => {
    // The page polls with the same key the test reads with: lift the per-key read limits, which
    // have their own tests, so that a poll running beside the test's read is never turned away.
    t = await startTestApp({
      AUTH_FAILURE_LIMIT: '1000',
      READ_RATE_REQUESTS: '1000',
      READ_MAX_CONCURRENT_PER_KEY: '100',
      READ_TIME_MS_PER_SECOND: '100000',
    });
    await t.app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(t.http.address() as AddressInfo).port}`;

    tenant = await makeTenant(t.app);
    emptyApp = await makeApp(t.app, 'Empty app');
    apiKey = (await makeApiKey(t.app, [tenant.appId, emptyApp.id])).key;
    const now = Date.now();
    const events: object[] = [];
    for (let day = 0; day < 4; day++) {
      for (let i = 0; i <= day; i++) {
        const at = now - day * DAY_MS - i * 1000;
        events.push({
          eventName: 'App.opened',
          eventTime: at,
          anonymousUserId: `u${i}`,
          sessionId: `s${day}-${i}`,
        });
        events.push({
          eventName: 'Checkout.completed',
          eventTime: at,
          anonymousUserId: `u${i}`,
          sessionId: `s${day}-${i}`,
          floatValue: 1.25 * (i + 1),
        });
      }
    }
    expect((await post(tenant.liveKey, events)).status).toBe(200);
    expect((await post(tenant.testKey, [{ eventName: 'Debug.tap', anonymousUserId: 'tester' }])).status).toBe(
      200,
    );
    await t.app.get(RollupsService).compute({ appId: tenant.appId });

    browser = await launchBrowser();
    context = browser.context;
  });

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('serves the page with a strict CSP and no inline script or style', async () => {
    const res = await fetch(`${base}/dashboard`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    const html = await res.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|\sstyle=/);
    expect(html).not.toMatch(/https?:\/\//);
    const js = await fetch(`${base}/dashboard/assets/dashboard.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
  });

  it('signs in, picks an app, and shows the same numbers as /api/v1/rollups', async () => {
    const { page, log } = await openPage();
    await signIn(page, apiKey);
    await page.locator('#board').waitFor();
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(page.url()).toBe(`${base}/dashboard`);
    expect(await page.locator('#key-label').textContent()).toContain('rollups:read');

    const options = await page.$$eval('#app option', (os) => os.map((o) => o.textContent));
    expect(options.sort()).toEqual([emptyApp.name, tenant.app.name].sort());
    await page.getByLabel('App', { exact: true }).selectOption(tenant.appId);
    await page.getByLabel('Range', { exact: true }).selectOption('30');

    const api = await rollups(false);
    const totals = api.filter((r) => r.eventName === null);
    expect(totals).toHaveLength(4);
    // "All events": the charts draw the total rows; the table lists every row the API returned.
    expect(api.length).toBeGreaterThan(totals.length);
    await eventually(
      () => tableRows(page, 'rows'),
      (rows) => expect(rows).toEqual(api.map(expectedRow)),
    );
    expect(totals.filter((r) => !r.final)).toHaveLength(1);
    for (const [chart, field] of [
      ['chart-events', 'events'],
      ['chart-users', 'uniqueUsers'],
      ['chart-sessions', 'uniqueSessions'],
    ] as const) {
      const values = await chartValues(page, chart);
      expect(Object.keys(values)).toHaveLength(30);
      for (const r of totals)
        expect({ chart, day: r.date, value: values[r.date] }).toEqual({
          chart,
          day: r.date,
          value: r[field],
        });
      const sum = Object.values(values).reduce((a, b) => a + b, 0);
      expect(sum).toBe(totals.reduce((a, r) => a + r[field], 0));
    }

    await page.getByLabel('Event', { exact: true }).selectOption('Checkout.completed');
    const checkout = api.filter((r) => r.eventName === 'Checkout.completed');
    await eventually(
      () => tableRows(page, 'rows'),
      (rows) => expect(rows).toEqual(checkout.map(expectedRow)),
    );
    expect(checkout.every((r) => r.floatValue !== null)).toBe(true);

    // CSV of the rows shown.
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download CSV' }).click(),
    ]);
    const csv = fs
      .readFileSync((await download.path()) as string, 'utf8')
      .trimEnd()
      .split('\r\n');
    expect(csv[0]).toBe(
      'date,eventName,isTestMode,events,uniqueUsers,uniqueSessions,floatValueCount,floatValueSum,floatValueMin,floatValueMax,floatValueAvg,final',
    );
    expect(csv.slice(1)).toEqual(
      checkout.map((r) =>
        [
          r.date,
          r.eventName,
          r.isTestMode,
          r.events,
          r.uniqueUsers,
          r.uniqueSessions,
          r.floatValue?.count,
          r.floatValue?.sum,
          r.floatValue?.min,
          r.floatValue?.max,
          r.floatValue?.avg,
          r.final,
        ].join(','),
      ),
    );

    // Test-mode toggle: the test key's event only.
    await page.getByLabel('Event', { exact: true }).selectOption('');
    await page.getByLabel('Test data', { exact: true }).check();
    const testRows = await rollups(true);
    expect(testRows.filter((r) => r.eventName === null)).toHaveLength(1);
    expect(testRows.map((r) => r.eventName)).toEqual([null, 'Debug.tap']);
    await eventually(
      () => tableRows(page, 'rows'),
      (rows) => expect(rows).toEqual(testRows.map(expectedRow)),
    );
    await page.getByLabel('Test data', { exact: true }).uncheck();
    await eventually(
      () => tableRows(page, 'rows'),
      (rows) => expect(rows).toEqual(api.map(expectedRow)),
    );

    // Live: an event sent now shows up within one poll.
    const name = `Live.ping${Date.now()}`;
    expect((await post(tenant.liveKey, [{ eventName: name, anonymousUserId: 'live-user' }])).status).toBe(
      200,
    );
    await eventually(
      () => tableRows(page, 'live'),
      (rows) => expect(rows.map((cells) => cells[1])).toContain(name),
      12_000,
    );
    expect((await tableRows(page, 'live')).length).toBeLessThanOrEqual(50);

    // Accessibility: axe-core inside the page.
    await page.evaluate(AXE_SOURCE);
    const violations = await page.evaluate(async () => {
      const axe = (
        window as unknown as {
          axe: { run: () => Promise<{ violations: { id: string; impact: string; nodes: unknown[] }[] }> };
        }
      ).axe;
      const result = await axe.run();
      return result.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length }));
    });
    expect(violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')).toEqual([]);

    // Screenshots for people to look at: light and dark, desktop and phone width.
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const width of [1280, 390]) {
        await page.setViewportSize({ width, height: 900 });
        await page.waitForTimeout(150);
        await page.screenshot({
          path: path.join(SCREENSHOTS, `dashboard-${scheme}-${width}.png`),
          fullPage: true,
        });
      }
    }
    // The first screen in light mode, the size the README shows (docs/dashboard.png).
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 1100, height: 700 });
    await page.waitForTimeout(150);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'dashboard-overview.png') });
    await page.setViewportSize({ width: 360, height: 800 });
    await page.waitForTimeout(300);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);

    // Empty app: the empty state with a curl line.
    await page.getByLabel('App', { exact: true }).selectOption(emptyApp.id);
    await page.locator('#empty').waitFor();
    expect(await page.locator('#curl').textContent()).toContain(`curl -X POST ${base}/api/ingest`);

    // Sign out clears the key.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.locator('#sign-in').waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);

    expect(log.consoleErrors).toEqual([]);
    expect(log.cspViolations).toEqual([]);
    await page.close();
  });

  it('keeps at most two reads in flight however slow the server answers, and the last choice wins', async () => {
    const { page, log } = await openPage();
    // Every read answered 300 ms late, as by a loaded server; the server allows two at once per key.
    let inFlight = 0;
    let most = 0;
    const rollupQueries: URLSearchParams[] = [];
    // The board reads the rollups, then the active users and the breakdown, one after another.
    const lastBoardRead = new Map<string, URLSearchParams>();
    let lastBoardPath = '';
    let boardInFlight = 0;
    await page.route('**/api/v1/**', async (route) => {
      const url = new URL(route.request().url());
      const board = url.pathname !== '/api/v1/events' && url.pathname !== '/api/v1/key';
      if (url.pathname === '/api/v1/rollups') rollupQueries.push(url.searchParams);
      if (board) {
        lastBoardRead.set(url.pathname, url.searchParams);
        lastBoardPath = url.pathname;
        boardInFlight++;
      }
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise((r) => setTimeout(r, 300));
      try {
        await route.continue();
      } finally {
        inFlight--;
        if (board) boardInFlight--;
      }
    });
    await signIn(page, apiKey);
    await page.getByLabel('App', { exact: true }).selectOption(tenant.appId);
    // Changes made faster than the answers come back.
    const testData = page.getByLabel('Test data', { exact: true });
    await testData.check();
    await page.getByLabel('Range', { exact: true }).selectOption('7');
    await testData.uncheck();
    await page.getByLabel('App', { exact: true }).selectOption(emptyApp.id);
    await testData.check();
    const lastReads = () =>
      ['/api/v1/rollups', '/api/v1/active-users', '/api/v1/breakdown'].map((p) => [
        p,
        lastBoardRead.get(p)?.get('appId'),
        lastBoardRead.get(p)?.get('testMode'),
      ]);
    const settled = ['/api/v1/rollups', '/api/v1/active-users', '/api/v1/breakdown'].map((p) => [
      p,
      emptyApp.id,
      'true',
    ]);
    // Settled: the breakdown, the last read of a round, has answered for the last choice.
    await eventually(
      async () => ({ boardInFlight, last: lastBoardPath, reads: lastReads() }),
      ({ boardInFlight: now, last, reads }) => {
        expect(now).toBe(0);
        expect(last).toBe('/api/v1/breakdown');
        expect(reads).toEqual(settled);
      },
      15_000,
    );
    // The last reads ran after the last change, no other round followed, and nothing was refused.
    await new Promise((r) => setTimeout(r, 700));
    expect(boardInFlight).toBe(0);
    expect(lastBoardPath).toBe('/api/v1/breakdown');
    expect(lastReads()).toEqual(settled);
    expect(most).toBeLessThanOrEqual(2);
    expect(rollupQueries.at(-1)?.get('appId')).toBe(emptyApp.id);
    expect(rollupQueries.at(-1)?.get('testMode')).toBe('true');
    expect(log.consoleErrors).toEqual([]);
    await page.unrouteAll({ behavior: 'wait' });
    await page.close();
  });

  it('a bad key shows the 401 message', async () => {
    const { page, log } = await openPage();
    await signIn(page, 'tly_api_' + 'A'.repeat(49));
    await eventually(
      () => page.locator('#message').textContent(),
      (text) => expect(text).toContain('The key was refused (401)'),
    );
    expect(await page.locator('#board').isHidden()).toBe(true);
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    // Still on the sign-in form, with no Sign out button: the message asks for another key only.
    const signOut = page.getByRole('button', { name: 'Sign out' });
    expect(await page.locator('#sign-in').isVisible()).toBe(true);
    expect(await signOut.isVisible()).toBe(false);
    const refused = await page.locator('#message').textContent();
    expect(refused).toContain('Paste a valid API key.');
    expect(refused).not.toContain('Sign out');
    // An ingest key: the same, naming the kind of key the dashboard needs.
    await signIn(page, tenant.liveKey);
    await eventually(
      () => page.locator('#message').textContent(),
      (text) => expect(text).toContain('This is an ingest key'),
    );
    expect(await page.locator('#message').textContent()).not.toContain('Sign out');
    expect(await signOut.isVisible()).toBe(false);
    // The browser logs the failed request itself; nothing else may show up.
    expect(log.consoleErrors.filter((e) => !/status of 401/.test(e))).toEqual([]);
    expect(log.cspViolations).toEqual([]);
    await page.close();
  });

  it("shows live times in the app's zone, labelled, filters the feed by event, and draws whole ticks", async () => {
    const ZONE = 'Asia/Kolkata';
    const zoned = await makeTenant(t.app);
    await t.app.get(RezoneService).setTimezone(zoned.appId, ZONE, { type: 'cli', osUser: 'test' });
    const key = (await makeApiKey(t.app, [zoned.appId])).key;
    // No session id: the sessions chart is a chart of zeros.
    const sent = [
      { eventName: 'Cart.viewed', anonymousUserId: 'z1' },
      { eventName: 'Cart.viewed', anonymousUserId: 'z2' },
      { eventName: 'Order.placed', anonymousUserId: 'z1' },
    ];
    expect((await post(zoned.liveKey, sent)).status).toBe(200);
    await t.app.get(RollupsService).compute({ appId: zoned.appId });
    const res = await fetch(`${base}/api/v1/events?appId=${zoned.appId}&limit=50`, {
      headers: { Authorization: `Bearer ${key}` },
    });
    const events = (await res.json()) as { eventName: string; receivedAt: number }[];
    expect(events).toHaveLength(3);
    const inZone = new Intl.DateTimeFormat('sv-SE', {
      timeZone: ZONE,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    });

    const { page, log } = await openPage();
    await signIn(page, key);
    await eventually(
      () => tableRows(page, 'live'),
      (rows) =>
        expect(rows.map((r) => [r[0], r[1]])).toEqual(
          events.map((e) => [inZone.format(e.receivedAt), e.eventName]),
        ),
    );
    expect(await page.locator('#live thead th').first().textContent()).toBe(`Received (${ZONE})`);
    expect(await page.locator('#live-status').textContent()).toMatch(
      new RegExp(`^Newest 3 events, updated \\d{2}:\\d{2}:\\d{2} \\(${ZONE}\\)\\.$`),
    );

    // The live feed follows the event picker.
    await page.getByLabel('Event', { exact: true }).selectOption('Order.placed');
    await eventually(
      () => tableRows(page, 'live'),
      (rows) => expect(rows.map((r) => r[1])).toEqual(['Order.placed']),
    );
    expect(await page.locator('#live-status').textContent()).toContain('Newest 1 Order.placed events');
    await page.getByLabel('Event', { exact: true }).selectOption('');
    await eventually(
      () => tableRows(page, 'live'),
      (rows) => expect(rows).toHaveLength(3),
    );

    // Whole-number ticks on a chart of zeros; the last day of the data always has its label.
    for (const range of ['7', '30', '90']) {
      await page.getByLabel('Range', { exact: true }).selectOption(range);
      for (const width of [1280, 390]) {
        await page.setViewportSize({ width, height: 900 });
        await eventually(
          () => page.$eval('#chart-sessions', (el) => ({ ...(el as HTMLElement).dataset })),
          (d) => {
            const days = (d.days ?? '').split(',');
            expect(days).toHaveLength(Number(range));
            expect(d.values?.split(',').every((v) => v === '0')).toBe(true);
            expect(d.yTicks?.split(',').map(Number)).toEqual([0, 1]);
            const ticks = (d.xTicks ?? '').split(',');
            expect(ticks.at(-1)).toBe(days.at(-1));
            expect(ticks.length).toBeGreaterThan(1);
          },
        );
      }
      const events = await page.$eval('#chart-events', (el) => ({ ...(el as HTMLElement).dataset }));
      expect(events.yTicks?.split(',').every((v) => Number.isInteger(Number(v)))).toBe(true);
    }
    expect(log.consoleErrors).toEqual([]);
    expect(log.cspViolations).toEqual([]);
    await page.close();
  });

  it('a key without rollups:read shows the 403 message naming the scope', async () => {
    const eventsOnly = await makeApiKey(t.app, [tenant.appId], ['events:read']);
    const { page, log } = await openPage();
    await signIn(page, eventsOnly.key);
    await eventually(
      () => page.locator('#message').textContent(),
      (text) => expect(text).toContain('The key lacks the scope rollups:read (403)'),
    );
    expect(log.consoleErrors.filter((e) => !/status of 403/.test(e))).toEqual([]);
    expect(log.cspViolations).toEqual([]);
    await page.close();
  });
});
