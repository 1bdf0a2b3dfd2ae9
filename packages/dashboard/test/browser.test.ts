/**
 * The dashboard in a real browser: Debian's headless Chromium, driven by playwright-core, opens the
 * link of a 2-node Local pool made with `options.dashboard` whose tasks print a line and report their
 * loss, and reads from the page: both nodes, a chart whose series grows, the task counter moving, the
 * printed line, its sessions (another pool listed while detached); without the token, 401. It renders the page at two sizes, saved to
 * `SKYWARD_DASHBOARD_SCREENSHOTS=DIR` when that is set (how docs/dashboard.md's pictures are made).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { requirePrerequisite } from "@skyward/testing";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumMissing, launchChromium } from "./chromium.js";

const skipReason = requirePrerequisite(chromiumMissing(), "Chromium for the dashboard's browser tests");

const tasks = fileURLToPath(new URL("./fixtures/dashboard_tasks.py", import.meta.url));
const train = sky.python<[number, number], number>("dashboard_tasks:train");
const profile = mkdtempSync(join(tmpdir(), "skyward-dashboard-chromium-"));

let pool: sky.Pool;
let link: string;
let browser: BrowserContext;
let page: Page;
const pageErrors: string[] = [];

beforeAll(async () => {
  if (skipReason !== undefined) return;
  const announced: string[] = [];
  pool = await sky.compute(
    {
      nodes: 2,
      image: {
        includes: [tasks],
        metrics: [sky.metrics.CPU({ interval: 0.25 }), sky.metrics.Memory({ interval: 0.5 })],
      },
      options: { console: false, dashboard: true },
    },
    { onEvent: (event) => void (event.type === "dashboard.ready" && announced.push(event.url)) },
  );
  link = announced[0] as string;
  browser = await launchChromium(profile);
  page = await browser.newPage();
  page.on("pageerror", (error) => pageErrors.push(error.message));
});

afterAll(async () => {
  await browser?.close();
  await pool?.close();
  rmSync(profile, { recursive: true, force: true });
});

/** How long a check waits for the page: a batch goes out every second, and a loaded machine delays some. */
const batchWait = { timeout: 10_000 };

async function number(selector: string): Promise<number> {
  return Number(await page.locator(selector).getAttribute("data-points"));
}

async function text(selector: string): Promise<string> {
  return (await page.locator(selector).textContent()) ?? "";
}

describe.skipIf(skipReason !== undefined)("the dashboard in Chromium", () => {
  it("answers 401 without the token", async () => {
    const bare = new URL(link);
    bare.search = "";
    const response = await page.goto(bare.href);
    expect(response?.status()).toBe(401);
  });

  it("lists both nodes, grows its charts, counts tasks and shows the task's log line", async () => {
    const response = await page.goto(link);
    expect(response?.status()).toBe(200);
    await page.locator("#connection", { hasText: "live" }).waitFor();
    await expect.poll(() => page.locator("#nodes tbody tr").count(), batchWait).toBe(2);
    const rows = await page.locator("#nodes tbody tr").allTextContents();
    expect(rows[0]).toMatch(/^0ready127\.0\.0\.1/);
    expect(rows[1]).toMatch(/^1ready127\.0\.0\.1/);
    expect(await text("#pool-id")).toBe(pool.id);

    const work = pool.broadcast(train(30, 0.1));
    await page.locator("#chart-metric-loss").waitFor();
    const lossPoints = await number("#chart-metric-loss");
    const cpuPoints = await number("#chart-metric-cpu");
    await expect.poll(() => number("#chart-metric-loss"), { timeout: 20_000 }).toBeGreaterThan(lossPoints);
    await expect.poll(() => number("#chart-metric-cpu"), { timeout: 20_000 }).toBeGreaterThan(cpuPoints);
    expect(await page.locator("#chart-metric-loss").getAttribute("data-lines")).toBe("2");
    expect(await page.locator("#chart-metric-loss canvas").count()).toBeGreaterThan(0);
    await expect.poll(() => text('#task-counters [data-field="running"]'), batchWait).toBe("2");

    await work;
    await expect.poll(() => text('#task-counters [data-field="completed"]'), batchWait).toBe("2");
    await expect.poll(() => text("#log"), batchWait).toContain("training started on node 0");
    expect(await text("#log")).toContain("training started on node 1");
    expect(await text("#log")).not.toContain(new URL(link).searchParams.get("token") as string);
    await page.selectOption("#log-node", "1");
    expect(await text("#log")).not.toContain("training started on node 0");
    expect(await text("#log")).toContain("training started on node 1");
    await page.selectOption("#log-node", "");
    expect(pageErrors).toEqual([]);
  });

  it("shows its sessions: opened here, and another pool while it is detached", async () => {
    await expect.poll(() => text("#session-origin"), batchWait).toContain("opened by this client");
    const other = await sky.compute({ nodes: 1, options: { console: false } });
    const otherId = await other.detach();
    const row = page.locator(`#detached-pools tbody tr[data-pool="${otherId}"]`);
    try {
      // Read again from the Skyward home for a stream batch (every two seconds at most).
      await expect.poll(() => row.count(), { timeout: 20_000 }).toBe(1);
      expect(await row.textContent()).toMatch(new RegExp(`^${otherId}local1 \\(1\\)0`));
      expect(await text("#session-origin")).toMatch(/\d+ other detached pools?/);
      expect(await page.locator(`#detached-pools tbody tr[data-pool="${pool.id}"]`).count()).toBe(0);
    } finally {
      await (await sky.attach(otherId, { options: { console: false } })).close();
    }
    await expect.poll(() => row.count(), { timeout: 20_000 }).toBe(0);
    expect(pageErrors).toEqual([]);
  });

  it("keeps what it showed across a reload", async () => {
    const before = await number("#chart-metric-loss");
    await page.reload();
    await page.locator("#connection", { hasText: "live" }).waitFor();
    await expect.poll(() => number("#chart-metric-loss"), batchWait).toBeGreaterThanOrEqual(before);
    expect(await text('#task-counters [data-field="completed"]')).toBe("2");
    expect(await text("#log")).toContain("training started on node 1");
  });

  it("renders at two sizes (saved to SKYWARD_DASHBOARD_SCREENSHOTS when it is set)", async () => {
    const directory = process.env.SKYWARD_DASHBOARD_SCREENSHOTS ?? profile;
    await pool.broadcast(train(20, 0.1));
    for (const [name, width] of [
      ["dashboard-wide.png", 1440],
      ["dashboard-narrow.png", 420],
    ] as const) {
      await page.setViewportSize({ width, height: 900 });
      // The charts follow the new width at their next redraw (one a second).
      await expect
        .poll(() =>
          page.locator("#chart-metric-cpu canvas").evaluate((canvas) => canvas.getBoundingClientRect().width),
        )
        .toBeLessThanOrEqual(width);
      const picture = await page.screenshot({ path: join(directory, name), fullPage: width > 1000 });
      // A PNG of the page's width: its IHDR chunk holds the width at bytes 16–19.
      expect(picture.subarray(1, 4).toString()).toBe("PNG");
      expect(picture.readUInt32BE(16)).toBe(width);
    }
    await page.setViewportSize({ width: 1440, height: 1000 });
  });
});
