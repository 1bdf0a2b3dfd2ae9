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
});
