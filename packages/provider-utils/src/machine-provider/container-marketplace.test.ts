import { describe, expect, it } from "vitest";
import { containerMarketplace, imagePullCapabilities } from "./container-marketplace.js";
import { IMAGE_PULL_PROVISION_TIMEOUT_SECONDS } from "./image-pull.js";

interface Box {
  readonly id: string;
  readonly status: string;
  readonly name: string;
  readonly host?: string;
}

const half = containerMarketplace<Box>({
  name: "example",
  label: "Example",
  settings: { retryDelayMs: 1000 },
  clusterIdPrefix: "skyward",
  peerNetwork: "none",
  containers: "boxes",
  mapping: {
    statuses: { running: ["up"], terminated: ["gone"] },
    deleting: ["gone"],
    name: (box) => box.name,
    tags: () => ({ "skyward:cluster": "skyward-1a2b3c4d" }),
    address: (box) => (box.host ? { host: box.host, port: 2222 } : undefined),
    spot: () => false,
    hourlyPrice: () => 0.5,
    createdAt: () => 0,
  },
});

describe("containerMarketplace", () => {
  it("is a spot marketplace that waits out an image pull, its containers without FUSE", () => {
    expect(imagePullCapabilities("accelerated")).toEqual({
      spot: true,
      offerCache: "marketplace",
      peerNetwork: "accelerated",
      provisionTimeout: IMAGE_PULL_PROVISION_TIMEOUT_SECONDS,
    });
    expect(half.capabilities).toEqual(imagePullCapabilities("none"));
    expect(half.containersWithoutFuse).toBe("boxes");
    expect(half.clusterIdPrefix).toBe("skyward");
    expect(half.keyName).toBe("example_ed25519");
  });

  it("describes a container at its own address (no test seam), running once it has one", () => {
    const running = half.describe(
      { id: "b1", status: "up", name: "n", host: "203.0.113.7" },
      { identityFile: "/k" },
    );
    expect(running.status).toBe("running");
    expect(running.ssh).toMatchObject({ host: "203.0.113.7", port: 2222, user: "root" });
    const waiting = half.describe({ id: "b2", status: "up", name: "n" }, { identityFile: "/k" });
    expect(waiting.status).toBe("pending");
    expect(half.isBeingDeleted?.({ id: "b3", status: "gone", name: "n" })).toBe(true);
  });

  it("asks the sshAddress seam once per container when the mapping gives seamAddress, and runs its stand-in's self-destruct", () => {
    const asked: string[] = [];
    const seamed = containerMarketplace<Box, { id: string; host: string }>({
      name: "example",
      label: "Example",
      settings: {
        retryDelayMs: 1000,
        sshAddress: ({ id, host }) => {
          asked.push(`${id}@${host}`);
          return { host: "127.0.0.9", port: 22, selfDestruct: "echo gone" };
        },
      },
      peerNetwork: "none",
      containers: "boxes",
      mapping: {
        statuses: { running: ["up"] },
        deleting: [],
        name: (box) => box.name,
        tags: () => ({}),
        address: (box) => (box.host ? { host: box.host, port: 2222 } : undefined),
        seamAddress: (id, { host }) => ({ id, host }),
      },
    });
    const box = { id: "b1", status: "up", name: "n", host: "203.0.113.7" };
    const first = seamed.describe(box, { identityFile: "/k" });
    seamed.describe(box, { identityFile: "/k" });
    expect(first.ssh).toMatchObject({ host: "127.0.0.9", port: 22 });
    expect(asked).toEqual(["b1@203.0.113.7"]);
    // The cluster is not read: the stand-in is known by the instance.
    const cluster = undefined as never;
    expect(seamed.selfDestruct(first, cluster)).toBe("echo gone");
    // Without seamAddress (the half above), the setting would never be asked: the own address is used.
    expect(half.selfDestruct(first, cluster)).toContain("skyward-self-destruct");
  });
});
