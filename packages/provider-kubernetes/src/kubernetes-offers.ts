/**
 * Offers from the cluster's nodes: one per kind of node (its GPU product, as NVIDIA's GPU feature
 * discovery labels it), sized as the spec asks (a pod requests what it needs). Whether a node can
 * hold that many CPUs, GiB and `nvidia.com/gpu` is checked by `provision`, before any pod is made, so
 * the refusal names the short resource (an empty offer list could not). Prices are the settings'
 * rates (0 by default: the cluster is the team's own).
 */
import type { V1Node } from "@kubernetes/client-node";
import { acceleratorFromName, type Offer, type OfferQuery } from "@skyward/core/contract";
import { filterOffers } from "@skyward/provider-utils";
import { PROVIDER_NAME } from "./kubernetes-api.js";
import type { ParsedKubernetesSettings } from "./kubernetes-settings.js";

/** The extended resource NVIDIA's device plugin advertises. */
export const GPU_RESOURCE = "nvidia.com/gpu";
/** The label GPU feature discovery sets to the GPU's product name (`NVIDIA-A100-SXM4-80GB`). */
export const GPU_PRODUCT_LABEL = "nvidia.com/gpu.product";
/** The label GPU feature discovery sets to one GPU's memory, MiB. */
export const GPU_MEMORY_LABEL = "nvidia.com/gpu.memory";

/** What a pod of a spec requests, and the node kind it was offered on. */
export interface KubernetesOfferData {
  /** The GPU product label value pods are pinned to, or undefined for CPU-only pods. */
  readonly gpuProduct?: string;
  /** GPUs per pod (`nvidia.com/gpu`). */
  readonly gpus: number;
  /** CPUs per pod. */
  readonly vcpus: number;
  /** Memory per pod, GiB. */
  readonly memoryGb: number;
}

/** A node's allocatable resources, parsed. */
export interface NodeResources {
  readonly name: string;
  readonly vcpus: number;
  readonly memoryGb: number;
  readonly gpus: number;
  readonly labels: Readonly<Record<string, string>>;
  readonly architecture: Offer["architecture"];
  readonly schedulable: boolean;
}

/** Parses a Kubernetes quantity (`250m`, `16Gi`, `2`, `1e3`) to a number of units. */
export function parseQuantity(quantity: string | undefined): number {
  if (quantity === undefined) return 0;
  const match = /^([0-9.]+(?:e[0-9]+)?)([a-zA-Z]*)$/.exec(quantity.trim());
  if (!match) return 0;
  const value = Number(match[1]);
  const suffixes: Record<string, number> = {
    "": 1,
    m: 1e-3,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
    Ki: 1024,
    Mi: 1024 ** 2,
    Gi: 1024 ** 3,
    Ti: 1024 ** 4,
  };
  return value * (suffixes[match[2] ?? ""] ?? 1);
}

/** The allocatable resources of a node. */
export function nodeResources(node: V1Node): NodeResources {
  const allocatable = node.status?.allocatable ?? {};
  const labels = node.metadata?.labels ?? {};
  return {
    name: node.metadata?.name ?? "",
    vcpus: parseQuantity(allocatable.cpu),
    memoryGb: parseQuantity(allocatable.memory) / 1024 ** 3,
    gpus: parseQuantity(allocatable[GPU_RESOURCE]),
    labels,
    architecture: labels["kubernetes.io/arch"] === "arm64" ? "arm64" : "x86_64",
    schedulable: node.spec?.unschedulable !== true,
  };
}

/** True when every label of `selector` is on the node. */
function selected(node: NodeResources, selector: Readonly<Record<string, string>>): boolean {
  return Object.entries(selector).every(([key, value]) => node.labels[key] === value);
}

/** The canonical accelerator of a GPU product label, or undefined when the catalog does not know it. */
function acceleratorOf(product: string, memoryMiB: string | undefined) {
  try {
    const accelerator = acceleratorFromName(product.replace(/-/g, " "), GPU_PRODUCT_LABEL);
    // The catalog's size first: the label is what the driver reports (a 16 GB T4 says 15360 MiB).
    const labelled = memoryMiB !== undefined ? Number(memoryMiB) / 1024 : Number.NaN;
    return {
      name: accelerator.name,
      memoryGb:
        accelerator.memoryGb ?? (Number.isFinite(labelled) && labelled > 0 ? Math.round(labelled) : 0),
      ...(accelerator.formFactor !== undefined ? { formFactor: accelerator.formFactor } : {}),
    };
  } catch {
    return undefined;
  }
}

