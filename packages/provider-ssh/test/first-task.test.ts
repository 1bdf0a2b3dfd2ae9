/**
 * The first task on a node, fast, end to end on the test bed (real sshd hosts, the real bootstrap):
 * a warm node skips its environment phases, a changed image makes the environment again (a package
 * it no longer names is gone), uv fetched from the package index installs for later pools, and pip
 * installs where uv cannot be had or would not install exactly as pip does.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import {
  createTestbed,
  requireTestbed,
  type ScratchSkywardHome,
  type Testbed,
  testbedSshHosts,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// Core's pip tests use the same hand-built wheels.
import { buildWheel } from "../../core/test/wheels.js";
import { SSH } from "../src/index.js";
import { fetchWheels, serveWheelIndex, WHEEL_CACHE, type WheelIndex } from "./fixtures/wheel-index.js";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("../bench/first_task.py", import.meta.url));
const hello = sky.python<[string[]], string[]>("first_task:hello");

const waitUntil = async (condition: () => boolean, timeoutMs: number): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return condition();
};

describe.skipIf(skipReason !== undefined)("the first task on a node, fast", () => {
  let bed: Testbed;
  let home: ScratchSkywardHome | undefined;
  /** Serves the probe wheels and uv. */
  let withUv: WheelIndex;
  /** Serves the probe wheels only: uv cannot be had. */
  let withoutUv: WheelIndex;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 2 });
    home = await useScratchSkywardHome("skyward-first-task-");
    const probes = join(home.path, "wheels");
    buildWheel(probes, "skyward-alpha", "skyward_alpha", 1);
    buildWheel(probes, "skyward-beta", "skyward_beta", 2);
    buildWheel(probes, "skyward-gamma", "skyward_gamma", 3);
    // A "pip" 0.1 on the index: the base interpreter's own pip satisfies a "pip" requirement, which
    // uv (not looking at the system site-packages) would install again from the index.
    buildWheel(probes, "pip", "skyward_fake_pip", 4);
    fetchWheels(WHEEL_CACHE, ["uv"]);
    withUv = await serveWheelIndex(bed.bridgeAddress, [probes, WHEEL_CACHE]);
    withoutUv = await serveWheelIndex(bed.bridgeAddress, [probes]);
  }, 300_000);

  afterAll(async () => {
    await withUv?.close();
    await withoutUv?.close();
    await bed?.teardown();
    await home?.restore();
  });

  /**
   * One pool (ttl 0) on one host: its first result, the phases each node started, and its bootstrap
   * log; after it closes, waits for the worker's self-destruct.
   */
  async function onePool(host: number, index: WheelIndex, pip: string[]) {
    const root = bed.hosts[host]?.root as string;
    const phases: string[] = [];
    const pool = await sky.compute(
      {
        provider: SSH({ hosts: testbedSshHosts(bed, { indices: [host] }) }),
        nodes: 1,
        ttl: 0,
        image: { pip, env: index.env, includes: [tasks] },
        options: { console: false, bootstrapTimeout: 300 },
      },
      {
        onEvent: (event) => {
          if (event.type === "bootstrap.phase" && event.status === "started") phases.push(event.phase);
        },
      },
    );
    let log = "";
    let result: string[] | Error;
    try {
      log = readFileSync(join(root, "bootstrap.log"), "utf8");
      const modules = pip.filter((name) => name.startsWith("skyward-")).map((name) => name.replace("-", "_"));
      result = await pool.run(hello(modules));
    } finally {
      await pool.close();
    }
    // ttl 0: the worker self-destructs, removing what the pool left and keeping the environment.
    expect(await waitUntil(() => !existsSync(join(root, "worker.pid")), 30_000)).toBe(true);
    return { phases, log, result, root };
  }

  const importsIn = async (host: number, module: string) => {
    const python = join(bed.hosts[host]?.root as string, "venv/bin/python");
    const run = await bed.exec(host, [python, "-c", `import ${module}`]);
    if (run.exitCode !== 0 && !run.stderr.includes("ModuleNotFoundError"))
      throw new Error(`${python}: ${run.stderr}`);
    return run.exitCode === 0;
  };

  it("a warm node skips its environment phases; a changed image installs again, with the node's uv", async () => {
    const cold = await onePool(0, withUv, ["skyward-alpha", "skyward-beta"]);
    expect(cold.result).toEqual(["skyward_alpha", "skyward_beta"]);
    expect(cold.phases).toEqual(expect.arrayContaining(["python", "venv", "pip", "runtime"]));
    // uv's wheel comes from the package index (no pip run, no binary download) while the venv is made,
    // and installs the packages.
    expect(cold.log).toMatch(/^uv \d+\.\d+\.\d+ from http:\/\/.*\/files\/uv-.*\.whl$/m);
    expect(cold.log).toContain("installing with uv");
    // The self-destruct kept the environment and removed the pool's files (env.sh holds the image's env).
    for (const kept of ["venv", "cache", ".content-hash", "runtime"])
      expect(existsSync(join(cold.root, kept))).toBe(true);
    for (const gone of ["env.sh", "work", "worker.token", "bootstrap.sh"])
      expect(existsSync(join(cold.root, gone))).toBe(false);

    // The runtime stays too, with the bytecode its Python cached.
    const runtimeFile = join(cold.root, "runtime/skyward/__init__.py");
    const unpacked = statSync(runtimeFile).mtimeMs;
    expect(readdirSync(join(cold.root, "runtime/skyward/__pycache__")).length).toBeGreaterThan(0);

    // The same image again: no environment phase runs (env.sh is written again, nothing else), and
    // the same runtime is not unpacked again.
    const warm = await onePool(0, withUv, ["skyward-alpha", "skyward-beta"]);
    expect(statSync(runtimeFile).mtimeMs).toBe(unpacked);
    expect(warm.result).toEqual(["skyward_alpha", "skyward_beta"]);
    expect(warm.phases).not.toEqual(expect.arrayContaining(["venv"]));
    expect(
      warm.phases.filter((phase) => ["apt", "python", "venv", "pip", "runtime", "plugins"].includes(phase)),
    ).toEqual([]);
    expect(warm.log).toContain("::skyward:: phase warm-check done");
    expect(warm.log).not.toContain("installing with");

    // uv stays on the node (under ROOT/tools) for later pools.
    expect(existsSync(join(cold.root, "tools/uv/bin/uv"))).toBe(true);

    // A node whose runtime is another one (its hash differs) gets this one: replaced whole.
    const hashFile = join(cold.root, "runtime/.skyward-runtime-hash");
    const runtimeHash = readFileSync(hashFile, "utf8");
    writeFileSync(hashFile, "an-older-runtime\n");
    writeFileSync(join(cold.root, "runtime/stale_module.py"), "raise SystemExit('stale')\n");

    // Another package list: the environment is made again, with uv; the package dropped is gone.
    const changed = await onePool(0, withUv, ["skyward-alpha", "skyward-gamma"]);
    expect(readFileSync(hashFile, "utf8")).toBe(runtimeHash);
    expect(existsSync(join(cold.root, "runtime/stale_module.py"))).toBe(false);
    expect(changed.result).toEqual(["skyward_alpha", "skyward_gamma"]);
    expect(changed.phases).toEqual(expect.arrayContaining(["venv", "pip"]));
    expect(changed.log).toContain("installing with uv");
    expect(await importsIn(0, "skyward_gamma")).toBe(true);
    expect(await importsIn(0, "skyward_beta")).toBe(false);

    // A requirement the base interpreter already satisfies (pip) is one uv would install again (from
    // the index): pip installs instead, and leaves the base's pip where it is.
    const satisfied = await onePool(0, withUv, ["skyward-alpha", "pip"]);
    expect(satisfied.result).toEqual(["skyward_alpha"]);
    expect(satisfied.log).toMatch(/the base interpreter already has pip \(uv would install it again\)/);
    expect(satisfied.log).toContain("installing with pip");
    expect(satisfied.log).toMatch(/Requirement already satisfied: pip/);
    expect(await importsIn(0, "skyward_fake_pip")).toBe(false);

    // SKYWARD_INSTALLER=pip in the image's env: pip, though the node has uv.
    const pinned = await onePool(0, { ...withUv, env: { ...withUv.env, SKYWARD_INSTALLER: "pip" } }, [
      "skyward-alpha",
    ]);
    expect(pinned.result).toEqual(["skyward_alpha"]);
    expect(pinned.log).toContain("installing with pip");
    expect(pinned.log).not.toContain("installing with uv");
  }, 600_000);

  it("bootstraps every node at once: no node waits for the head's bootstrap", async () => {
    const events: { node: number; phase: string; status: string }[] = [];
    await using pool = await sky.compute(
      {
        provider: SSH({ hosts: testbedSshHosts(bed) }),
        nodes: 2,
        ttl: 0,
        // A fresh env value: a cold bootstrap on both hosts; each node's env phase lasts 2 s.
        image: {
          env: { ...withUv.env, SKY_ORDER: String(Date.now()) },
          shellVars: { SKY_SLOW: "sleep 2; echo slow" },
          includes: [tasks],
        },
        options: { console: false, bootstrapTimeout: 300 },
      },
      {
        onEvent: (event) => {
          if (event.type === "bootstrap.phase")
            events.push({ node: event.node, phase: event.phase, status: event.status });
        },
      },
    );
    expect(await pool.broadcast(hello([]))).toEqual([[], []]);
    const at = (node: number, phase: string, status: string) =>
      events.findIndex((event) => event.node === node && event.phase === phase && event.status === status);
    // Node 1's bootstrap is under way while the head's is: its env phase starts before the head's
    // (2 s long) ends. Head first, node 1 would not even have connected by then.
    expect(at(1, "env", "started")).toBeGreaterThanOrEqual(0);
    expect(at(0, "env", "finished")).toBeGreaterThanOrEqual(0);
    expect(at(1, "env", "started")).toBeLessThan(at(0, "env", "finished"));
  }, 300_000);

  it("installs with pip where uv cannot be had from the index, cold and after a change", async () => {
    const cold = await onePool(1, withoutUv, ["skyward-alpha"]);
    expect(cold.result).toEqual(["skyward_alpha"]);
    expect(cold.log).toMatch(/uv: could not fetch it \(HTTPError: HTTP Error 404/);
    expect(cold.log).toContain("installing with pip");
    // The background fetch finds no uv on this index and leaves nothing behind.
    const fetchLog = join(cold.root, "cache/uv-fetch.log");
    expect(
      await waitUntil(
        () => existsSync(fetchLog) && /No matching distribution|ERROR/.test(readFileSync(fetchLog, "utf8")),
        120_000,
      ),
    ).toBe(true);
    expect(existsSync(join(cold.root, "tools/uv"))).toBe(false);

    const changed = await onePool(1, withoutUv, ["skyward-alpha", "skyward-beta"]);
    expect(changed.result).toEqual(["skyward_alpha", "skyward_beta"]);
    expect(changed.phases).toContain("pip");
    expect(changed.log).toContain("installing with pip");
    expect(changed.log).not.toContain("installing with uv");
  }, 600_000);
});
