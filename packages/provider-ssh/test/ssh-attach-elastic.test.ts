/**
 * An elastic SSH pool attached again grows and shrinks, on real sshd test-bed hosts: a client process
 * starts a `[1, 2]` pool with a plugin, detaches it and is killed; this process attaches through a new
 * `SSH` provider and the plugin passed again, and `resize(2)` starts a node on the second host — made
 * with the recorded image and the plugin (its bootstrap op's file is there), running tasks — which the
 * idle rule then gives back. Refused first, each before any worker is reached: a provider of another
 * type, and plugins other than the pool's; attached without its plugins the pool keeps its size and
 * says which to pass.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { Plugin } from "@skyward/core/contract";
import { eventually, requireTestbed, testbedSshHosts, useTestbedAndHome } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";
import { alive } from "./processes.js";

const skipReason = await requireTestbed();
const info = sky.python<[], { node: number; pid: number }>("ssh_tasks:info");
const sleep = sky.python<[number], number>("ssh_tasks:sleep");
// The child's plugin again, by the same name and with the same op: plugins are code, not state.
const marker = Plugin.create("marker").withBootstrap(() => [
  'printf "%s" "$MARKER_TEXT" > "$SKYWARD_ROOT/marker.txt"',
]);

/** Starts the detaching client on `hosts`; resolves with the pool's id and its head worker's pid once it detached. */
async function detachedByAChild(hosts: readonly unknown[]): Promise<{ id: string; pid: number }> {
  const client = spawn(
    process.execPath,
    [fileURLToPath(new URL("./fixtures/ssh-elastic-detach-child.ts", import.meta.url))],
    {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, SKYWARD_TEST_HOSTS: JSON.stringify(hosts) },
    },
  );
  const exited = new Promise((resolve) => client.once("exit", resolve));
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: client.stdout }).once("line", resolve);
    client.once("exit", (code) => reject(new Error(`the client exited (${code}) before detaching`)));
  });
  client.kill("SIGKILL");
  await exited;
  return JSON.parse(line) as { id: string; pid: number };
}

describe.skipIf(skipReason !== undefined)("an elastic SSH pool attached again", () => {
  const scratch = useTestbedAndHome({ hosts: 2, homePrefix: "skyward-ssh-attach-elastic-" });

  it("grows onto a host with the recorded image and the plugin passed again, and gives the node back when idle", async () => {
    const hosts = testbedSshHosts(scratch.bed);
    const { id, pid } = await detachedByAChild(hosts);
    const stateFile = `${process.env.SKYWARD_HOME}/pools/${id}.json`;
    expect(JSON.parse(readFileSync(stateFile, "utf8"))).toMatchObject({
      provider: "ssh",
      nodeBounds: { min: 1, max: 2 },
      plugins: ["marker"],
    });

    // A provider of another type, and plugins other than the pool's: refused, naming both.
    const local = await sky.attach(id, { provider: sky.Local() }).catch((error: unknown) => error);
    expect(sky.ConfigurationError.isInstance(local)).toBe(true);
    expect((local as Error).message).toMatch(/provider: expected a "ssh" provider .*received "local"/);
    const other = await sky
      .attach(id, { provider: SSH({ hosts }), plugins: [Plugin.create("other")] })
      .catch((error: unknown) => error);
    expect(sky.ConfigurationError.isInstance(other)).toBe(true);
    expect((other as Error).message).toMatch(
      /plugins: expected the plugins pool \w+ was started with, in order \(marker\), received other/,
    );

    // Without its plugins it keeps its size, and says which to pass; detached again, it keeps its bounds.
    {
      const fixed = await sky.attach(id, { provider: SSH({ hosts }), options: { console: false } });
      const refused = await fixed.resize(2).catch((error: unknown) => error);
      expect(sky.ConfigurationError.isInstance(refused)).toBe(true);
      expect((refused as Error).message).toMatch(
        /has plugins \(marker\).*attach\(id, \{ provider, plugins \}\)/,
      );
      expect(fixed.nodes()).toHaveLength(1);
      expect(await fixed.detach()).toBe(id);
    }
    expect(JSON.parse(readFileSync(stateFile, "utf8"))).toMatchObject({
      nodeBounds: { min: 1, max: 2 },
      plugins: ["marker"],
    });

    const scaling: sky.ScalingEvent[] = [];
    const destroyed: string[] = [];
    const pool = await sky.attach(id, {
      provider: SSH({ hosts }),
      plugins: [marker],
      options: { console: false },
    });
    try {
      pool.on("scaling", (event) => scaling.push(event));
      pool.on("node.destroyed", (event) => destroyed.push(event.instanceId));
      expect(pool.nodes()).toHaveLength(1);
      await pool.resize(2);
      expect(pool.nodes().filter((node) => node.ready)).toHaveLength(2);
      const both = await pool.broadcast(info());
      expect(both.map((entry) => entry.node)).toEqual([0, 1]);
      expect(both[0]?.pid).toBe(pid);
      const grown = both[1]?.pid as number;
      expect(alive(grown)).toBe(true);
      expect(await pool.run(sleep(0.1), { target: 1 })).toBe(0.1);
      // Made like the pool's others: the recorded image's env reached the plugin's bootstrap op there.
      const root = scratch.bed.hosts[1]?.root as string;
      expect(readFileSync(`${root}/marker.txt`, "utf8")).toBe("made with the marker plugin");

      // Idle (the recorded 10 s), the new node is given back; the head stays.
      expect(await eventually(() => pool.nodes().length === 1 && destroyed.length === 1, 60_000)).toBe(true);
      expect(scaling.at(-1)).toMatchObject({ from: 2, to: 1, reason: expect.stringMatching(/idle/) });
      expect(destroyed).toEqual([`ssh:${hosts[1]?.user}@${hosts[1]?.host}:${hosts[1]?.port}`]);
      expect(await eventually(() => !alive(grown), 30_000)).toBe(true);
      expect(alive(pid)).toBe(true);
    } finally {
      await pool.close();
    }
    expect(existsSync(stateFile)).toBe(false);
  }, 300_000);
});
