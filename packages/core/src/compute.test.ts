import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installProviderPackage } from "../test/fixtures/provider-package.js";
import { resolveComputeInput } from "./compute.js";
import { ConfigurationError, type ConfigurationIssue } from "./errors/errors.js";
import { accelerators } from "./spec/accelerators.js";
import { image } from "./spec/image.js";
import { options } from "./spec/options.js";

/** The settings the fixture provider recorded (it keeps them on itself). */
function settingsOf(provider: unknown): unknown {
  return (provider as { settings?: unknown } | undefined)?.settings;
}

async function issuesOf(promise: Promise<unknown>): Promise<readonly ConfigurationIssue[]> {
  try {
    await promise;
  } catch (error) {
    expect(ConfigurationError.isInstance(error)).toBe(true);
    return (error as ConfigurationError).issues;
  }
  throw new Error("expected a ConfigurationError, but nothing was thrown");
}

describe("named form (skyward.toml)", () => {
  let root: string;
  let home: string;
  let cwd: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "skyward-compute-"));
    home = join(root, "home");
    cwd = join(root, "project");
    await mkdir(join(home, ".skyward"), { recursive: true });
    await installProviderPackage(cwd, "skyward-provider-fixture");
    await writeFile(
      join(home, ".skyward", "defaults.toml"),
      `
[providers.fixture]
type = "fixture"
package = "skyward-provider-fixture"
region = "global-region"

[pools.train]
provider = "fixture"
nodes = 2

[pools.train.image]
pip = ["torch"]
`,
    );
    await writeFile(
      join(cwd, "skyward.toml"),
      `
[providers.fixture]
api_key_env = "FIXTURE_KEY"

[pools.train]
nodes = [2, 8]
accelerator = "A100-40GB"
ttl = 120

[pools.train.options]
provision_timeout = 100
ssh_timeout = 42
console = "log"

[pools.train.options.worker]
concurrency = 4
executor = "process"

[pools.bad]
nodes = 0
vcpus = -1

[pools.local]
nodes = 1
`,
    );
  });

  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("resolves the pool from both files with the provider from its package", async () => {
    const resolved = await resolveComputeInput({ name: "train", config: { cwd, home } });
    expect(resolved.name).toBe("train");
    expect(resolved.specs).toHaveLength(1);
    const pool = resolved.specs[0];
    expect(pool?.provider?.name).toBe("fixture");
    expect(settingsOf(pool?.provider)).toEqual({
      region: "global-region",
      apiKeyEnv: "FIXTURE_KEY",
    });
    expect(pool?.nodes).toEqual({ desired: 2, min: 2, max: 8 });
    expect(pool?.accelerator).toEqual(accelerators.A100({ memory: "40GB" }));
    expect(pool?.acceleratorMemoryGb).toBe(40);
    expect(pool?.image).toEqual(image({ pip: ["torch"] }));
    expect(pool?.ttl).toBe(120);
  });

  it("takes the options from [pools.NAME.options]", async () => {
    const resolved = await resolveComputeInput({ name: "train", config: { cwd, home } });
    expect(resolved.options).toEqual(
      options({
        provisionTimeout: 100,
        sshTimeout: 42,
        console: "log",
        worker: { concurrency: 4, executor: "process" },
      }),
    );
    expect(resolved.specs[0]).toMatchObject({
      provisionTimeout: 100,
      sshTimeout: 42,
      worker: { concurrency: 4, buffer: "auto", executor: "process", reuseProcesses: true },
    });
  });

  it("merges the code's options over the file's, the code winning, worker fields merged", async () => {
    const resolved = await resolveComputeInput({
      name: "train",
      config: { cwd, home },
      options: { provisionTimeout: 50, worker: { buffer: 2, concurrency: 8 }, retryOnInterruption: 7 },
    });
    expect(resolved.options).toMatchObject({
      provisionTimeout: 50,
      sshTimeout: 42,
      console: "log",
      retryOnInterruption: 7,
      worker: { concurrency: 8, buffer: 2, executor: "process", reuseProcesses: true },
    });
    expect(resolved.specs[0]?.provisionTimeout).toBe(50);
    expect(resolved.specs[0]?.worker).toEqual(resolved.options.worker);
  });

  it("keeps the file's value for an option the code leaves undefined", async () => {
    const resolved = await resolveComputeInput({
      name: "train",
      config: { cwd, home },
      options: { sshTimeout: undefined, worker: { concurrency: undefined } },
    });
    expect(resolved.options.sshTimeout).toBe(42);
    expect(resolved.options.worker.concurrency).toBe(4);
  });

  it("resolves a pool without a provider to the built-in Local (no provider)", async () => {
    const resolved = await resolveComputeInput({ name: "local", config: { cwd, home } });
    expect(resolved.specs[0]?.provider).toBeUndefined();
    expect(resolved.options).toEqual(options());
  });

  it("is frozen", async () => {
    const resolved = await resolveComputeInput({ name: "train", config: { cwd, home } });
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(Object.isFrozen(resolved.specs)).toBe(true);
    expect(Object.isFrozen(resolved.specs[0])).toBe(true);
    expect(Object.isFrozen(resolved.options)).toBe(true);
  });

  it("reports bad pool fields at pools.NAME paths", async () => {
    const issues = await issuesOf(resolveComputeInput({ name: "bad", config: { cwd, home } }));
    expect(issues.map((issue) => issue.path).sort()).toEqual(["pools.bad.nodes", "pools.bad.vcpus"]);
  });

  it.each([42, "fast", null, [1]])("rejects options %j instead of ignoring them", async (bad) => {
    const issues = await issuesOf(
      resolveComputeInput({ name: "train", config: { cwd, home }, options: bad as never }),
    );
    expect(issues.map((issue) => issue.path)).toEqual(["options"]);
  });

  it("reports an unknown pool name with the pools defined", async () => {
    const issues = await issuesOf(resolveComputeInput({ name: "trian", config: { cwd, home } }));
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe("name");
    expect(issues[0]?.message).toContain('no pool named "trian"');
    expect(issues[0]?.message).toContain("(defined: train, bad, local)");
  });
});
