import { describe, expect, it } from "vitest";
import type { Instance } from "../contract/provider.js";
import { accelerators } from "../spec/accelerators.js";
import { image } from "../spec/image.js";
import { clusterMessage, keptClusterMessage } from "./cluster-message.js";
import { workerArguments } from "./node-start.js";
import { SINGLE_WORKER } from "./pool-context.js";

function instance(id: string, privateIp: string | null, publicIp: string | null = null): Instance {
  return {
    id,
    status: "running",
    publicIp,
    privateIp,
    ssh: null,
    spot: false,
    hourlyPrice: null,
    offerId: "offer",
    createdAt: 0,
    tags: {},
  };
}

const peers = [
  { index: 0, instance: instance("i-0", "10.0.0.1", "1.2.3.4") },
  { index: 2, instance: instance("i-2", null) },
];

describe("the cluster message", () => {
  it("names the node, its peers, the head and the accelerators", () => {
    const message = clusterMessage({
      node: 2,
      peers,
      layout: { ...SINGLE_WORKER, workersPerNode: 2, checkAccelerators: true },
      headPort: 29_600,
      jobId: "pool-1",
      spec: { accelerator: accelerators.A100({ count: 2 }), plugins: [] },
      image: image({ env: { A: "1" } }),
      secrets: {},
    });
    expect(message).toMatchObject({
      t: "cluster",
      node: 2,
      total_nodes: 2,
      workers_per_node: 2,
      check_accelerators: true,
      head_addr: "10.0.0.1",
      head_port: 29_600,
      job_id: "pool-1",
      peers: [
        { node: 0, private_ip: "10.0.0.1", public_ip: "1.2.3.4" },
        { node: 2, private_ip: "", public_ip: "" },
      ],
      accelerators: 2,
      accelerator: { type: "A100", count: 2, is_trainium: false },
      network: null,
      env: { A: "1" },
      plugins: [],
    });
    expect(message).not.toHaveProperty("pin_accelerators");
  });

  it("without an accelerator or a head address: none, and loopback", () => {
    const message = clusterMessage({
      node: 0,
      peers: [{ index: 0, instance: instance("i-0", null) }],
      layout: SINGLE_WORKER,
      headPort: 29_500,
      jobId: "pool-2",
      spec: { accelerator: null, plugins: [] },
      image: image(),
      secrets: {},
    });
    expect(message.head_addr).toBe("127.0.0.1");
    expect(message.accelerators).toBe(0);
    expect(message.accelerator).toBeNull();
    expect(message).not.toHaveProperty("check_accelerators");
  });

  it("sent again to a picked-up worker, keeps its settings and carries no environment", () => {
    const original = clusterMessage({
      node: 1,
      peers,
      layout: SINGLE_WORKER,
      headPort: 29_500,
      jobId: "pool-3",
      spec: { accelerator: null, plugins: [] },
      image: image({ env: { SECRET: "x" } }),
      secrets: { HF_TOKEN: "first" },
    });
    const { env: _env, secrets: _secrets, ...kept } = original;
    // The secrets are those of the client that picks the worker up, never the ones it was started with.
    expect(keptClusterMessage(kept, { HF_TOKEN: "rotated" })).toEqual({
      ...original,
      env: {},
      secrets: { HF_TOKEN: "rotated" },
    });
    expect(keptClusterMessage({ ...kept, secrets: { HF_TOKEN: "told back" } } as typeof kept, {})).toEqual({
      ...kept,
      t: "cluster",
      env: {},
    });
  });

  it("carries the secrets' values in their own field, and none when there are none", () => {
    const base = {
      node: 0,
      peers,
      layout: SINGLE_WORKER,
      headPort: 29_500,
      jobId: "pool-4",
      spec: { accelerator: null, plugins: [] },
      image: image({ env: { PLAIN: "1" } }),
    };
    const message = clusterMessage({ ...base, secrets: { WANDB_API_KEY: "wandb-value" } });
    expect(message.secrets).toEqual({ WANDB_API_KEY: "wandb-value" });
    expect(message.env).toEqual({ PLAIN: "1" });
    expect(clusterMessage({ ...base, secrets: {} })).not.toHaveProperty("secrets");
  });
});

describe("the worker's arguments", () => {
  const base = {
    node: 3,
    concurrency: 4,
    executor: "process" as const,
    worker: { buffer: 2, reuseProcesses: true },
    ttl: 600,
    selfDestruct: "",
    notice: undefined,
  };

  it("give the node, the slots, the buffer, the executor and the TTL", () => {
    expect(workerArguments(base)).toEqual([
      "--node",
      "3",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--concurrency",
      "4",
      "--buffer",
      "2",
      "--executor",
      "process",
      "--ttl",
      "600",
    ]);
  });

  it("add the self-destruct command, the interruption notice and fresh processes when asked", () => {
    const args = workerArguments({
      ...base,
      worker: { buffer: "auto", reuseProcesses: false },
      selfDestruct: "shutdown -h now",
      notice: { kind: "aws-imds", endpoint: "http://169.254.169.254", intervalSeconds: 5 },
    });
    expect(args.slice(8, 10)).toEqual(["--buffer", "0"]);
    expect(args.slice(14)).toEqual([
      "--no-reuse-processes",
      "--self-destruct",
      "shutdown -h now",
      "--interruption-notice",
      "aws-imds=http://169.254.169.254",
      "--interruption-poll-interval",
      "5",
    ]);
  });
});
