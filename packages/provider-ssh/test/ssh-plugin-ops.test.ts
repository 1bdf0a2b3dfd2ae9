/**
 * Plugin bootstrap ops over SSH, on a one-host test bed: what an op writes into `$SKYWARD_ROOT` is
 * where a launcher finds it (`LaunchContext.root`), ops run in the worker's working directory, and a
 * failing op fails the node with an error naming its plugin, with the op's output and not its text.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { Plugin } from "@skyward/core/contract";
import { createTestbed, requireTestbed, type Testbed, testbedSshHosts } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("./fixtures/plugin_ops_tasks.py", import.meta.url));
const readText = sky.python<[string], string>("plugin_ops_tasks:read_text");
const cwd = sky.python<[], string>("plugin_ops_tasks:cwd");

describe.skipIf(skipReason !== undefined)("plugin bootstrap ops over SSH", () => {
  let bed: Testbed;

  const provider = () => SSH({ hosts: testbedSshHosts(bed) });

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 1 });
  }, 120_000);

  afterAll(async () => {
    await bed?.teardown();
  });

  it("write into SKYWARD_ROOT, which launchers see as LaunchContext.root, from the work directory", async () => {
    const roots: string[] = [];
    const plugin = Plugin.create("writer")
      .withBootstrap(() => ['printf "%s|%s\\n" "$SKYWARD_OP_VALUE" "$(pwd)" > "$SKYWARD_ROOT/from-op.txt"'])
      .withLauncher(({ command, context }) => {
        roots.push(context.root ?? "");
        return command;
      });
    await using pool = await sky.compute({
      provider: provider(),
      image: { includes: [tasks], env: { SKYWARD_OP_VALUE: "seen by the op" } },
      plugins: [plugin],
      options: { console: false },
    });
    const root = bed.hosts[0]?.root ?? "";
    expect(roots).toEqual([root]);
    const workdir = await pool.run(cwd());
    expect(await pool.run(readText(`${root}/from-op.txt`))).toBe(`seen by the op|${workdir}\n`);
  });

  it("that fail stop the node, naming the plugin, with the op's output but not its text", async () => {
    const plugin = Plugin.create("breaks").withBootstrap(() => [
      ': "secret-in-the-op-text"; echo "the tool is missing" >&2; exit 7',
    ]);
    const events: string[] = [];
    const error = await sky
      .compute(
        {
          provider: provider(),
          image: { includes: [tasks] },
          plugins: [plugin],
          options: { console: false, maxProvisionAttempts: 1 },
        },
        { onEvent: (event) => events.push(JSON.stringify(event)) },
      )
      .catch((caught: unknown) => caught);
    expect(sky.BootstrapError.isInstance(error)).toBe(true);
    const message = (error as Error).message;
    expect(message).toMatch(/plugin "breaks": bootstrap op 1 of 1 failed \(exit 7\)/);
    expect(message).toContain("the tool is missing");
    expect((error as sky.BootstrapError).phase).toBe("plugins");
    for (const text of [message, ...events]) expect(text).not.toContain("secret-in-the-op-text");
  });
});
