/**
 * The fake Compute Engine's data, in the shapes of Google's documented REST answers; each block names
 * the reference page its fields come from. Prices are illustrative values in the Catalog API's shape,
 * not Google's current prices.
 */

export const PROJECT = "skyward-test-project";
const BASE = `https://www.googleapis.com/compute/v1/projects/${PROJECT}`;

// Zone resource: https://cloud.google.com/compute/docs/reference/rest/v1/zones (zones.list answers
// {"kind": "compute#zoneList", "items": [Zone]}: https://cloud.google.com/compute/docs/reference/rest/v1/zones/list).
export const ZONES = ["us-central1-a", "us-central1-b", "europe-west4-a"].map((name, index) => ({
  kind: "compute#zone",
  id: String(2000 + index),
  creationTimestamp: "1969-12-31T16:00:00.000-08:00",
  name,
  description: name,
  status: "UP",
  region: `${BASE}/regions/${name.replace(/-[a-z]$/, "")}`,
  selfLink: `${BASE}/zones/${name}`,
  availableCpuPlatforms: ["Intel Broadwell", "AMD Milan"],
  supportsPzs: false,
}));

interface MachineShape {
  name: string;
  guestCpus: number;
  memoryMb: number;
  isSharedCpu?: boolean;
  accelerators?: { guestAcceleratorType: string; guestAcceleratorCount: number }[];
}

// MachineType resource: https://cloud.google.com/compute/docs/reference/rest/v1/machineTypes
// (machineTypes.list answers {"kind": "compute#machineTypeList", "items": [MachineType]}:
// https://cloud.google.com/compute/docs/reference/rest/v1/machineTypes/list). Shapes as listed on
// https://cloud.google.com/compute/docs/general-purpose-machines and
// https://cloud.google.com/compute/docs/accelerator-optimized-machines.
const MACHINE_SHAPES: Record<string, MachineShape[]> = {
  "us-central1-a": [
    { name: "e2-micro", guestCpus: 2, memoryMb: 1024, isSharedCpu: true },
    { name: "e2-standard-2", guestCpus: 2, memoryMb: 8192 },
    { name: "e2-standard-4", guestCpus: 4, memoryMb: 16384 },
    { name: "n1-standard-1", guestCpus: 1, memoryMb: 3840 },
    { name: "n1-standard-4", guestCpus: 4, memoryMb: 15360 },
    { name: "n1-standard-8", guestCpus: 8, memoryMb: 30720 },
    { name: "n1-standard-32", guestCpus: 32, memoryMb: 122880 },
    { name: "n1-highmem-4", guestCpus: 4, memoryMb: 26624 },
    // No price in the Catalog fixture below: never offered.
    { name: "n2-standard-4", guestCpus: 4, memoryMb: 16384 },
    // Hyperdisk only (https://cloud.google.com/compute/docs/general-purpose-machines#c4_series).
    { name: "c4-standard-4", guestCpus: 4, memoryMb: 15360 },
    {
      name: "g2-standard-4",
      guestCpus: 4,
      memoryMb: 16384,
      accelerators: [{ guestAcceleratorType: "nvidia-l4", guestAcceleratorCount: 1 }],
    },
    {
      name: "g2-standard-24",
      guestCpus: 24,
      memoryMb: 98304,
      accelerators: [{ guestAcceleratorType: "nvidia-l4", guestAcceleratorCount: 2 }],
    },
    {
      name: "a2-highgpu-1g",
      guestCpus: 12,
      memoryMb: 87040,
      accelerators: [{ guestAcceleratorType: "nvidia-tesla-a100", guestAcceleratorCount: 1 }],
    },
    {
      name: "a2-highgpu-2g",
      guestCpus: 24,
      memoryMb: 174080,
      accelerators: [{ guestAcceleratorType: "nvidia-tesla-a100", guestAcceleratorCount: 2 }],
    },
  ],
  "us-central1-b": [
    { name: "e2-standard-2", guestCpus: 2, memoryMb: 8192 },
    { name: "n1-standard-4", guestCpus: 4, memoryMb: 15360 },
  ],
  "europe-west4-a": [{ name: "e2-standard-2", guestCpus: 2, memoryMb: 8192 }],
};

