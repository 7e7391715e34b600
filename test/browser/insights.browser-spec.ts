import fs from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { BrowserContext, Page } from 'playwright-core';
import { DimensionsService } from '@app/insights/dimensions.service';
import { RollupsService } from '@app/rollups/rollups.service';
import { makeApiKey, makeApp, makeTenant, TEST_ACTOR } from '../factories';
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

// The active-users chart, the breakdown panel and its filters, and what a first user of the page
// met: the open day, long ids and payloads in the live feed, the test-data empty state, float noise
// in averages, and the sign-in hint.

interface ActiveUsersRow {
  start: string;
  end: string;
  users: number;
  final: boolean;
}

interface BreakdownRow {
  value: string | null;
  events: number;
  users: number;
  sessions: number;
  floatValue: { avg: number } | null;
  other?: boolean;
}

const LONG_USER = `user-${'x'.repeat(190)}`;
const README = fs.readFileSync(path.join(__dirname, '..', '..', 'README.md'), 'utf8');

describe('dashboard insights in Chromium', () => {
  let t: TestApp;
  let base: string;
  let browser: Awaited<ReturnType<typeof launchBrowser>>;
  let context: BrowserContext;
  let tenant: Awaited<ReturnType<typeof makeTenant>>;
  let emptyApp: { id: string; name: string };
  let apiKey: string;
  let today: string;

  const post = (key: string, events: object[]) =>
    fetch(`${base}/api/ingest`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ events }),
    });
  async function read<T>(route: string, params: Record<string, string>): Promise<T> {
    const query = new URLSearchParams({ appId: tenant.appId, range: '30d', ...params });
    const res = await fetch(`${base}${route}?${query}`, { headers: { Authorization: `Bearer ${apiKey}` } });
    expect({ route, status: res.status }).toEqual({ route, status: 200 });
    return (await res.json()) as T;
  }
  const openPage = () => open(context, base);

  /** Signs in and waits for the board of the seeded app to be drawn. */
  async function board(page: Page): Promise<void> {
    await signIn(page, apiKey);
    await page.locator('#board').waitFor();
    await page.getByLabel('App', { exact: true }).selectOption(tenant.appId);
    // Drawn for this app (the first app of the key may have been drawn before): today has users.
    await eventually(
      () => page.$eval('#chart-active', (el) => (el as HTMLElement).dataset.daily ?? ''),
      (daily) => {
        expect(daily.split(',')).toHaveLength(30);
        expect(Number(daily.split(',').at(-1))).toBeGreaterThan(0);
      },
    );
  }

  /** The breakdown table as [value, events] pairs. */
  const breakdownShown = async (page: Page) =>
    (await tableRows(page, 'breakdown-table')).map((cells) => [cells[0], cells[1]]);
  const breakdownExpected = (rows: BreakdownRow[]) =>
    rows.map((r) => [r.other ? 'Other (all other values)' : (r.value ?? '(none)'), shown(r.events)]);

  beforeAll(async () => {
    t = await startTestApp({
      AUTH_FAILURE_LIMIT: '1000',
      READ_RATE_REQUESTS: '1000',
      READ_MAX_CONCURRENT_PER_KEY: '100',
      READ_TIME_MS_PER_SECOND: '100000',
    });
    await t.app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(t.http.address() as AddressInfo).port}`;
    tenant = await makeTenant(t.app);
    emptyApp = await makeApp(t.app, 'Nothing yet');
    apiKey = (await makeApiKey(t.app, [tenant.appId, emptyApp.id])).key;
    today = new Date().toISOString().slice(0, 10);

    const now = Date.now();
    const events: object[] = [];
    // Ten days of visits from overlapping users, so that the rolling curves differ from the daily one.
    for (let day = 0; day < 10; day++) {
      for (let k = 0; k < 3; k++) {
        events.push({
          eventName: 'App.opened',
          eventTime: now - day * DAY_MS - k * 1000,
          anonymousUserId: `u${(day + k) % 8}`,
          sessionId: `s${day}-${k}`,
          platform: k === 2 ? 'Android' : 'iOS',
          appVersion: day < 3 ? '2.5.0' : '2.4.1',
        });
      }
    }
    // Today: twelve device models with 12, 11, … 1 events, so that ten are listed and the rest are "other".
    for (let m = 0; m < 12; m++) {
      for (let n = 0; n < 12 - m; n++) {
        events.push({
          eventName: 'Screen.viewed',
          anonymousUserId: `m${n}`,
          deviceModel: `Model-${String(m).padStart(2, '0')}`,
          platform: n % 3 === 0 ? 'Android' : 'iOS',
          payload: { plan: n % 2 ? 'pro' : 'free' },
        });
      }
    }
    // Five purchases of 59.99: their sum is 299.95, which divided by 5 is 59.989999999999995 in binary
    // floating point.
    for (let n = 1; n <= 5; n++) {
      events.push({
        eventName: 'Checkout.completed',
        anonymousUserId: `u${n}`,
        floatValue: 59.99,
        platform: 'iOS',
      });
    }
    expect((await post(tenant.liveKey, events)).status).toBe(200);
    // The newest event: a user id of 195 characters and a payload.
    expect(
      (
        await post(tenant.liveKey, [
          {
            eventName: 'Cart.viewed',
            anonymousUserId: LONG_USER,
            sessionId: `session-${'y'.repeat(150)}`,
            payload: { plan: 'pro', items: 3, coupon: 'WINTER-SALE' },
          },
        ])
      ).status,
    ).toBe(200);
    await t.app.get(DimensionsService).set(tenant.appId, ['plan'], TEST_ACTOR);
    await t.app.get(RollupsService).compute({ appId: tenant.appId });
    browser = await launchBrowser();
    context = browser.context;
  });

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('draws daily, weekly and monthly active users as /api/v1/active-users counts them', async () => {
    const { page, log } = await openPage();
    await board(page);
    for (const [window, line] of [
      [1, 'daily'],
      [7, 'weekly'],
      [28, 'monthly'],
    ] as const) {
      const rows = await read<ActiveUsersRow[]>('/api/v1/active-users', {
        interval: 'day',
        window: String(window),
      });
      expect(rows).toHaveLength(30);
      expect(rows.at(-1)?.end).toBe(today);
      const values = await chartValues(page, 'chart-active', line);
      expect(values).toEqual(Object.fromEntries(rows.map((r) => [r.end, r.users])));
    }
    // The rolling curves count each user once over their window: 8 users over the 10 days.
    const weekly = await chartValues(page, 'chart-active', 'weekly');
    const daily = await chartValues(page, 'chart-active', 'daily');
    expect(weekly[today]).toBeGreaterThan(daily[today]);
    expect((await chartValues(page, 'chart-active', 'monthly'))[today]).toBe(8 + 12 + 1);
    const legend = await page.$$eval('#chart-active .u-legend .u-series', (rows) =>
      rows.filter((r) => !(r as HTMLElement).hidden).map((r) => r.querySelector('.u-label')?.textContent),
    );
    expect(legend.slice(1)).toEqual(['Daily', 'Weekly (7 days)', 'Monthly (28 days)']);

    // Picking an event narrows the curves to the users who sent it.
    const requests: URLSearchParams[] = [];
    page.on('request', (r) => {
      const url = new URL(r.url());
      if (url.pathname === '/api/v1/active-users') requests.push(url.searchParams);
    });
    await page.getByLabel('Event', { exact: true }).selectOption('Checkout.completed');
    await eventually(
      () => chartValues(page, 'chart-active', 'daily'),
      (values) => expect(values[today]).toBe(5),
    );
    expect(requests.map((q) => [q.get('eventName'), q.get('window')])).toEqual([
      ['Checkout.completed', '1'],
      ['Checkout.completed', '7'],
      ['Checkout.completed', '28'],
    ]);
    expect(log.consoleErrors).toEqual([]);
    expect(log.cspViolations).toEqual([]);
    await page.close();
  });

  it('marks today as open on every chart instead of drawing it as a fall', async () => {
    const { page, log } = await openPage();
    await board(page);
    for (const id of ['chart-events', 'chart-users', 'chart-sessions', 'chart-active']) {
      await eventually(
        () => page.$eval(`#${id}`, (el) => (el as HTMLElement).dataset.open ?? ''),
        (openDays) => expect({ id, openDays }).toEqual({ id, openDays: today }),
      );
      const mark = page.locator(`#${id} figcaption .open`);
      expect(await mark.isVisible()).toBe(true);
      expect(await mark.textContent()).toBe('open');
      expect(await page.locator(`#${id} .plot`).getAttribute('aria-label')).toContain(`open: ${today}`);
    }
    // The open day's band is hatched on the canvas: its pixels differ from the final days' background.
    const hatched = await page.$eval('#chart-events canvas', (c) => {
      const canvas = c as HTMLCanvasElement;
      const ctx = canvas.getContext('2d')!;
      const inked = (x: number) => {
        const d = ctx.getImageData(x, 20, 1, Math.floor(canvas.height / 2)).data;
        return d.filter((_, i) => i % 4 === 3 && d[i] > 0).length;
      };
      // The least inked column of the final days (between grid lines) against the open day's band.
      const final: number[] = [];
      for (let x = Math.floor(canvas.width / 4); x < (3 * canvas.width) / 4; x++) final.push(inked(x));
      const right: number[] = [];
      for (let x = canvas.width - 60; x < canvas.width; x++) right.push(inked(x));
      return { open: Math.max(...right), final: Math.min(...final) };
    });
    expect(hatched.open).toBeGreaterThan(hatched.final + 10);
    expect(log.consoleErrors).toEqual([]);
    await page.close();
  });

  it('lists the top values of a dimension with an "other" line, and a click filters the page', async () => {
    const { page, log } = await openPage();
    const breakdownQueries: URLSearchParams[] = [];
    page.on('request', (r) => {
      const url = new URL(r.url());
      if (url.pathname === '/api/v1/breakdown') breakdownQueries.push(url.searchParams);
    });
    await board(page);
    const by = page.getByLabel('By', { exact: true });
    expect(
      await by.locator('option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value)),
    ).toEqual(['eventName', 'platform', 'appVersion', 'osVersion', 'deviceModel', 'locale', 'payload.plan']);
    const byEvent = await read<BreakdownRow[]>('/api/v1/breakdown', { by: 'eventName', limit: '10' });
    await eventually(
      () => breakdownShown(page),
      (rows) => expect(rows).toEqual(breakdownExpected(byEvent)),
    );

    // Twelve device models and the events without one: ten lines, then one "other" line for the rest.
    await by.selectOption('deviceModel');
    const models = await read<BreakdownRow[]>('/api/v1/breakdown', { by: 'deviceModel', limit: '10' });
    expect(models.at(-1)?.other).toBe(true);
    await eventually(
      () => breakdownShown(page),
      (rows) => expect(rows).toEqual(breakdownExpected(models)),
    );
    const shownRows = await tableRows(page, 'breakdown-table');
    expect(shownRows.at(-1)?.[0]).toBe('Other (all other values)');
    // Ten lines by value (the events without a model are one of them), then "other".
    expect(shownRows.slice(0, -1)).toHaveLength(10);
    expect(shownRows.map((r) => r[0])).toContain('(none)');

    // A declared payload key: listed like the others, but no read can filter by it, so no value is a button.
    await by.selectOption('payload.plan');
    const plans = await read<BreakdownRow[]>('/api/v1/breakdown', { by: 'payload.plan', limit: '10' });
    expect(plans.map((r) => r.value)).toEqual(['free', 'pro', null]);
    await eventually(
      () => breakdownShown(page),
      (rows) => expect(rows).toEqual(breakdownExpected(plans)),
    );
    expect(await page.locator('#breakdown-table button').count()).toBe(0);

    // A click on an event name picks that event: every panel reads it.
    await by.selectOption('eventName');
    await page.locator('#breakdown-table button', { hasText: 'Checkout.completed' }).click();
    expect(await page.getByLabel('Event', { exact: true }).inputValue()).toBe('Checkout.completed');
    await eventually(
      () => tableRows(page, 'rows'),
      (rows) => expect(rows.every((r) => r[1] === 'Checkout.completed')).toBe(true),
    );
    const chip = page.locator('#filters .chip');
    expect(await chip.allTextContents()).toEqual(['Event name = Checkout.completed ✕']);

    // A click on a platform adds an equality filter, which the breakdown of every other dimension takes.
    await by.selectOption('platform');
    await eventually(
      () => breakdownShown(page),
      (rows) => expect(rows).toEqual([['iOS', '5']]),
    );
    await page.locator('#breakdown-table button', { hasText: 'iOS' }).click();
    await eventually(
      () => chip.allTextContents(),
      (chips) => expect(chips).toEqual(['Event name = Checkout.completed ✕', 'Platform = iOS ✕']),
    );
    expect(await page.locator('#filters').textContent()).toContain('Platform narrows the breakdown only');
    await by.selectOption('appVersion');
    await eventually(
      async () => breakdownQueries.at(-1),
      (q) => {
        expect(q?.get('by')).toBe('appVersion');
        expect(q?.get('eventName')).toBe('Checkout.completed');
        expect(q?.get('platform')).toBe('iOS');
      },
    );

    // Removing the filters gives back the whole page.
    await page.getByRole('button', { name: 'Remove the filter Platform = iOS' }).click();
    await page.getByRole('button', { name: 'Remove the filter Event name = Checkout.completed' }).click();
    expect(await page.locator('#filters').isHidden()).toBe(true);
    expect(await page.getByLabel('Event', { exact: true }).inputValue()).toBe('');
    const versions = await read<BreakdownRow[]>('/api/v1/breakdown', { by: 'appVersion', limit: '10' });
    await eventually(
      () => breakdownShown(page),
      (rows) => expect(rows).toEqual(breakdownExpected(versions)),
    );

    // Android devices only: the device models' breakdown as the API answers it with that filter.
    await by.selectOption('platform');
    await page.locator('#breakdown-table button', { hasText: 'Android' }).click();
    await eventually(
      () => chip.allTextContents(),
      (chips) => expect(chips).toEqual(['Platform = Android ✕']),
    );
    await by.selectOption('deviceModel');
    const android = await read<BreakdownRow[]>('/api/v1/breakdown', {
      by: 'deviceModel',
      limit: '10',
      platform: 'Android',
    });
    await eventually(
      () => breakdownShown(page),
      (rows) => expect(rows).toEqual(breakdownExpected(android)),
    );
    expect(breakdownQueries.at(-1)?.get('platform')).toBe('Android');

    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 1100, height: 1400 });
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.waitForTimeout(300);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'dashboard-insights.png') });
    expect(log.consoleErrors).toEqual([]);
    expect(log.cspViolations).toEqual([]);
    await page.close();
  });

  it('cuts long ids in the live feed to their column and unfolds payloads', async () => {
    const { page, log } = await openPage();
    await board(page);
    const row = page.locator('#live tbody tr').first();
    await eventually(
      () => row.locator('td').nth(1).textContent(),
      (name) => expect(name).toBe('Cart.viewed'),
    );
    const user = row.locator('td').nth(2);
    expect(await user.getAttribute('title')).toBe(LONG_USER);
    const fit = await page.evaluate(() => {
      const scroll = document.querySelector('#live')!.closest('.scroll') as HTMLElement;
      const cell = document.querySelector('#live tbody tr td:nth-child(3)') as HTMLElement;
      const last = document.querySelector('#live tbody tr td:last-child') as HTMLElement;
      return {
        overflow: scroll.scrollWidth - scroll.clientWidth,
        cut: cell.scrollWidth > cell.clientWidth,
        lastRight: last.getBoundingClientRect().right,
        viewport: window.innerWidth,
      };
    });
    expect(fit.overflow).toBeLessThanOrEqual(0);
    expect(fit.cut).toBe(true);
    expect(fit.lastRight).toBeLessThanOrEqual(fit.viewport);

    const payload = row.locator('details.payload');
    expect(await payload.locator('summary').textContent()).toBe('3 keys');
    await payload.locator('summary').click();
    const pre = payload.locator('pre');
    expect(await pre.isVisible()).toBe(true);
    expect(JSON.parse((await pre.textContent()) ?? '')).toEqual({
      plan: 'pro',
      items: 3,
      coupon: 'WINTER-SALE',
    });
    // Still unfolded after the next poll.
    const before = await page.locator('#live-status').textContent();
    await eventually(
      () => page.locator('#live-status').textContent(),
      (status) => expect(status).not.toBe(before),
      12_000,
    );
    expect(await page.locator('#live tbody tr').first().locator('details.payload pre').isVisible()).toBe(
      true,
    );
    expect(log.consoleErrors).toEqual([]);
    await page.close();
  });

  it('the empty state of test data names the test key, and of live data the live key', async () => {
    const { page, log } = await openPage();
    await signIn(page, apiKey);
    await page.getByLabel('App', { exact: true }).selectOption(emptyApp.id);
    await page.locator('#empty').waitFor();
    expect(await page.locator('#empty-hint').textContent()).toContain('live ingest key (tly_live_…)');
    expect(await page.locator('#curl').textContent()).toContain('Bearer tly_live_…');
    await page.getByLabel('Test data', { exact: true }).check();
    await eventually(
      () => page.locator('#empty').textContent(),
      (text) => {
        expect(text).toContain('No test events in this range yet');
        expect(text).toContain("Test data is what the app's test key (tly_test_…) sends");
        expect(text).toContain('Bearer tly_test_…');
        expect(text).not.toContain('tly_live_');
      },
    );
    expect(log.consoleErrors).toEqual([]);
    await page.close();
  });

  it('shows averages rounded, never with binary floating-point noise', async () => {
    const rollups = await read<
      { eventName: string | null; date: string; floatValue: { avg: number } | null }[]
    >('/api/v1/rollups', { eventName: 'Checkout.completed' });
    const checkout = rollups.find((r) => r.eventName === 'Checkout.completed' && r.date === today);
    // The API answers the exact double; the page shows cents.
    expect(checkout?.floatValue?.avg).toBe(299.95 / 5);
    expect(String(checkout?.floatValue?.avg)).toBe('59.989999999999995');

    const { page, log } = await openPage();
    await board(page);
    await page.getByLabel('Event', { exact: true }).selectOption('Checkout.completed');
    await eventually(
      () => tableRows(page, 'rows'),
      (rows) =>
        expect(rows.find((r) => r[0] === today)?.slice(6, 10)).toEqual(['299.95', '59.99', '59.99', '59.99']),
    );
    await page.getByLabel('By', { exact: true }).selectOption('eventName');
    await eventually(
      () => tableRows(page, 'breakdown-table'),
      (rows) => expect(rows.find((r) => r[0] === 'Checkout.completed')?.[5]).toBe('59.99'),
    );
    // The CSV has the numbers a person would type, not the noise.
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download CSV' }).click(),
    ]);
    const csv = fs.readFileSync((await download.path()) as string, 'utf8');
    expect(csv).toContain(`${today},Checkout.completed,false,5,5,0,5,299.95,59.99,59.99,59.99,false`);
    // No number on the page has more than two decimals.
    const text = await page.locator('#board').innerText();
    expect(text).not.toMatch(/\d\.\d{3,}/);
    expect(log.consoleErrors).toEqual([]);
    await page.close();
  });

  it("the sign-in hint and the missing-scope message name the README's commands", async () => {
    const seed = /^(node_modules\/\.bin\/tally seed --json)\b/m.exec(README.split('## Dashboard')[1] ?? '');
    expect(seed).not.toBeNull();
    expect(README).toContain('tally keys create-api --app <appId>… --scope <scope>…');
    const { page, log } = await openPage();
    const hint = await page.locator('#sign-in-form').textContent();
    expect(hint?.replace(/\s+/g, ' ')).toContain(`the apiKey that ${seed![1]} prints`);
    expect(hint).not.toContain('npm run cli');

    const eventsOnly = await makeApiKey(t.app, [tenant.appId], ['events:read']);
    await signIn(page, eventsOnly.key);
    await eventually(
      () => page.locator('#message').textContent(),
      (text) =>
        expect(text).toContain('node_modules/.bin/tally keys create-api --app <appId> --scope rollups:read'),
    );
    expect(log.consoleErrors.filter((e) => !/status of 403/.test(e))).toEqual([]);
    await page.close();
  });
});
