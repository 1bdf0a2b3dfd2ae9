/**
 * What Compute Engine's machine series differ in, for the provider: the boot disks they take, how
 * they may be bought, the local SSD some come with, and the series their vCPU and memory are priced
 * as in the Cloud Billing Catalog.
 */

/** A machine type's series (`n1-standard-4` → `N1`, `a2-highgpu-1g` → `A2`). */
export function seriesOf(machineType: string): string {
  return (machineType.split("-")[0] ?? "").toUpperCase();
}

/**
 * Series whose VMs take Hyperdisk only, no Persistent Disk (`pd-balanced` is refused):
 * https://cloud.google.com/compute/docs/disks/hyperdisks#machine-type-support and each series' page
 * (C4, C4A, C4D, N4, H3, M4, X4, A3 Ultra, A4, A4X, G4).
 */
const HYPERDISK_ONLY_SERIES = new Set(["C4", "C4A", "C4D", "N4", "H3", "M4", "X4", "A4", "A4X", "G4"]);

/** True when `machineType` boots from Hyperdisk only. */
export function takesHyperdiskOnly(machineType: string): boolean {
  return HYPERDISK_ONLY_SERIES.has(seriesOf(machineType)) || machineType.startsWith("a3-ultragpu-");
}

/**
 * The boot disk type of a VM: the `diskType` setting, else `hyperdisk-balanced` for the series that
 * take Hyperdisk only and `pd-balanced` for the rest. A Persistent Disk type set for a Hyperdisk-only
 * series is the reason returned instead, naming the setting.
 */
export function bootDiskType(machineType: string, setting: string | undefined): string | { refused: string } {
  if (!takesHyperdiskOnly(machineType)) return setting ?? "pd-balanced";
  if (setting === undefined || setting.startsWith("hyperdisk-")) return setting ?? "hyperdisk-balanced";
  return {
    refused: `${machineType} boots from Hyperdisk only, and the diskType setting is "${setting}": set diskType = "hyperdisk-balanced" or leave it unset`,
  };
}

/**
 * Machine types Google does not sell on demand (Compute Engine's consumption options per machine
 * type, https://cloud.google.com/compute/docs/instances/consumption-options, as gpuhunt reads them):
 * A3 High with fewer than 8 GPUs, A3 Ultra and A4 come as Spot or through reservations and
 * flex-start only. Their on-demand offers are dropped (no on-demand price), so no pool asks for them.
 */
export function soldOnDemand(machineType: string): boolean {
  if (/^a3-highgpu-[124]g$/.test(machineType)) return false;
  return !/^(a3-ultragpu|a4-highgpu|a4x-highgpu)-/.test(machineType);
}

/**
 * Local SSD that comes with a machine type, GB, and is billed beside its vCPUs, memory and GPUs
 * (https://cloud.google.com/compute/docs/accelerator-optimized-machines: A2 Ultra 375 GB per GPU,
 * A3 High and A3 Mega 6,000 GB with 8 GPUs).
 */
const BUNDLED_LOCAL_SSD_GB: Readonly<Record<string, number>> = Object.freeze({
  "a2-ultragpu-1g": 375,
  "a2-ultragpu-2g": 750,
  "a2-ultragpu-4g": 1500,
  "a2-ultragpu-8g": 3000,
  "a3-highgpu-8g": 6000,
  "a3-megagpu-8g": 6000,
});

/** The local SSD that comes with `machineType`, GB (0 for most). */
export function bundledLocalSsdGb(machineType: string): number {
  return BUNDLED_LOCAL_SSD_GB[machineType] ?? 0;
}

/**
 * The series whose Catalog SKUs price a machine type's vCPUs and memory: A3 Mega's are "A3Plus
 * Instance Core/Ram" (as SkyPilot's catalogue reads them), the rest their own series.
 */
export function pricingSeriesOf(machineType: string): string {
  return machineType.startsWith("a3-megagpu-") ? "A3PLUS" : seriesOf(machineType);
}
