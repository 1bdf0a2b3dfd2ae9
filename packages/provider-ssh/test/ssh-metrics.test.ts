/**
 * Metrics on test-bed hosts: each host's worker samples the image's collectors in its own network
 * namespace and streams them back over the SSH tunnel as `metric` events. GPU collectors run against
 * core's fake `nvidia-smi` (put first on the workers' PATH by the image's env), which answers only the
 * real query form and records its arguments.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import * as sky from "@skyward/core";
import { createTestbed, requireTestbed, type Testbed, testbedSshHosts } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";

const skipReason = await requireTestbed();
const coreDirectory = dirname(createRequire(import.meta.url).resolve("@skyward/core/package.json"));
const fakeBin = join(coreDirectory, "test", "fixtures", "bin");

describe.skipIf(skipReason !== undefined)("metrics on a 2-host test bed", () => {
  let bed: Testbed;
  const scratch = mkdtempSync(join(tmpdir(), "skyward-ssh-metrics-"));
  const record = join(scratch, "nvidia-calls.jsonl");

  beforeAll(async () => {
    chmodSync(scratch, 0o777);
    bed = await createTestbed({ hosts: 2 });
  }, 120_000);

  afterAll(async () => {
    await bed?.teardown();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("streams every host's CPU, memory, disk, network, GPU and custom samples", async () => {
    await using pool = await sky.compute({
      provider: SSH({ hosts: testbedSshHosts(bed) }),
      nodes: 2,
      ttl: 0,
      image: {
        env: {
          PATH: `${fakeBin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
          FAKE_NVIDIA_RECORD: record,
        },
        metrics: [
          sky.metrics.CPU({ interval: 0.5 }),
          sky.metrics.Memory({ interval: 0.5 }),
          sky.metrics.Disk("/", { interval: 0.5 }),
          sky.metrics.NetworkTx({ interval: 0.5 }),
          sky.metrics.GPUMemory({ interval: 0.5 }),
          sky.metrics.Custom("node_id", "hostname", { interval: 0.5 }),
          sky.metrics.Custom("one", "echo 1", { interval: 0.5 }),
        ],
      },
      options: { console: false, bootstrapTimeout: 240 },
    });
    const events: sky.MetricEvent[] = [];
    const off = pool.on("metric", (event) => events.push(event));
    await new Promise((resolve) => setTimeout(resolve, 3000));
    off();
    for (const node of [0, 1]) {
      const mine = (name: string) => events.filter((event) => event.node === node && event.name === name);
      for (const name of ["cpu", "memory", "disk", "network_tx", "gpu_memory", "one"]) {
        expect(mine(name).length, `node ${node} ${name}`).toBeGreaterThan(0);
      }
      expect(
        mine("memory").every((event) => event.value > 0 && event.value < 100 && event.unit === "%"),
      ).toBe(true);
      // The metrics themselves leave each host through its own namespace's link: bytes go out.
      expect(mine("network_tx").some((event) => event.value > 0)).toBe(true);
      expect(new Set(mine("gpu_memory").map((event) => `${event.gpu}:${event.value}`))).toEqual(
        new Set([`0:${1024 * 2 ** 20}`, `1:${40960 * 2 ** 20}`]),
      );
      expect(mine("one").every((event) => event.value === 1)).toBe(true);
      // `hostname` prints a name, not a number: that collector reports nothing.
      expect(mine("node_id")).toEqual([]);
    }
    const calls = readFileSync(record, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as string[])
      // The collectors' calls (whatever else asks nvidia-smi on a host is not this test's business).
      .filter((call) => call.some((argument) => argument.startsWith("--loop-ms=")));
    expect(calls).toEqual(
      Array(2).fill(["--query-gpu=index,memory.used", "--format=csv,noheader,nounits", "--loop-ms=500"]),
    );
  }, 300_000);
});
