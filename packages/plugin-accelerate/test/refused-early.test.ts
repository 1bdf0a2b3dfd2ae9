/**
 * Settings the plugin can tell are wrong from the pool's spec are refused before any machine is
 * provisioned: a `num_processes` that is not one per node was refused only by the launcher, once every
 * node had been provisioned and bootstrapped (on a cloud, billed for all that time); an elastic pool,
 * whose nodes' launchers would not agree on the node count, is refused too.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as sky from "@skyward/core";
import { afterAll, describe, expect, it } from "vitest";
import { accelerate } from "../src/index.js";

const home = mkdtempSync(join(tmpdir(), "skyward-accelerate-home-"));
const previousHome = process.env.SKYWARD_HOME;
process.env.SKYWARD_HOME = home;
afterAll(() => {
  if (previousHome === undefined) delete process.env.SKYWARD_HOME;
  else process.env.SKYWARD_HOME = previousHome;
  rmSync(home, { recursive: true, force: true });
});

/** How `sky.compute` ends for `spec`, and which instances it provisioned meanwhile. */
async function start(spec: sky.FlatComputeInput): Promise<{ error: unknown; provisioned: string[] }> {
  const provisioned: string[] = [];
  try {
    const pool = await sky.compute(
      { ...spec, options: { console: false } },
      {
        onEvent: (event) => {
          if (event.type === "node.provisioned") provisioned.push(event.instanceId);
        },
      },
    );
    await pool.close();
    return { error: undefined, provisioned };
  } catch (error) {
    return { error, provisioned };
  }
}

/** The issues of the ConfigurationError the plugin's transform hook threw (a PluginError's cause). */
function issuesOf(error: unknown): readonly sky.ConfigurationIssue[] {
  expect(sky.PluginError.isInstance(error)).toBe(true);
  expect((error as sky.PluginError).hook).toBe("transform");
  const cause = (error as Error).cause;
  expect(sky.ConfigurationError.isInstance(cause)).toBe(true);
  return (cause as sky.ConfigurationError).issues;
}

describe("accelerate() settings a pool cannot run", () => {
  it("refuses num_processes other than one per node before any node is provisioned", async () => {
    const { error, provisioned } = await start({ nodes: 2, plugins: [accelerate({ num_processes: 4 })] });
    expect(provisioned).toEqual([]);
    expect(issuesOf(error)).toEqual([
      {
        path: "accelerate.num_processes",
        message: expect.stringMatching(/expected 2 \(one process per node\), received 4/),
      },
    ]);
  }, 120_000);

  it("refuses an elastic pool before any node is provisioned", async () => {
    // Each node's launcher gets the node count at its own start (--num_machines): nodes started
    // at different sizes of an elastic pool would not agree on the process group.
    const { error, provisioned } = await start({
      nodes: [1, 2],
      plugins: [accelerate()],
    });
    expect(provisioned).toEqual([]);
    expect(issuesOf(error)).toEqual([
      {
        path: "nodes",
        message: expect.stringMatching(/^accelerate runs a fixed number of machines .*received 1 to 2/),
      },
    ]);
  }, 120_000);
});
