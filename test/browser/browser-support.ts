import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import type { BrowserContext, Page } from 'playwright-core';

// What the dashboard's browser tests share: the browser, a page that reports its errors, sign-in,
// and reading what the page shows.

/** Driven by test/browser/run.mjs, which finds the browser and passes its path. */
export const BROWSER = process.env.TALLY_CHROMIUM ?? '';
export const SCREENSHOTS = path.join(__dirname, 'screenshots');
export const DAY_MS = 86_400_000;

/** Retries `read` until `check` passes or the time is up, then lets the last failure speak. */
export async function eventually<T>(
  read: () => Promise<T>,
  check: (value: T) => void,
  timeoutMs = 8_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    try {
      check(value);
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** What a page reported: console errors, uncaught exceptions and CSP violations. */
export interface PageLog {
  consoleErrors: string[];
  cspViolations: string[];
}

/** A headless Chromium with a fresh profile; every CSP violation a page meets is reported back. */
export async function launchBrowser(): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  if (!BROWSER) throw new Error('TALLY_CHROMIUM is not set: run these tests through test/browser/run.mjs');
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tally-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: BROWSER,
    headless: true,
    acceptDownloads: true,
    viewport: { width: 1280, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  await context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      const report = (window as unknown as { __reportCsp?: (s: string) => void }).__reportCsp;
      report?.(
        `${e.violatedDirective} blocked ${e.blockedURI || 'inline'} (${e.sourceFile}:${e.lineNumber})`,
      );
    });
  });
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  return {
    context,
    close: async () => {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Opens the dashboard in a new page that records its console errors and CSP violations. */
export async function openPage(context: BrowserContext, base: string): Promise<{ page: Page; log: PageLog }> {
  const page = await context.newPage();
  const log: PageLog = { consoleErrors: [], cspViolations: [] };
  page.on('console', (msg) => {
    if (msg.type() === 'error') log.consoleErrors.push(`${msg.text()} ${msg.location().url}`);
  });
  page.on('pageerror', (err) => log.consoleErrors.push(`uncaught: ${err.message}`));
  await page.exposeFunction('__reportCsp', (text: string) => log.cspViolations.push(text));
  const res = await page.goto(`${base}/dashboard`);
  expect(res?.status()).toBe(200);
  return { page, log };
}

export async function signIn(page: Page, key: string): Promise<void> {
  await page.getByLabel('API key', { exact: true }).fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** The text of each cell of each body row of the table with this id. */
export const tableRows = (page: Page, id: string) =>
  page.$$eval(`#${id} tbody tr`, (trs) =>
    trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')),
  );

/** A chart's numbers by day, from the figure's data-days and the data-* attribute of one line. */
export async function chartValues(page: Page, id: string, line = 'values'): Promise<Record<string, number>> {
  const { days, values } = await page.$eval(
    `#${id}`,
    (el, key) => ({
      days: (el as HTMLElement).dataset.days ?? '',
      values: (el as HTMLElement).dataset[key] ?? '',
    }),
    line,
  );
  const v = values.split(',').map(Number);
  return Object.fromEntries(days.split(',').map((d, i) => [d, v[i]]));
}

/** A number as the dashboard shows it: whole numbers grouped, others with two decimals. */
export function shown(n: number | null | undefined): string {
  if (n === null || n === undefined) return '–';
  return Number.isInteger(n)
    ? n.toLocaleString('en-US')
    : n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
}
