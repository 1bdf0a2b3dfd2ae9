/**
 * What a Slurm cluster offers: its partitions as `sinfo` and `scontrol show partition` describe them,
 * each an offer of its nodes' GPUs, CPUs and memory, at the rate the settings give it (spot capacity
 * when the partition's jobs can be preempted) — or why it can never run a spec, numbers named.
 */
import { acceleratorFromName, type Offer, type OfferQuery } from "@skyward/core/contract";
import type { SlurmNode } from "./slurm-commands.js";
import { rateOf, type SlurmDeclared } from "./slurm-settings.js";

/** Node states in which a node can be given to a job (now or once it is free). */
export const USABLE_STATES = new Set(["idle", "mixed", "allocated", "completing", "planned"]);

/** One partition as its nodes describe it. */
export interface Partition {
  readonly name: string;
  readonly isDefault: boolean;
  /** Its jobs can be preempted (`PreemptMode` other than `OFF`): its capacity is spot capacity. */
  readonly preemptible: boolean;
  readonly nodes: readonly SlurmNode[];
}

export function partitionsOf(
  nodes: readonly SlurmNode[],
  preemptModes: ReadonlyMap<string, string>,
): Map<string, Partition> {
  const partitions = new Map<string, Partition>();
  for (const node of nodes) {
    const current = partitions.get(node.partition);
    partitions.set(node.partition, {
      name: node.partition,
      isDefault: (current?.isDefault ?? false) || node.isDefaultPartition,
      preemptible: (preemptModes.get(node.partition) ?? "OFF").toUpperCase() !== "OFF",
      nodes: [...(current?.nodes ?? []), node],
    });
  }
  return partitions;
}

/** The canonical accelerator name of a GRES type (`a100` → `A100`), or the type as it is. */
function acceleratorNameOf(type: string): string {
  try {
    return acceleratorFromName(type.toUpperCase(), "gres").name;
  } catch {
    return type;
  }
}

/**
 * The offer of `partition` for `query`; why it can never run it (numbers named), when the spec asks
 * for more than its nodes have; or undefined when it is simply not what the spec asks for (another
 * accelerator, above the price cap).
 */
export function offerOf(
  declared: SlurmDeclared,
  partition: Partition,
  query: OfferQuery,
): Offer | string | undefined {
  const usable = partition.nodes.filter((node) => USABLE_STATES.has(node.state));
  if (usable.length === 0)
    return `partition "${partition.name}" has no usable node (${partition.nodes.map((node) => `${node.name} ${node.state}`).join(", ")})`;
  const maxGpus = Math.max(...usable.map((node) => node.gpus));
  const gpuType = usable.find((node) => node.gpuType !== undefined)?.gpuType;
  const acceleratorName =
    gpuType !== undefined ? acceleratorNameOf(gpuType) : (declared.accelerator?.name ?? "GPU");
  const wanted = query.accelerator;
  if (wanted) {
    if (maxGpus === 0)
      return `partition "${partition.name}" has no GPUs (GRES gpu); the spec asks for ${wanted.count} ${wanted.name}`;
    // Untyped GRES are what Slurm({ accelerator }) says they are.
    if (wanted.name.toUpperCase() !== acceleratorName.toUpperCase()) return undefined;
    if (wanted.count > maxGpus)
      return `the spec asks for ${wanted.count} GPUs per node; partition "${partition.name}" has at most ${maxGpus} per node`;
  }
  const cpus = Math.max(...usable.map((node) => node.cpus));
  const memoryGb = Math.max(...usable.map((node) => node.memoryMb)) / 1024;
  if (query.vcpus !== undefined && query.vcpus > cpus)
    return `the spec asks for ${query.vcpus} vCPUs per node; partition "${partition.name}" has at most ${cpus}`;
  if (query.memoryGb !== undefined && query.memoryGb > memoryGb)
    return `the spec asks for ${query.memoryGb} GB per node; partition "${partition.name}" has at most ${Math.floor(memoryGb)} GB`;
  const price = rateOf(declared, partition.name);
  if (query.maxHourlyCost !== undefined && price > query.maxHourlyCost) return undefined;
  // Spot capacity is a preemptible partition's; on-demand capacity a partition whose jobs stay.
  if (query.allocation === "spot" && !partition.preemptible) return undefined;
  if (query.allocation === "on-demand" && partition.preemptible) return undefined;
  const idle = usable.filter((node) => node.state === "idle").length;
  return Object.freeze({
    id: `slurm:${partition.name}`,
    provider: "slurm",
    instanceType: `${partition.name}: ${usable.length} nodes${maxGpus > 0 ? `, ${maxGpus}x ${acceleratorName} each` : ""}`,
    // A spec without an accelerator asks for no GPU: its nodes are CPU-only to the pool.
    accelerator: wanted
      ? { name: acceleratorName, count: wanted.count, memoryGb: declared.accelerator?.memoryGb ?? 0 }
      : null,
    vcpus: cpus,
    memoryGb,
    architecture: "x86_64",
    region: partition.name,
    spotPrice: partition.preemptible ? price : null,
    onDemandPrice: partition.preemptible ? null : price,
    pricesAsOf: new Date().toISOString().slice(0, 10),
    specific: Object.freeze({
      partition: partition.name,
      nodes: usable.length,
      idleNodes: idle,
      gpusPerNode: maxGpus,
      ...(gpuType !== undefined ? { gpuType } : {}),
    }),
  });
}
