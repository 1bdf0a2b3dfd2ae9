/**
 * Compute Engine's GPU accelerator types as Skyward's accelerators: the canonical name, memory per
 * GPU, the GPU's name in the Cloud Billing Catalog (its SKUs' descriptions), and, for GPUs attached
 * to N1 machine types, how many vCPUs each GPU allows
 * (https://cloud.google.com/compute/docs/gpus, https://cloud.google.com/compute/docs/gpus#n1-gpus).
 */

/** One accelerator type. */
export interface GcpAcceleratorType {
  /** Skyward's canonical name (`T4`). */
  readonly name: string;
  /** Memory per GPU, GB. */
  readonly memoryGb: number;
  /**
   * The GPU's names in the Catalog API's SKU descriptions (`Nvidia Tesla T4`), first found wins: some
   * GPUs have two (H100 Mega: "Nvidia H100 80GB Mega GPU" in some regions, "Nvidia H100 80GB Plus GPU"
   * in others, as SkyPilot's catalogue fetcher notes).
   */
  readonly skuNames: readonly string[];
  /** For GPUs attached to N1 VMs: the most vCPUs per GPU. Undefined for GPUs built into their machine types. */
  readonly n1VcpusPerGpu?: number;
  /**
   * The board, where Google's pages say it: the A2 series' A100s (HGX A100, NVSwitch), the A3
   * series' H100s and H200s are SXM (https://cloud.google.com/compute/docs/accelerator-optimized-machines,
   * https://cloud.google.com/compute/docs/gpus). Left out where the pages do not say (V100, P100),
   * so the offer does not claim one.
   */
  readonly formFactor?: string;
}

/** Compute Engine accelerator type names (`acceleratorTypes[].name`) and what they are. */
export const GCP_ACCELERATOR_TYPES: Readonly<Record<string, GcpAcceleratorType>> = Object.freeze({
  // T4: up to 48 vCPUs per GPU on N1 (https://cloud.google.com/compute/docs/gpus#t4-gpus).
  "nvidia-tesla-t4": { name: "T4", memoryGb: 16, skuNames: ["Nvidia Tesla T4"], n1VcpusPerGpu: 48 },
  "nvidia-tesla-v100": { name: "V100", memoryGb: 16, skuNames: ["Nvidia Tesla V100"], n1VcpusPerGpu: 12 },
  "nvidia-tesla-p100": { name: "P100", memoryGb: 16, skuNames: ["Nvidia Tesla P100"], n1VcpusPerGpu: 16 },
  "nvidia-tesla-p4": { name: "P4", memoryGb: 8, skuNames: ["Nvidia Tesla P4"], n1VcpusPerGpu: 24 },
  "nvidia-l4": { name: "L4", memoryGb: 24, skuNames: ["Nvidia L4"] },
  "nvidia-tesla-a100": { name: "A100", memoryGb: 40, skuNames: ["Nvidia Tesla A100"], formFactor: "SXM" },
  "nvidia-a100-80gb": { name: "A100", memoryGb: 80, skuNames: ["Nvidia Tesla A100 80GB"], formFactor: "SXM" },
  "nvidia-h100-80gb": { name: "H100", memoryGb: 80, skuNames: ["Nvidia H100 80GB"], formFactor: "SXM" },
  "nvidia-h100-mega-80gb": {
    name: "H100",
    memoryGb: 80,
    skuNames: ["Nvidia H100 80GB Mega", "Nvidia H100 80GB Plus"],
    formFactor: "SXM",
  },
  "nvidia-h200-141gb": {
    name: "H200",
    memoryGb: 141,
    skuNames: ["H200 141GB", "Nvidia H200 141GB"],
    formFactor: "SXM",
  },
});

/** GPU counts a VM may have (https://cloud.google.com/compute/docs/gpus). */
export const GPU_COUNTS: readonly number[] = Object.freeze([1, 2, 4, 8]);
