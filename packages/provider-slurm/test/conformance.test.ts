/**
 * The provider conformance suite against `Slurm` on the Slurm test bed, a real pool included: what
 * Skyward leaves at the provider is its jobs in the queue and its pools' directories on the shared
 * filesystem, and both must be gone after teardown.
 */
import { readdir } from "node:fs/promises";
import * as sky from "@skyward/core";
import {
  createSlurmTestbed,
  requireSlurmTestbed,
  runProviderConformance,
  type SlurmTestbed,
} from "@skyward/testing";
import { afterAll, beforeAll, describe } from "vitest";
import { Slurm } from "../src/index.js";

const skipReason = await requireSlurmTestbed();

describe.skipIf(skipReason !== undefined)("Slurm on the Slurm test bed", () => {
  let slurm: SlurmTestbed;

  beforeAll(async () => {
    slurm = await createSlurmTestbed({ computeNodes: 2, gpusPerNode: 2 });
  }, 120_000);

  afterAll(async () => {
    await slurm?.teardown();
  }, 60_000);

  runProviderConformance({
    name: "Slurm",
    create: () => {
      return Slurm({
        login: slurm.loginSettings,
        sharedDirectory: slurm.sharedDirectory,
        accelerator: sky.accelerators.T4(),
        timeLimit: 10,
      });
    },
    provisionCount: 2,
    pool: { ttl: 0 },
    unknownInstanceId: "999999-0",
    // Skyward's jobs still queued or running, and pool directories left on the shared filesystem.
    leftovers: async () => {
      const jobs = (await slurm.exec(["squeue", "-h", "-o", "%i %j %T"])).stdout
        .split("\n")
        .filter((line) => line.includes(" skyward-"));
      const pools = await readdir(`${slurm.sharedDirectory}/pools`).catch(() => []);
      return [...jobs.map((job) => `job ${job}`), ...pools.map((pool) => `directory ${pool}`)];
    },
  });
});
