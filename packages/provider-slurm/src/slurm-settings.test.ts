import { ConfigurationError } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import { Slurm } from "./slurm-provider.js";
import type { SlurmSettings } from "./slurm-settings.js";

const login = { host: "login.example", identityFile: "/keys/id" };

function issuesOf(settings: unknown): string[] {
  try {
    Slurm(settings as SlurmSettings);
  } catch (error) {
    if (ConfigurationError.isInstance(error))
      return error.issues.map((issue) => `${issue.path}: ${issue.message}`);
    throw error;
  }
  return [];
}

describe("Slurm settings", () => {
  it("are refused by name before the login node is reached", () => {
    expect(issuesOf({ login: { host: "login.example" } })).toEqual([
      expect.stringMatching(/login\.privateKey: expected privateKey or identityFile/),
    ]);
    expect(issuesOf({ login, partition: "gpu; rm -rf /" })).toEqual([
      expect.stringMatching(/^Slurm\.partition: expected a partition name/),
    ]);
    expect(issuesOf({ login, timeLimit: "two hours" })).toEqual([
      expect.stringMatching(/^Slurm\.timeLimit: expected minutes or Slurm's time/),
    ]);
    expect(issuesOf({ login, ratePerHour: -1 })).toEqual([expect.stringMatching(/^Slurm\.ratePerHour/)]);
    expect(issuesOf({ login, sbatchOptions: ["--x=1 --y=2"] })).toEqual([
      expect.stringMatching(/^Slurm\.sbatchOptions\[0\]: expected one sbatch option/),
    ]);
    expect(issuesOf({ login, nodes: 3 })).toEqual([expect.stringMatching(/nodes/)]);
    expect(issuesOf({ login, nodeLocalDirectory: "tmp" })).toEqual([
      expect.stringMatching(/^Slurm\.nodeLocalDirectory: expected an absolute directory/),
    ]);
    expect(issuesOf({ login, modules: ["cuda/12.4; rm -rf ~"] })).toEqual([
      expect.stringMatching(/^Slurm\.modules\[0\]: expected a module name/),
    ]);
  });

  it("accept what a cluster needs", () => {
    expect(
      issuesOf({
        login: { ...login, user: "alice", port: 2222 },
        partition: "gpu",
        account: "ml-lab",
        qos: "high",
        timeLimit: "1-12:00:00",
        modules: ["cuda/12.4"],
        sharedDirectory: "/project/ml/skyward",
        nodeLocalDirectory: "/tmp/skyward",
        ratePerHour: { gpu: 2.5 },
        sbatchOptions: ["--constraint=a100"],
      }),
    ).toEqual([]);
    expect(issuesOf({ login, timeLimit: 90 })).toEqual([]);
  });
});
