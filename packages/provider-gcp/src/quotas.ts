/**
 * Compute Engine's GPU quotas: a new project's `GPUS_ALL_REGIONS` is 0, and each region has a quota
 * per GPU model and market (`NVIDIA_T4_GPUS`, `PREEMPTIBLE_NVIDIA_T4_GPUS`…;
 * https://cloud.google.com/compute/resource-usage#gpu_quota). Exceeding one is answered at once with
 * HTTP 403, reason `quotaExceeded` ("Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 0.0 globally.",
 * https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-quota), which is no credential
 * problem: the quota to raise is named. Before a GPU pool creates anything, its region's and project's
 * quotas are read (`regions.get`, `projects.get`), as dstack does, and a pool that no market's quota
 * admits fails at once, naming them.
 */
import type { Market } from "@skyward/provider-utils";
import { type GcpClients, gcpCall } from "./gcp-api.js";
import { quotaError } from "./gcp-errors.js";

/** The regional quota metric of each GPU accelerator type, on demand (spot: `PREEMPTIBLE_` before it). */
const GPU_QUOTA_METRICS: Readonly<Record<string, string>> = Object.freeze({
  "nvidia-tesla-t4": "NVIDIA_T4_GPUS",
  "nvidia-tesla-v100": "NVIDIA_V100_GPUS",
  "nvidia-tesla-p100": "NVIDIA_P100_GPUS",
  "nvidia-tesla-p4": "NVIDIA_P4_GPUS",
  "nvidia-l4": "NVIDIA_L4_GPUS",
  "nvidia-tesla-a100": "NVIDIA_A100_GPUS",
  "nvidia-a100-80gb": "NVIDIA_A100_80GB_GPUS",
  "nvidia-h100-80gb": "NVIDIA_H100_GPUS",
  "nvidia-h100-mega-80gb": "NVIDIA_H100_MEGA_GPUS",
  "nvidia-h200-141gb": "NVIDIA_H200_GPUS",
});

/** The project-wide GPU quota, every region and market together. */
export const ALL_REGIONS_GPU_QUOTA = "GPUS_ALL_REGIONS";

/** The regional quota metric of `count` GPUs of `acceleratorType` in `market`, or undefined when unknown. */
export function gpuQuotaMetric(acceleratorType: string, market: Market): string | undefined {
  const metric = GPU_QUOTA_METRICS[acceleratorType];
  return metric === undefined ? undefined : market === "spot" ? `PREEMPTIBLE_${metric}` : metric;
}

interface QuotaEntry {
  metric?: string | null;
  limit?: number | null;
  usage?: number | null;
}

const quotaOf = (entries: readonly QuotaEntry[] | null | undefined, metric: string) =>
  entries?.find((entry) => entry.metric === metric);

/**
 * Checks that at least one of `markets` has room for `gpusPerNode` GPUs of `acceleratorType` in
 * `region` (its regional quota and `GPUS_ALL_REGIONS`); resolves with the markets that do, in order.
 * Throws {@link quotaError} naming each quota when none has. A quota that cannot be read (no
 * `compute.regions.get` / `compute.projects.get`) is taken as no limit: the insert's own 403 then says.
 */
export async function marketsWithGpuQuota(
  clients: GcpClients,
  options: { region: string; acceleratorType: string; gpusPerNode: number; markets: readonly Market[] },
  signal: AbortSignal,
): Promise<Market[]> {
  const [region, project] = await Promise.all([
    gcpCall(`reading the quotas of ${options.region}`, signal, () =>
      clients.regions.get({ project: clients.project, region: options.region }),
    )
      .then(([answer]) => answer.quotas ?? undefined)
      .catch(() => undefined),
    gcpCall("reading the project's quotas", signal, () => clients.projects.get({ project: clients.project }))
      .then(([answer]) => answer.quotas ?? undefined)
      .catch(() => undefined),
  ]);
  const shortOf = (entry: QuotaEntry | undefined, where: string): string | undefined => {
    if (!entry || entry.limit === null || entry.limit === undefined) return undefined;
    const free = entry.limit - (entry.usage ?? 0);
    return free >= options.gpusPerNode
      ? undefined
      : `${entry.metric} is ${entry.limit} ${where} (${entry.usage ?? 0} in use), and a node needs ${options.gpusPerNode}`;
  };
  const global = shortOf(quotaOf(project, ALL_REGIONS_GPU_QUOTA), "in all regions");
  const reasons: string[] = global !== undefined ? [global] : [];
  const admitted = options.markets.filter((market) => {
    const metric = gpuQuotaMetric(options.acceleratorType, market);
    const regional =
      metric !== undefined ? shortOf(quotaOf(region, metric), `in ${options.region}`) : undefined;
    if (regional !== undefined) reasons.push(`${market}: ${regional}`);
    return global === undefined && regional === undefined;
  });
  if (admitted.length === 0 && reasons.length > 0)
    throw quotaError(
      clients.project,
      `${options.acceleratorType} in ${options.region}: ${reasons.join("; ")}`,
    );
  return admitted;
}
