import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';

/** Debian's chromium: playwright-core drives it and downloads no browser of its own (.ci/run installs it). */
const CHROMIUM = '/usr/bin/chromium';

/** Where screenshots of a failed browser test go (git-ignored). */
export const ARTIFACTS = 'test/artifacts';

/** A headless Chromium page, with every request it made and every complaint its console printed. */
export interface BrowserPage {
  page: Page;
  context: BrowserContext;
  /** Every URL the page asked for, in order (documents, scripts, styles, API calls, downloads). */
  requests: string[];
  /** Console errors and warnings, Content-Security-Policy violations among them, and uncaught page errors. */
  complaints: string[];
  /** Saves a full-page screenshot as `test/artifacts/<name>.png`. */
  screenshot(name: string): Promise<string>;
  close(): Promise<void>;
}

export async function openBrowser(viewport = { width: 1280, height: 800 }): Promise<BrowserPage> {
  // A profile of its own each time: no state, cache or storage carried from another run.
  const profile = mkdtempSync(join(tmpdir(), 'strata-chromium-'));
  let context: BrowserContext;
  try {
    // playwright passes the profile as --user-data-dir; the rest are the flags docs/console.md names.
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
      viewport,
      acceptDownloads: true,
    });
  } catch (err) {
    rmSync(profile, { recursive: true, force: true });
    throw err;
  }
  const page = context.pages()[0] ?? (await context.newPage());
  // A step that cannot happen fails in seconds, naming what it waited for, before the test's own time is out.
  page.setDefaultTimeout(10_000);
  const requests: string[] = [];
  const complaints: string[] = [];
  context.on('request', (request) => requests.push(request.url()));
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') complaints.push(message.text());
  });
  page.on('pageerror', (error) => complaints.push(`page error: ${error.message}`));
  return {
    page,
    context,
    requests,
    complaints,
    async screenshot(name) {
      mkdirSync(ARTIFACTS, { recursive: true });
      const path = join(ARTIFACTS, `${name}.png`);
      await page.screenshot({ path, fullPage: true });
      return path;
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
    },
  };
}
