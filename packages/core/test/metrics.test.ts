/**
 * Metrics end to end on the Local provider: the image's collectors reach each worker in its `cluster`
 * message, and their samples come back as `metric` events. GPU collectors run against the fake
 * `nvidia-smi` of `test/fixtures/bin`, which answers only the real query form and records its calls.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const fakeBin = fileURLToPath(new URL("./fixtures/bin", import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), "skyward-metrics-test-"));
const record = join(scratch, "nvidia-calls.jsonl");
const original = { PATH: process.env.PATH, FAKE_NVIDIA_RECORD: process.env.FAKE_NVIDIA_RECORD };

beforeAll(() => {
  // Local workers inherit this process's environment: they find the fake nvidia-smi first.
  process.env.PATH = `${fakeBin}${delimiter}${process.env.PATH}`;
  process.env.FAKE_NVIDIA_RECORD = record;
});

afterAll(() => {
  process.env.PATH = original.PATH;
  if (original.FAKE_NVIDIA_RECORD === undefined) delete process.env.FAKE_NVIDIA_RECORD;
  else process.env.FAKE_NVIDIA_RECORD = original.FAKE_NVIDIA_RECORD;
  rmSync(scratch, { recursive: true, force: true });
});

async function collect(pool: sky.Pool, milliseconds: number): Promise<sky.MetricEvent[]> {
  const seen: sky.MetricEvent[] = [];
  const off = pool.on("metric", (event) => seen.push(event));
  await new Promise((resolve) => setTimeout(resolve, milliseconds));
  off();
  return seen;
}

/** The metrics collectors' calls of the fake nvidia-smi (the Local provider's offers ask it too, once). */
function calls(): string[][] {
  try {
    return readFileSync(record, "utf8")
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as string[])
      .filter((call) => call.some((argument) => argument.startsWith("--loop-ms=")));
  } catch {
    return [];
  }
}

describe("metrics on a local pool", () => {
  it("streams every node's samples as metric events, GPUs by index", async () => {
    const depth = join(scratch, "depth");
    writeFileSync(depth, "3\n");
    await using pool = await sky.compute({
      nodes: 2,
      image: {
        metrics: [
          sky.metrics.CPU({ interval: 0.25 }),
          sky.metrics.MemoryUsed({ interval: 0.25 }),
          sky.metrics.GPU({ interval: 0.25 }),
          sky.metrics.GPUTemp({ interval: 0.5 }),
          sky.metrics.Disk(scratch, { interval: 0.5 }),
          sky.metrics.NetworkTx({ interval: 0.5 }),
          sky.metrics.Custom("queue_depth", `cat '${depth}'`, { interval: 0.5 }),
        ],
      },
      options: { console: false },
    });
    const events = await collect(pool, 2500);
    const byNode = (node: number, name: string) =>
      events.filter((event) => event.node === node && event.name === name);
    for (const node of [0, 1]) {
      for (const name of ["cpu", "memory_used", "gpu", "gpu_temp", "disk", "network_tx", "queue_depth"]) {
        expect(byNode(node, name).length, `node ${node} ${name}`).toBeGreaterThan(0);
      }
      expect(
        byNode(node, "cpu").every((event) => event.unit === "%" && event.value >= 0 && event.value <= 100),
      ).toBe(true);
      expect(
        new Set(byNode(node, "gpu").map((event) => `${event.gpu}:${event.value}:${event.unit}`)),
      ).toEqual(new Set(["0:37:%", "1:88:%"]));
      expect(new Set(byNode(node, "gpu_temp").map((event) => `${event.gpu}:${event.value}`))).toEqual(
        new Set(["0:45", "1:61"]),
      );
      expect(
        byNode(node, "queue_depth").every((event) => event.value === 3 && event.unit === undefined),
      ).toBe(true);
      expect(byNode(node, "cpu").every((event) => event.gpu === undefined && event.poolId === pool.id)).toBe(
        true,
      );
    }
    // Each node's worker runs one nvidia-smi per GPU interval, with the real query line.
    expect(calls().sort()).toEqual(
      [
        ...Array(2).fill([
          "--query-gpu=index,utilization.gpu",
          "--format=csv,noheader,nounits",
          "--loop-ms=250",
        ]),
        ...Array(2).fill([
          "--query-gpu=index,temperature.gpu",
          "--format=csv,noheader,nounits",
          "--loop-ms=500",
        ]),
      ].sort(),
    );
  });

  it("samples the default set when the image names no metrics, every second", async () => {
    await using pool = await sky.compute({ options: { console: false } });
    const names = new Set((await collect(pool, 2600)).map((event) => event.name));
    expect(names).toEqual(new Set(["cpu", "memory", "gpu", "gpu_memory"]));
  });

  it.each(["thread", "process"] as const)(
    "brings the values a task reports as metric events with node, worker, task and step (%s executor)",
    async (executor) => {
      const reportTasks = fileURLToPath(new URL("./fixtures/report_tasks.py", import.meta.url));
      const steps = sky.python<[number], number>("report_tasks:steps");
      const refused = sky.python<[], string>("report_tasks:refused");
      await using pool = await sky.compute({
        nodes: 2,
        image: { includes: [reportTasks], metrics: null },
        options: { console: false, worker: { executor } },
      });
      const seen: sky.MetricEvent[] = [];
      pool.on("metric", (event) => seen.push(event));
      const handle = pool.submit(steps(3), { target: 1 });
      await handle.result;
      // The samples travel beside the result: give the last one a moment to arrive.
      while (seen.length < 4) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(
        seen.map(({ node, worker, taskId, name, value, step, unit }) => ({
          node,
          worker,
          taskId,
          name,
          value,
          step,
          unit,
        })),
      ).toEqual([
        { node: 1, worker: 0, taskId: handle.id, name: "loss", value: 1, step: 0, unit: undefined },
        { node: 1, worker: 0, taskId: handle.id, name: "loss", value: 0.5, step: 1, unit: undefined },
        { node: 1, worker: 0, taskId: handle.id, name: "loss", value: 1 / 3, step: 2, unit: undefined },
        { node: 1, worker: 0, taskId: handle.id, name: "score", value: 7, step: undefined, unit: undefined },
      ]);
      expect(await pool.run(refused())).toBe("report_metric: value of 'loss' must be finite, not nan");
    },
  );

  it("samples nothing with metrics: null", async () => {
    const before = calls().length;
    await using pool = await sky.compute({ image: { metrics: null }, options: { console: false } });
    expect(await collect(pool, 1500)).toEqual([]);
    expect(calls().length).toBe(before);
  });
});
