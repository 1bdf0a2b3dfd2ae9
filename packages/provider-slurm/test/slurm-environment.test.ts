/**
 * Where a pool's environment comes from on the Slurm test bed: environment modules (Lmod's `module
 * load`, before the bootstrap and the worker), and a node-local environment, bootstrapped on each
 * compute node in a directory only that node sees.
 */
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { requireEnvironmentModules, requireSlurmTestbed } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { Slurm, type SlurmSettings } from "../src/index.js";
import { useSlurmSuite } from "./fixtures/slurm-suite.js";

const skipReason = await requireSlurmTestbed();
const modulesSkipReason = requireEnvironmentModules();
const tasks = fileURLToPath(new URL("./fixtures/slurm_tasks.py", import.meta.url));

const environment = sky.python<[string], string | null>("slurm_tasks:environment");
const environmentHome = sky.python<[], { prefix: string; slurm_node: string | null; bootstrap_log: boolean }>(
  "slurm_tasks:environment_home",
);

describe.skipIf(skipReason !== undefined)("A Slurm pool's environment on the Slurm test bed", () => {
  const suite = useSlurmSuite("skyward-slurm-environment-", { computeNodes: 2, gpusPerNode: 0 });

  const settings = (extra: Partial<SlurmSettings> = {}): SlurmSettings => {
    return {
      login: suite.slurm.loginSettings,
      sharedDirectory: suite.slurm.sharedDirectory,
      timeLimit: 10,
      ...extra,
    };
  };
  const squeue = async () => (await suite.slurm.exec(["squeue", "-h", "-o", "%i %j %T %N"])).stdout.trim();

  it.skipIf(modulesSkipReason !== undefined)(
    "loads the settings' environment modules before the worker starts",
    async () => {
      await mkdir(join(suite.slurm.moduleDirectory, "skyward-test"), { recursive: true });
      await writeFile(
        join(suite.slurm.moduleDirectory, "skyward-test", "1.0.lua"),
        'setenv("SKYWARD_MODULE_TEST", "loaded by Lmod")\n',
      );
      await using pool = await sky.compute({
        provider: Slurm(settings({ modules: ["skyward-test/1.0"] })),
        nodes: 1,
        image: { includes: [tasks] },
        ttl: 0,
        options: { console: false, bootstrapTimeout: 240 },
      });
      expect(await pool.run(environment("SKYWARD_MODULE_TEST"))).toBe("loaded by Lmod");
      // The login node's sessions do not have it: the module, loaded in the worker's step, set it.
      expect((await suite.slurm.exec(["printenv", "SKYWARD_MODULE_TEST"])).stdout).toBe("");
    },
    120_000,
  );

  it.skipIf(modulesSkipReason !== undefined)(
    "fails the pool before any task runs when a module does not exist, saying which and why",
    async () => {
      const started = sky.compute({
        provider: Slurm(settings({ modules: ["no-such-module/9.9"] })),
        nodes: 1,
        image: { includes: [tasks] },
        ttl: 0,
        options: { console: false, bootstrapTimeout: 240, maxProvisionAttempts: 1 },
      });
      await expect(started).rejects.toThrow(
        /Loading the environment modules no-such-module\/9\.9 failed on node 0 \(node\d of job \d+\), before the bootstrap: .*unknown/s,
      );
      // Nothing is left holding the cluster.
      await expect.poll(squeue, { timeout: 90_000 }).toBe("");
    },
    240_000,
  );

  it("bootstraps each node in its own node-local directory when told to, and removes it at the end", async () => {
    {
      await using pool = await sky.compute({
        provider: Slurm(settings({ nodeLocalDirectory: suite.slurm.nodeLocalDirectory })),
        nodes: 2,
        image: { includes: [tasks] },
        ttl: 0,
        options: { console: false, bootstrapTimeout: 240 },
      });
      const homes = await pool.broadcast(environmentHome());
      expect(new Set(homes.map((entry) => entry.slurm_node))).toEqual(new Set(["node1", "node2"]));
      // Both workers run a Python environment at the same node-local path...
      expect(new Set(homes.map((entry) => entry.prefix)).size).toBe(1);
      expect(homes[0]?.prefix.startsWith(`${suite.slurm.nodeLocalDirectory}/slurm-`)).toBe(true);
      // ...whose bootstrap ran there, on each node: the directory is each node's own (a tmpfs in its
      // namespace), and the shared filesystem, as the login node sees it, has nothing at that path.
      expect(homes.map((entry) => entry.bootstrap_log)).toEqual([true, true]);
      expect(await readdir(suite.slurm.nodeLocalDirectory)).toEqual([]);
    }
    await expect.poll(squeue, { timeout: 90_000 }).toBe("");
    // The pool's end removed the environment from both nodes: a later job there finds nothing.
    const listed = await suite.slurm.exec([
      "srun",
      "--nodes=2",
      "--ntasks-per-node=1",
      "sh",
      "-c",
      `printf '%s:' "$SLURMD_NODENAME"; ls -A ${suite.slurm.nodeLocalDirectory} | tr '\\n' ' '; echo`,
    ]);
    expect(listed.exitCode, listed.stderr).toBe(0);
    expect(listed.stdout.trim().split("\n").sort()).toEqual(["node1:", "node2:"]);
  }, 240_000);
});