export function machineTypes(zone: string) {
  return (MACHINE_SHAPES[zone] ?? []).map((shape, index) => ({
    kind: "compute#machineType",
    id: String(1_000_000 + index),
    creationTimestamp: "1969-12-31T16:00:00.000-08:00",
    name: shape.name,
    description: `${shape.guestCpus} vCPUs, ${shape.memoryMb / 1024} GB RAM`,
    guestCpus: shape.guestCpus,
    memoryMb: shape.memoryMb,
    imageSpaceGb: 0,
    maximumPersistentDisks: 128,
    maximumPersistentDisksSizeGb: "263168",
    zone,
    selfLink: `${BASE}/zones/${zone}/machineTypes/${shape.name}`,
    isSharedCpu: shape.isSharedCpu ?? false,
    architecture: "X86_64",
    ...(shape.accelerators ? { accelerators: shape.accelerators } : {}),
  }));
}

// AcceleratorType resource: https://cloud.google.com/compute/docs/reference/rest/v1/acceleratorTypes
// (acceleratorTypes.list: https://cloud.google.com/compute/docs/reference/rest/v1/acceleratorTypes/list);
// the GPUs per zone: https://cloud.google.com/compute/docs/gpus/gpu-regions-zones.
const ACCELERATORS: Record<string, { name: string; description: string; maximumCardsPerInstance: number }[]> =
  {
    "us-central1-a": [
      { name: "nvidia-tesla-t4", description: "NVIDIA T4", maximumCardsPerInstance: 4 },
      { name: "nvidia-tesla-v100", description: "NVIDIA V100", maximumCardsPerInstance: 8 },
      { name: "nvidia-l4", description: "NVIDIA L4", maximumCardsPerInstance: 8 },
      { name: "nvidia-tesla-a100", description: "NVIDIA A100 40GB", maximumCardsPerInstance: 16 },
    ],
    "us-central1-b": [{ name: "nvidia-tesla-t4", description: "NVIDIA T4", maximumCardsPerInstance: 4 }],
    "europe-west4-a": [],
  };

export function acceleratorTypes(zone: string) {
  return (ACCELERATORS[zone] ?? []).map((entry, index) => ({
    kind: "compute#acceleratorType",
    id: String(10_000 + index),
    creationTimestamp: "1969-12-31T16:00:00.000-08:00",
    ...entry,
    zone: `${BASE}/zones/${zone}`,
    selfLink: `${BASE}/zones/${zone}/acceleratorTypes/${entry.name}`,
  }));
}

/** One SKU's hourly price in USD, by description, usage type and regions. */
function sku(description: string, usageType: "OnDemand" | "Preemptible", price: number, unit = "h") {
  const units = Math.floor(price);
  const nanos = Math.round((price - units) * 1e9);
  const id = Math.abs(
    [...description, ...usageType].reduce((hash, char) => (hash * 31 + char.charCodeAt(0)) | 0, 7),
  )
    .toString(16)
    .toUpperCase()
    .padStart(8, "0");
  const resourceGroup = description.includes("GPU") ? "GPU" : description.includes("Ram") ? "RAM" : "CPU";
  return {
    name: `services/6F81-5844-456A/skus/${id.slice(0, 4)}-${id.slice(4, 8)}-0000`,
    skuId: `${id.slice(0, 4)}-${id.slice(4, 8)}-0000`,
    description,
    category: { serviceDisplayName: "Compute Engine", resourceFamily: "Compute", resourceGroup, usageType },
    serviceRegions: ["us-central1"],
    pricingInfo: [
      {
        summary: "",
        pricingExpression: {
          usageUnit: unit,
          displayQuantity: 1,
          tieredRates: [
            { startUsageAmount: 0, unitPrice: { currencyCode: "USD", units: String(units), nanos } },
          ],
          usageUnitDescription: unit === "h" ? "hour" : "gibibyte hour",
          baseUnit: unit === "h" ? "s" : "By.s",
          baseUnitDescription: unit === "h" ? "second" : "byte second",
          baseUnitConversionFactor: unit === "h" ? 3600 : 3865470566400,
        },
        currencyConversionRate: 1,
        effectiveTime: "2026-11-01T00:00:00Z",
      },
    ],
    serviceProviderName: "Google",
    geoTaxonomy: { type: "REGIONAL", regions: ["us-central1"] },
  };
}

