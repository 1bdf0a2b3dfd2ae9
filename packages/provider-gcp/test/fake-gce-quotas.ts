/**
 * The fake's GPU quotas, as Compute Engine keeps them: a VM's GPUs (attached, or built into its
 * machine type) count against the project's `GPUS_ALL_REGIONS` and its region's per-model metric
 * (`NVIDIA_T4_GPUS`, `PREEMPTIBLE_NVIDIA_T4_GPUS` for spot), reported by `projects.get` and
 * `regions.get` as Quota resources, and an insert past one is refused at once with HTTP 403
 * `quotaExceeded` (https://cloud.google.com/compute/resource-usage#gpu_quota,
 * https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-quota).
 */
import { googleError } from "./fake-gce-answers.js";
import { machineTypes } from "./fixtures.js";

/** The VMs the quotas count: the Instance resources, each with its `zone` URL. */
type CountedInstance = Record<string, unknown> & { zone: string };

/** The GPU quotas over `instances`, with `limits` set by the test (unset: 64). */
export function gpuQuotas(
  instances: ReadonlyMap<string, CountedInstance>,
  limits: ReadonlyMap<string, number>,
) {
  /** A VM's GPUs: its accelerator type (attached or built into its machine type) and count. */
  const gpusOf = (
    zone: string,
    body: Record<string, unknown>,
  ): { type: string; count: number } | undefined => {
    const guest = (body.guestAccelerators ?? []) as { acceleratorType?: string; acceleratorCount?: number }[];
    const attached = guest[0];
    if (attached)
      return {
        type: String(attached.acceleratorType ?? "")
          .split("/")
          .pop() as string,
        count: attached.acceleratorCount ?? 0,
      };
    const machineType = String(body.machineType ?? "")
      .split("/")
      .pop();
    const built = machineTypes(zone).find((entry) => entry.name === machineType)?.accelerators?.[0];
    return built ? { type: built.guestAcceleratorType, count: built.guestAcceleratorCount } : undefined;
  };
  // Quota metrics of the GPU types (https://cloud.google.com/compute/resource-usage#gpu_quota).
  const QUOTA_METRICS: Record<string, string> = {
    "nvidia-tesla-t4": "NVIDIA_T4_GPUS",
    "nvidia-tesla-v100": "NVIDIA_V100_GPUS",
    "nvidia-l4": "NVIDIA_L4_GPUS",
    "nvidia-tesla-a100": "NVIDIA_A100_GPUS",
  };
  const metricOf = (type: string, spot: boolean) =>
    QUOTA_METRICS[type] ? `${spot ? "PREEMPTIBLE_" : ""}${QUOTA_METRICS[type]}` : undefined;
  const limitOf = (key: string) => limits.get(key) ?? 64;
  /** The GPUs in use: all, or those of one region and quota metric. */
  const gpuUsage = (region?: string, metric?: string) =>
    [...instances.values()].reduce((total, instance) => {
      const zone = instance.zone.split("/").pop() as string;
      const gpus = gpusOf(zone, instance);
      if (!gpus) return total;
      const spot =
        (instance.scheduling as { provisioningModel?: string } | undefined)?.provisioningModel === "SPOT";
      if (
        region !== undefined &&
        (zone.replace(/-[a-z]$/, "") !== region || metricOf(gpus.type, spot) !== metric)
      )
        return total;
      return total + gpus.count;
    }, 0);
  /** The `quotas` of a region (its GPU metrics) or of the project (`GPUS_ALL_REGIONS`): Quota resources. */
  const quotasOf = (region?: string) =>
    region === undefined
      ? [{ metric: "GPUS_ALL_REGIONS", limit: limitOf("GPUS_ALL_REGIONS"), usage: gpuUsage() }]
      : Object.values(QUOTA_METRICS).flatMap((metric) =>
          [metric, `PREEMPTIBLE_${metric}`].map((name) => ({
            metric: name,
            limit: limitOf(`${region} ${name}`),
            usage: gpuUsage(region, name),
          })),
        );

  /** The 403 `quotaExceeded` answer for an insert of `body` in `zone` past a GPU quota, or undefined. */
  const refusal = (zone: string, body: Record<string, unknown>, spot: boolean) => {
    const gpus = gpusOf(zone, body);
    if (gpus) {
      const region = zone.replace(/-[a-z]$/, "");
      if (gpuUsage() + gpus.count > limitOf("GPUS_ALL_REGIONS"))
        return googleError(
          403,
          `Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: ${limitOf("GPUS_ALL_REGIONS").toFixed(1)} globally.`,
          "quotaExceeded",
        );
      const metric = metricOf(gpus.type, spot);
      if (metric && gpuUsage(region, metric) + gpus.count > limitOf(`${region} ${metric}`))
        return googleError(
          403,
          `Quota '${metric}' exceeded.  Limit: ${limitOf(`${region} ${metric}`).toFixed(1)} in region ${region}.`,
          "quotaExceeded",
        );
    }
    return undefined;
  };
  return { quotasOf, refusal };
}
