import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { image } from "@skyward/core";
import { applyImageTransforms, collectBootstrapOps, isPlugin } from "@skyward/core/contract";
import { configurationIssuesOf, fakeCluster, runBootstrapScript } from "@skyward/testing";
import { afterAll, describe, expect, it } from "vitest";
import { mps } from "./index.js";

const cluster = fakeCluster();
const fakes = fileURLToPath(new URL("../test/fixtures/bin", import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), "skyward-mps-test-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface MpsCall {
  readonly argv: string[];
  readonly stdin: string;
  readonly env: Record<string, string>;
}

/** Bootstraps a node with the plugin, the fake MPS control program first on PATH. */
async function bootstrapWith(
  plugin: ReturnType<typeof mps>,
  options: { daemonRunning?: boolean; path?: string } = {},
) {
  const state = join(mkdtempSync(join(scratch, "state-")), "daemon");
  if (options.daemonRunning) writeFileSync(state, "");
  const record = join(scratch, `calls-${Math.random().toString(36).slice(2)}.jsonl`);
  const transformed = await applyImageTransforms([plugin], image(), cluster);
  const run = runBootstrapScript({
    directory: scratch,
    image: image({ env: transformed.env }),
    pluginOps: collectBootstrapOps([plugin], cluster),
    env: {
      PATH: options.path ?? `${fakes}:${process.env.PATH}`,
      FAKE_MPS_STATE: state,
      FAKE_MPS_RECORD: record,
    },
  });
  const calls: MpsCall[] = existsSync(record)
    ? readFileSync(record, "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as MpsCall)
    : [];
  return { ...run, calls, daemonRunning: existsSync(state) };
}

describe("mps() options", () => {
  it("is a frozen plain PluginV1 with an image transform and a bootstrap op", () => {
    const plugin = mps();
    expect(isPlugin(plugin)).toBe(true);
    expect(Object.getPrototypeOf(plugin)).toBe(Object.prototype);
    expect(Object.isFrozen(plugin)).toBe(true);
    expect(plugin).toMatchObject({ specificationVersion: "v1", name: "mps" });
    expect(plugin.bootstrap?.({ cluster })).toHaveLength(1);
  });

  it("refuses bad options with a ConfigurationError naming the field", () => {
    expect(configurationIssuesOf(() => mps({ activeThreadPercentage: 0 }))).toEqual([
      { path: "mps.activeThreadPercentage", message: "expected a whole number from 1 to 100" },
    ]);
    expect(configurationIssuesOf(() => mps({ activeThreadPercentage: 150 }))[0]?.path).toBe(
      "mps.activeThreadPercentage",
    );
    expect(configurationIssuesOf(() => mps({ pinnedMemoryLimit: "2G; reboot" }))).toEqual([
      { path: "mps.pinnedMemoryLimit", message: 'expected device=limit pairs like "0=2G" or "0=1G,1=512M"' },
    ]);
    expect(configurationIssuesOf(() => mps({ pipeDirectory: "relative/dir" }))).toEqual([
      { path: "mps.pipeDirectory", message: "expected an absolute path for the pipe directory" },
    ]);
    expect(configurationIssuesOf(() => mps({ logDirectory: "/tmp/a\nb" }))[0]?.path).toBe("mps.logDirectory");
    expect(configurationIssuesOf(() => mps({ threads: 4 } as never))).toEqual([
      { path: "mps.threads", message: "unknown field" },
    ]);
  });

  it("sets the MPS variables on the workers and installs nothing", async () => {
    const plain = await applyImageTransforms([mps()], image({ pip: ["torch"] }), cluster);
    expect(plain.env).toEqual({
      CUDA_MPS_PIPE_DIRECTORY: "/tmp/nvidia-mps",
      CUDA_MPS_LOG_DIRECTORY: "/tmp/nvidia-mps-log",
    });
    expect(plain.pip).toEqual(["torch"]);
    const limited = await applyImageTransforms(
      [mps({ activeThreadPercentage: 25, pinnedMemoryLimit: "0=1G,1=512M", pipeDirectory: "/run/mps" })],
      image(),
      cluster,
    );
    expect(limited.env).toEqual({
      CUDA_MPS_PIPE_DIRECTORY: "/run/mps",
      CUDA_MPS_LOG_DIRECTORY: "/tmp/nvidia-mps-log",
      CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: "25",
      CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: "0=1G,1=512M",
    });
  });
});

describe("the bootstrap op, run by the real bootstrap script against a fake nvidia-cuda-mps-control", () => {
  it("creates the directories and starts the daemon with the MPS variables", async () => {
    const pipes = join(scratch, "pipes");
    const logs = join(scratch, "logs");
    const run = await bootstrapWith(
      mps({
        activeThreadPercentage: 25,
        pinnedMemoryLimit: "0=1G,1=512M",
        pipeDirectory: pipes,
        logDirectory: logs,
      }),
    );
    expect(run.code, run.printed).toBe(0);
    const env = {
      CUDA_MPS_PIPE_DIRECTORY: pipes,
      CUDA_MPS_LOG_DIRECTORY: logs,
      CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: "25",
      CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: "0=1G,1=512M",
    };
    expect(run.calls).toEqual([
      { argv: [], stdin: "get_server_list\n", env },
      { argv: ["-d"], stdin: "", env },
    ]);
    expect(run.daemonRunning).toBe(true);
    expect(existsSync(pipes) && existsSync(logs)).toBe(true);
    expect(run.printed).toContain(`mps: started the control daemon (pipes in ${pipes})`);
  });

  it("leaves a daemon that already runs alone", async () => {
    const run = await bootstrapWith(
      mps({ pipeDirectory: join(scratch, "pipes-2"), logDirectory: join(scratch, "logs-2") }),
      {
        daemonRunning: true,
      },
    );
    expect(run.code, run.printed).toBe(0);
    expect(run.calls.map((call) => call.argv)).toEqual([[]]);
    expect(run.printed).toContain("mps: the control daemon already runs");
  });

  it("passes directory names byte-for-byte: spaces, quotes and $(…) are not run by the shell", async () => {
    const marker = join(scratch, "pwned");
    const pipes = join(scratch, `it's "$(touch ${marker})" dir`);
    const run = await bootstrapWith(mps({ pipeDirectory: pipes, logDirectory: join(scratch, "logs `id`") }));
    expect(run.code, run.printed).toBe(0);
    expect(existsSync(pipes)).toBe(true);
    expect(existsSync(join(scratch, "logs `id`"))).toBe(true);
    expect(existsSync(marker)).toBe(false);
    expect(run.calls[1]?.env.CUDA_MPS_PIPE_DIRECTORY).toBe(pipes);
  });

  it("fails the bootstrap with a clear message on a node without MPS", async () => {
    const run = await bootstrapWith(
      mps({ pipeDirectory: join(scratch, "p3"), logDirectory: join(scratch, "l3") }),
      {
        path: process.env.PATH ?? "/usr/bin:/bin",
      },
    );
    expect(run.code).not.toBe(0);
    expect(run.printed).toContain("mps: nvidia-cuda-mps-control not found");
  });
});
