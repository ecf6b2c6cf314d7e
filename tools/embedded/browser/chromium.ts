import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { workspaceRoot } from '@stablepay/testing';

/**
 * Browser tests of the hosted pages drive Debian's `chromium` with playwright-core (no browser download: the
 * machines reach only the npm registry and Debian's packages; .ci/run installs the package when it is missing).
 */

/** Where screenshots and traces go (gitignored); docs/screenshots/ keeps one chosen image per page. */
export const ARTIFACTS = join(workspaceRoot, 'test-artifacts');

export function findChromium(): string | undefined {
  const candidates = [process.env['CHROMIUM_PATH'], '/usr/bin/chromium', '/usr/bin/chromium-browser'];
  for (const candidate of candidates) if (candidate && existsSync(candidate)) return candidate;
  try {
    return (
      execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], {
        encoding: 'utf8',
      }).trim() || undefined
    );
  } catch {
    return undefined;
  }
}

/**
 * `describe` when Chromium is installed, otherwise `describe.skip` after printing why (a skipped browser suite must
 * never pass silently).
 */
export function describeWithChromium(suite: string): jest.Describe {
  if (findChromium()) return describe;
  console.log(`${suite}: skipped: no Chromium installed (apt-get install chromium, or set CHROMIUM_PATH)`);
  return describe.skip;
}

export async function launchChromium(): Promise<Browser> {
  const executablePath = findChromium();
  if (!executablePath)
    throw new Error('no Chromium installed (apt-get install chromium, or set CHROMIUM_PATH)');
  mkdirSync(ARTIFACTS, { recursive: true });
  return chromium.launch({
    executablePath,
    headless: true,
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
}

/**
 * Collects page errors and console errors: a CSP violation (a blocked inline script or style) or a script error
 * shows here, so a test asserts the list is empty.
 */
export function collectPageErrors(page: Page, ignore: (text: string) => boolean = () => false): string[] {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error' && !ignore(m.text())) errors.push(m.text());
  });
  return errors;
}

export async function screenshot(page: Page, name: string): Promise<string> {
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}
