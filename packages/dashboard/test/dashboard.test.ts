/**
 * The dashboard's server against a real 2-node Local pool: the token, the JSON endpoints, the event
 * stream's replay, the two write actions, and no secret in any payload.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { scanForSecrets } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EventsPayload, type MetricsPayload, type PoolPayload, serveDashboard } from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/dashboard_tasks.py", import.meta.url));
const train = sky.python<[number, number], number>("dashboard_tasks:train");
const leak = sky.python<[], null>("dashboard_tasks:leak");
const planted = "dashboard-planted-credential-8f3a2c71";
const scratch = mkdtempSync(join(tmpdir(), "skyward-dashboard-test-"));

let pool: sky.Pool;
let dashboard: Awaited<ReturnType<typeof serveDashboard>>;

beforeAll(async () => {
  // Local workers inherit the environment; the dashboard masks credential-looking variables.
  process.env.DASHBOARD_TEST_API_KEY = planted;
  pool = await sky.compute({
    nodes: 2,
    image: {
      includes: [tasks],
      metrics: [sky.metrics.CPU({ interval: 0.25 }), sky.metrics.MemoryUsed({ interval: 0.25 })],
    },
    options: { console: false },
  });
  dashboard = await serveDashboard(pool);
});

afterAll(async () => {
  await dashboard?.close();
  await pool?.close();
  delete process.env.DASHBOARD_TEST_API_KEY;
  rmSync(scratch, { recursive: true, force: true });
});

function api(path: string, init?: RequestInit): Promise<Response> {
  const url = new URL(dashboard.url);
  return fetch(
    new URL(`${path}${path.includes("?") ? "&" : "?"}token=${url.searchParams.get("token")}`, url),
    init,
  );
}

async function json<T>(path: string): Promise<T> {
  const response = await api(path);
  expect(response.status, path).toBe(200);
  return (await response.json()) as T;
}

/** The stream's batch ids until `count` arrived, opened with `lastEventId` as the browser resends it. */
async function streamIds(count: number, lastEventId?: number): Promise<number[]> {
  const controller = new AbortController();
  const response = await api("api/stream", {
    signal: controller.signal,
    headers: lastEventId === undefined ? {} : { "last-event-id": String(lastEventId) },
  });
  const reader = (response.body as ReadableStream<Uint8Array>)
    .pipeThrough(new TextDecoderStream())
    .getReader();
  let text = "";
  const ids = () => [...text.matchAll(/^id: (\d+)$/gm)].map((match) => Number(match[1]));
  while (ids().length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  controller.abort();
  return ids().slice(0, count);
}

describe("the dashboard's server", () => {
  it("answers 401 without the token, on the page and every endpoint", async () => {
    const url = new URL(dashboard.url);
    expect(url.hostname).toBe("127.0.0.1");
    for (const path of ["/", "/api/pool", "/api/metrics", "/api/events", "/api/stream"]) {
      expect((await fetch(new URL(path, url))).status, path).toBe(401);
      expect((await fetch(new URL(`${path}?token=wrong`, url))).status, path).toBe(401);
    }
    expect((await fetch(new URL("/api/close", url), { method: "POST" })).status).toBe(401);
    expect(pool.state).toBe("ready");
    expect((await api("")).headers.get("content-type")).toContain("text/html");
  });

  it("lists the nodes, their metrics over time and the log line a task printed", async () => {
    await pool.broadcast(train(1, 0.1));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const state = await json<PoolPayload>("api/pool");
    expect(state.nodes.map((node) => node.index)).toEqual([0, 1]);
    expect(state.nodes.every((node) => node.phase === "ready" && node.hourlyPrice === 0)).toBe(true);
    expect(state.tasks.completed).toBe(2);
    const metrics = await json<MetricsPayload>("api/metrics");
    for (const node of [0, 1]) {
      const cpu = metrics.series.find((series) => series.node === node && series.name === "cpu");
      expect(cpu?.points.length, `node ${node} cpu`).toBeGreaterThan(2);
    }
    for (const node of [0, 1]) {
      const loss = metrics.series.find((series) => series.node === node && series.name === "loss");
      expect(loss?.worker, `node ${node} loss`).toBe(0);
      expect(loss?.points.map((point) => point.step)).toEqual([0]);
    }
    const newest = Math.max(...metrics.series.flatMap((series) => series.points.map((point) => point.t)));
    const later = await json<MetricsPayload>(`api/metrics?since=${newest}`);
    expect(later.series.flatMap((series) => series.points).every((point) => point.t > newest)).toBe(true);
    // The history holds what the batches carried so far (one goes out every second).
    const lines = async () =>
      (await json<EventsPayload>("api/events")).logs
        .filter((entry) => entry.type === "log")
        .map((entry) => entry.text);
    await expect.poll(lines, { timeout: 10_000 }).toContain("training started on node 0");
    expect(await lines()).toContain("training started on node 1");
  });

  it("replays the batches after Last-Event-ID", async () => {
    const [first, second] = await streamIds(2);
    expect(second).toBe((first as number) + 1);
    const replayed = await streamIds(2, (first as number) - 1);
    expect(replayed).toEqual([first, second]);
  });

  it("cancels a running task, and only by POST", async () => {
    const handle = pool.submit(train(600, 0.1));
    const outcome = handle.result.then(
      () => "finished",
      (error: unknown) => (sky.CancelledError.isInstance(error) ? "cancelled" : String(error)),
    );
    let running: PoolPayload["running"] = [];
    while (running.length === 0) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      running = (await json<PoolPayload>("api/pool")).running;
    }
    expect(running[0]?.id).toBe(handle.id);
    expect((await api(`api/tasks/${handle.id}/cancel`)).status).toBe(405);
    const cancelled = await api(`api/tasks/${handle.id}/cancel`, { method: "POST" });
    expect(await cancelled.json()).toEqual({ cancelled: true });
    expect(await outcome).toBe("cancelled");
    expect((await api(`api/tasks/${handle.id}/cancel`, { method: "POST" })).status).toBe(404);
  });

  it("puts no secret in any payload", async () => {
    await pool.run(leak());
    await new Promise((resolve) => setTimeout(resolve, 1200));
    const printed = async () =>
      (await json<EventsPayload>("api/events")).logs.some((entry) => entry.text.startsWith("the key is "));
    await expect.poll(printed, { timeout: 10_000 }).toBe(true);
    const [id] = await streamIds(1, 0);
    expect(id).toBeGreaterThan(0);
    for (const path of ["api/pool", "api/metrics", "api/events"]) {
      writeFileSync(join(scratch, `${path.replace("/", "-")}.json`), await (await api(path)).text());
    }
    const report = await scanForSecrets([scratch], {
      secrets: [{ name: "DASHBOARD_TEST_API_KEY", value: planted }],
    });
    expect(report.files).toBeGreaterThanOrEqual(3);
    expect(report.findings).toEqual([]);
  });

  it("refuses a port it cannot listen on, or that is not one, naming the field", async () => {
    const taken = Number(new URL(dashboard.url).port);
    for (const [port, message] of [
      [taken, `cannot listen on 127.0.0.1:${taken}`],
      [-1, "expected a port number 0–65535"],
    ] as const) {
      const caught = await serveDashboard(pool, { port }).catch((error: unknown) => error);
      expect(sky.ConfigurationError.isInstance(caught)).toBe(true);
      expect((caught as sky.ConfigurationError).issues[0]).toMatchObject({ path: "dashboard.port" });
      expect((caught as sky.ConfigurationError).issues[0]?.message).toContain(message);
    }
  });

  it("closes the pool on POST /api/close, and stops serving", async () => {
    const response = await api("api/close", { method: "POST" });
    expect(response.status).toBe(202);
    while (pool.state !== "destroyed") await new Promise((resolve) => setTimeout(resolve, 100));
    await expect(fetch(dashboard.url)).rejects.toThrow("fetch failed");
  });
});
