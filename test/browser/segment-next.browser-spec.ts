import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import type { BrowserContext } from 'playwright-core';
import { makeTenant } from '../factories';
import { startTestApp, TestApp } from '../support/test-app';

// Driven by test/browser/run.mjs, which finds the browser and passes its path.
const BROWSER = process.env.TALLY_CHROMIUM ?? '';

// The page's script: @segment/analytics-next, bundled into one file (its lazy chunks included),
// with its settings inline, so that nothing is fetched from Segment's CDN.
const ENTRY = `
import { AnalyticsBrowser } from '@segment/analytics-next';
window.sendToTally = async (writeKey, apiHost) => {
  const [analytics] = await AnalyticsBrowser.load({
    writeKey,
    cdnSettings: { integrations: { 'Segment.io': { apiKey: writeKey, apiHost, protocol: 'http' } } },
  });
  await analytics.page('Pricing', { path: '/pricing' });
  await analytics.track('Signup.clicked', { plan: 'pro', value: 9 });
  return true;
};
`;

interface EventRow {
  eventName: string;
  anonymousUserId: string | null;
  payload: Record<string, unknown> | null;
  floatValue: number | null;
}

describe('@segment/analytics-next in Chromium', () => {
  let t: TestApp;
  let page: Server;
  let context: BrowserContext;
  let profile: string;

  beforeAll(async () => {
    t = await startTestApp();
    await new Promise<void>((resolve) => t.http.listen(0, '127.0.0.1', resolve));
    const bundled = await build({
      stdin: { contents: ENTRY, resolveDir: process.cwd(), loader: 'js' },
      bundle: true,
      format: 'iife',
      platform: 'browser',
      write: false,
      logLevel: 'silent',
    });
    const script = bundled.outputFiles[0].text;
    // The page comes from another origin than Tally, as a website's would.
    page = createServer((req, res) => {
      if (req.url === '/app.js') {
        res.writeHead(200, { 'content-type': 'text/javascript' }).end(script);
      } else {
        res
          .writeHead(200, { 'content-type': 'text/html' })
          .end('<!doctype html><title>Shop</title><script src="/app.js"></script><h1>Shop</h1>');
      }
    });
    await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
    profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tally-chromium-segment-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: BROWSER,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
      ],
    });
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    page?.close();
    await t?.close();
    if (profile) fs.rmSync(profile, { recursive: true, force: true });
  });

  it('a page view and a track call from a real page reach Tally', async () => {
    const tenant = await makeTenant(t.app);
    const tally = `127.0.0.1:${(t.http.address() as AddressInfo).port}`;
    const tab = await context.newPage();
    const outside: string[] = [];
    // Nothing may leave for Segment's servers: only the page's origin and Tally.
    tab.on('request', (r) => {
      const host = new URL(r.url()).host;
      if (host !== tally && host !== `127.0.0.1:${(page.address() as AddressInfo).port}`)
        outside.push(r.url());
    });
    await tab.goto(`http://127.0.0.1:${(page.address() as AddressInfo).port}/`);
    const sent = await tab.evaluate(
      ([key, host]) =>
        (window as unknown as { sendToTally: (k: string, h: string) => Promise<boolean> }).sendToTally(
          key,
          host,
        ),
      [tenant.liveKey, `${tally}/api/segment/v1`],
    );
    expect(sent).toBe(true);

    const deadline = Date.now() + 15_000;
    let rows: EventRow[] = [];
    while (Date.now() < deadline) {
      const res = await fetch(`http://${tally}/api/v1/events?appId=${tenant.appId}`, {
        headers: { Authorization: `Bearer ${tenant.apiKey}` },
      });
      rows = (await res.json()) as EventRow[];
      if (rows.length >= 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const byName = Object.fromEntries(rows.map((r) => [r.eventName, r]));
    expect(Object.keys(byName).sort()).toEqual(['Page.viewed', 'Signup.clicked']);
    expect(byName['Page.viewed'].payload).toMatchObject({ name: 'Pricing', path: '/pricing' });
    expect(byName['Signup.clicked']).toMatchObject({ floatValue: 9, payload: { plan: 'pro', value: 9 } });
    // The browser's anonymous id, the same for both events.
    expect(byName['Page.viewed'].anonymousUserId).toEqual(expect.any(String));
    expect(byName['Signup.clicked'].anonymousUserId).toBe(byName['Page.viewed'].anonymousUserId);
    expect(outside).toEqual([]);
    await tab.close();
  }, 60_000);
});
