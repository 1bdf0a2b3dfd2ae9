import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { nodeResources, offersFromNodes, parseQuantity, whyNoNodeFits } from "./kubernetes-offers.js";
import { parseSettings } from "./kubernetes-settings.js";

// A node as `kubectl get node -o json` shows it, trimmed to what offers read: allocatable quantities
// (https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/node-v1/#NodeStatus) and the
// labels NVIDIA's GPU feature discovery sets
// (https://github.com/NVIDIA/k8s-device-plugin#catalog-of-labels).
function node(
  name: string,
  allocatable: Record<string, string>,
  labels: Record<string, string> = {},
): V1Node {
  return {
    metadata: { name, labels: { "kubernetes.io/arch": "amd64", ...labels } },
    status: { allocatable },
  };
}

const settings = parseSettings({}, "");
const t4 = node(
  "gpu-1",
  { cpu: "7910m", memory: "30Gi", "nvidia.com/gpu": "2" },
  { "nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.memory": "15360" },
);
const cpu = node("cpu-1", { cpu: "4", memory: "16389444Ki" });

describe("parseQuantity", () => {
  it("reads the suffixes Kubernetes writes", () => {
    expect(parseQuantity("250m")).toBe(0.25);
    expect(parseQuantity("16Gi")).toBe(16 * 1024 ** 3);
    expect(parseQuantity("1024Ki")).toBe(1024 * 1024);
    expect(parseQuantity("2")).toBe(2);
    expect(parseQuantity(undefined)).toBe(0);
  });
});

describe("offersFromNodes", () => {
  const nodes = [t4, cpu].map(nodeResources);

  it("offers a GPU node's kind by its product label, sized as asked, free by default", () => {
    const offers = offersFromNodes(
      nodes,
      { accelerator: { name: "T4", count: 1 }, vcpus: 2, memoryGb: 4, allocation: "on-demand" },
      settings,
      "default",
    );
    expect(offers).toHaveLength(1);
    expect(offers[0]).toMatchObject({
      provider: "kubernetes",
      accelerator: { name: "T4", count: 1, memoryGb: 16 },
      vcpus: 2,
      memoryGb: 4,
      onDemandPrice: 0,
      spotPrice: null,
      region: "default",
      specific: { gpuProduct: "Tesla-T4", gpus: 1, vcpus: 2, memoryGb: 4 },
    });
  });

  it("offers CPU pods on any node for a CPU query, priced by the settings' rate", () => {
    const offers = offersFromNodes(
      nodes,
      { accelerator: null, allocation: "cheapest" },
      parseSettings({ ratePerHour: 0.5 }, ""),
      "ml",
    );
    expect(offers.map((offer) => offer.accelerator)).toEqual([null]);
    expect(offers[0]?.onDemandPrice).toBe(0.5);
    expect(offers[0]?.vcpus).toBe(1);
  });

  it("offers nothing for a GPU no node has, or a node selector no node matches", () => {
    const query = { accelerator: { name: "A100", count: 1 }, allocation: "cheapest" } as const;
    expect(offersFromNodes(nodes, query, settings, "default")).toEqual([]);
    expect(
      offersFromNodes(
        nodes,
        { accelerator: null, allocation: "cheapest" },
        parseSettings({ nodeSelector: { pool: "big" } }, ""),
        "default",
      ),
    ).toEqual([]);
  });
});

describe("whyNoNodeFits", () => {
  const nodes = [t4, cpu].map(nodeResources);

  it("names the short resource and the most any node has", () => {
    expect(whyNoNodeFits(nodes, { vcpus: 1, memoryGb: 1, gpus: 4 }, {})).toBe(
      "nvidia.com/gpu: 4 asked per pod, the most a node has allocatable is 2 (node gpu-1)",
    );
    expect(whyNoNodeFits(nodes, { vcpus: 64, memoryGb: 1, gpus: 0 }, {})).toMatch(/^cpu: 64 asked per pod/);
    expect(whyNoNodeFits(nodes, { vcpus: 1, memoryGb: 100, gpus: 0 }, {})).toMatch(/^memory: 100 GiB asked/);
  });

  it("is undefined when a node can hold the pod", () => {
    expect(whyNoNodeFits(nodes, { vcpus: 2, memoryGb: 8, gpus: 2 }, {})).toBeUndefined();
  });
});
