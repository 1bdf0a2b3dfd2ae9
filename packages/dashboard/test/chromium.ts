/**
 * Debian's Chromium as the dashboard's tests and bench drive it (playwright-core, no bundled browser):
 * headless, in a fresh profile, with nothing reaching out to the network on its own.
 */
import { existsSync } from "node:fs";
import { type BrowserContext, chromium } from "playwright-core";

/** Where Debian's `chromium` package puts the browser. */
export const CHROMIUM = "/usr/bin/chromium";

/** Why Chromium cannot run here, or undefined when it can. */
export function chromiumMissing(): string | undefined {
  return existsSync(CHROMIUM)
    ? undefined
    : `${CHROMIUM} is not installed (Debian's chromium package; scripts/test.sh installs it)`;
}

/** Starts headless Chromium with its profile in `profile` (a new, empty directory). */
export function launchChromium(
  profile: string,
  viewport: { width: number; height: number } = { width: 1440, height: 1000 },
): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport,
  });
}