/** The pod size a query asks for, the settings' defaults filling what it leaves out. */
export function podSize(query: OfferQuery, settings: ParsedKubernetesSettings) {
  return {
    vcpus: query.vcpus ?? settings.defaultVcpus,
    memoryGb: query.memoryGb ?? settings.defaultMemoryGb,
    gpus: query.accelerator?.count ?? 0,
  };
}

/** The offers the cluster's nodes make for `query`: one per node kind, each priced by the settings' rates. */
export function offersFromNodes(
  nodes: readonly NodeResources[],
  query: OfferQuery,
  settings: ParsedKubernetesSettings,
  region: string,
): Offer[] {
  const size = podSize(query, settings);
  const price = settings.ratePerHour + settings.gpuRatePerHour * size.gpus;
  const byKind = new Map<string, Offer>();
  for (const node of nodes) {
    if (!node.schedulable || !selected(node, settings.nodeSelector)) continue;
    const product = node.labels[GPU_PRODUCT_LABEL];
    const accelerator =
      query.accelerator !== null && product !== undefined
        ? acceleratorOf(product, node.labels[GPU_MEMORY_LABEL])
        : undefined;
    if (query.accelerator !== null && accelerator === undefined) continue;
    // A CPU pod may go to any node, GPU nodes included: one offer, whatever the products.
    const kind = `${accelerator !== undefined ? product : "cpu"}:${node.architecture}`;
    if (byKind.has(kind)) continue;
    const data: KubernetesOfferData = {
      ...(accelerator !== undefined ? { gpuProduct: product } : {}),
      gpus: size.gpus,
      vcpus: size.vcpus,
      memoryGb: size.memoryGb,
    };
    byKind.set(kind, {
      id: `${PROVIDER_NAME}:${kind}:${size.gpus}x${size.vcpus}c${size.memoryGb}g`,
      provider: PROVIDER_NAME,
      instanceType: accelerator !== undefined ? `pod on ${product}` : "pod",
      accelerator: accelerator !== undefined ? { ...accelerator, count: size.gpus } : null,
      vcpus: size.vcpus,
      memoryGb: size.memoryGb,
      architecture: node.architecture,
      region,
      spotPrice: null,
      onDemandPrice: price,
      billingUnit: "second",
      pricesAsOf: new Date().toISOString().slice(0, 10),
      specific: { ...data },
    });
  }
  return filterOffers([...byKind.values()], query);
}

/**
 * Why no node can ever hold a pod of this size, naming the short resource and the most any node has
 * (`nvidia.com/gpu: 4 asked, the most a node has allocatable is 2 (node gpu-1)`); undefined when some
 * node can.
 */
export function whyNoNodeFits(
  nodes: readonly NodeResources[],
  size: { vcpus: number; memoryGb: number; gpus: number },
  selector: Readonly<Record<string, string>>,
): string | undefined {
  const candidates = nodes.filter((node) => node.schedulable && selected(node, selector));
  if (candidates.length === 0)
    return `no schedulable node matches the node selector ${JSON.stringify(selector)}`;
  const checks: { resource: string; asked: number; have: (node: NodeResources) => number; unit: string }[] = [
    { resource: GPU_RESOURCE, asked: size.gpus, have: (node) => node.gpus, unit: "" },
    { resource: "cpu", asked: size.vcpus, have: (node) => node.vcpus, unit: "" },
    { resource: "memory", asked: size.memoryGb, have: (node) => node.memoryGb, unit: " GiB" },
  ];
  if (candidates.some((node) => checks.every((check) => check.have(node) >= check.asked))) return undefined;
  for (const check of checks) {
    const best = candidates.reduce((most, node) => (check.have(node) > check.have(most) ? node : most));
    if (check.have(best) < check.asked) {
      const round = (value: number) => Math.round(value * 100) / 100;
      return `${check.resource}: ${round(check.asked)}${check.unit} asked per pod, the most a node has allocatable is ${round(check.have(best))}${check.unit} (node ${best.name})`;
    }
  }
  return "no single node has every resource the pod asks for";
}