// Sku resource and services.skus.list's answer ({"skus": [Sku], "nextPageToken": ""}):
// https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list and
// https://cloud.google.com/billing/v1/how-tos/catalog-api (descriptions as the Catalog writes them,
// "N1 Predefined Instance Core running in Americas", "Spot Preemptible …" for spot). Split over two
// pages to exercise nextPageToken.
export const SKU_PAGES = [
  [
    sku("N1 Predefined Instance Core running in Americas", "OnDemand", 0.031611),
    sku("N1 Predefined Instance Ram running in Americas", "OnDemand", 0.004237, "GiBy.h"),
    sku("Spot Preemptible N1 Predefined Instance Core running in Americas", "Preemptible", 0.00698),
    sku("Spot Preemptible N1 Predefined Instance Ram running in Americas", "Preemptible", 0.000936, "GiBy.h"),
    sku("C4 Instance Core running in Americas", "OnDemand", 0.03465),
    sku("C4 Instance Ram running in Americas", "OnDemand", 0.003938, "GiBy.h"),
    sku("E2 Instance Core running in Americas", "OnDemand", 0.021811),
    sku("E2 Instance Ram running in Americas", "OnDemand", 0.002923, "GiBy.h"),
    sku("Spot Preemptible E2 Instance Core running in Americas", "Preemptible", 0.006543),
    sku("Spot Preemptible E2 Instance Ram running in Americas", "Preemptible", 0.000877, "GiBy.h"),
    // A commitment price is neither on demand nor spot: ignored.
    {
      ...sku("Commitment v1: E2 Cpu in Americas for 1 Year", "OnDemand", 0.01374),
      category: { usageType: "Commit1Yr" },
    },
  ],
  [
    sku("G2 Instance Core running in Americas", "OnDemand", 0.024988),
    sku("G2 Instance Ram running in Americas", "OnDemand", 0.002927, "GiBy.h"),
    sku("Spot Preemptible G2 Instance Core running in Americas", "Preemptible", 0.009995),
    sku("Spot Preemptible G2 Instance Ram running in Americas", "Preemptible", 0.001171, "GiBy.h"),
    sku("A2 Instance Core running in Americas", "OnDemand", 0.031611),
    sku("A2 Instance Ram running in Americas", "OnDemand", 0.004237, "GiBy.h"),
    sku("Spot Preemptible A2 Instance Core running in Americas", "Preemptible", 0.011064),
    sku("Spot Preemptible A2 Instance Ram running in Americas", "Preemptible", 0.001483, "GiBy.h"),
    sku("Nvidia Tesla T4 GPU running in Americas", "OnDemand", 0.35),
    sku("Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas", "Preemptible", 0.14),
    sku("Nvidia Tesla V100 GPU running in Americas", "OnDemand", 2.48),
    sku("Nvidia Tesla V100 GPU attached to Spot Preemptible VMs running in Americas", "Preemptible", 0.992),
    sku("Nvidia L4 GPU running in Americas", "OnDemand", 0.56),
    sku("Nvidia L4 GPU attached to Spot Preemptible VMs running in Americas", "Preemptible", 0.224),
    sku("Nvidia Tesla A100 GPU running in Americas", "OnDemand", 2.933908),
    sku(
      "Nvidia Tesla A100 GPU attached to Spot Preemptible VMs running in Americas",
      "Preemptible",
      1.173563,
    ),
  ],
];
