/**
 * Compute Engine prices from the Cloud Billing Catalog API: the public list prices of the Compute
 * Engine service's SKUs (`GET /v1/services/6F81-5844-456A/skus`,
 * https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list), read live rather than
 * from a table, so they follow Google's price changes and every region's own prices.
 *
 * Compute Engine bills a VM by its parts: vCPUs ("N1 Predefined Instance Core running in Americas",
 * per hour), memory ("… Instance Ram …", per GiB-hour) and GPUs ("Nvidia Tesla T4 GPU running in
 * Americas", per GPU-hour) and, for the machine types that come with it, local SSD ("SSD backed Local
 * Storage in Americas", per GiB-month); a SKU whose `category.usageType` is `Preemptible` is the spot price of
 * the same part ("Spot Preemptible …"). A machine type's price is the sum of its parts in its region
 * (https://cloud.google.com/compute/vm-instance-pricing, https://cloud.google.com/compute/gpus-pricing).
 */
import { ProvisionError } from "@skyward/core";
import { roundPrice } from "@skyward/provider-utils";
import { z } from "zod";
import { type GcpClients, PROVIDER_NAME } from "./gcp-api.js";

/** The Compute Engine service's id in the Cloud Billing Catalog. */
export const COMPUTE_ENGINE_SERVICE_ID = "6F81-5844-456A";

const moneySchema = z.object({
  currencyCode: z.string().optional(),
  units: z.union([z.string(), z.number()]).optional(),
  nanos: z.number().optional(),
});

const skuSchema = z.object({
  description: z.string(),
  category: z.object({ usageType: z.string().optional() }).optional(),
  serviceRegions: z.array(z.string()).optional(),
  pricingInfo: z
    .array(
      z.object({
        pricingExpression: z.object({
          usageUnit: z.string().optional(),
          tieredRates: z
            .array(z.object({ startUsageAmount: z.number().optional(), unitPrice: moneySchema }))
            .optional(),
        }),
      }),
    )
    .optional(),
});

const pageSchema = z.object({ skus: z.array(skuSchema).optional(), nextPageToken: z.string().optional() });

type Sku = z.output<typeof skuSchema>;

/** Hourly USD prices of one region's parts, by market. */
export interface PartPrices {
  /** Per vCPU-hour, by machine series (`N1`, `E2`, `G2`…). */
  readonly core: ReadonlyMap<string, number>;
  /** Per GiB-hour of memory, by machine series. */
  readonly ram: ReadonlyMap<string, number>;
  /** Per GPU-hour, by the GPU's SKU name (`Nvidia Tesla T4`). */
  readonly gpu: ReadonlyMap<string, number>;
  /** Per GiB-hour of local SSD ("SSD backed Local Storage"), or undefined when the Catalog has none. */
  readonly localSsd?: number;
}

/** Every region's part prices, on demand and spot. */
export interface PriceBook {
  /** The parts' prices in `region`, for `market`. */
  parts(region: string, market: "spot" | "on-demand"): PartPrices;
  /** When the SKUs were read (ISO 8601). */
  readonly asOf: string;
}

const CORE = /^(?:Spot Preemptible )?([A-Za-z0-9]+) (?:Predefined )?Instance Core running in /;
const RAM = /^(?:Spot Preemptible )?([A-Za-z0-9]+) (?:Predefined )?Instance Ram running in /;
const GPU = /^(?:Spot Preemptible )?(.+?) GPU (?:running in|attached to) /;
/** "SSD backed Local Storage in Americas", "… attached to Spot Preemptible VMs in Americas". */
const LOCAL_SSD = /^SSD backed Local Storage (?:attached to Spot Preemptible VMs )?in /;
/** Hours in the month the Catalog's per-month prices are per (https://cloud.google.com/compute/disks-image-pricing). */
const HOURS_PER_MONTH = 730;

function unitPrice(sku: Sku): number | undefined {
  const rates = sku.pricingInfo?.[0]?.pricingExpression.tieredRates ?? [];
  const first = [...rates].sort((a, b) => (a.startUsageAmount ?? 0) - (b.startUsageAmount ?? 0))[0];
  if (!first) return undefined;
  const money = first.unitPrice;
  if (money.currencyCode !== undefined && money.currencyCode !== "USD") return undefined;
  return Number(money.units ?? 0) + (money.nanos ?? 0) / 1e9;
}

/** Builds the price book from the catalog's SKUs. */
export function priceBookFromSkus(skus: readonly Sku[], asOf: string): PriceBook {
  const books = new Map<
    string,
    { core: Map<string, number>; ram: Map<string, number>; gpu: Map<string, number>; localSsd?: number }
  >();
  const book = (region: string, market: string) => {
    const key = `${region} ${market}`;
    let found = books.get(key);
    if (!found) {
      found = { core: new Map(), ram: new Map(), gpu: new Map() };
      books.set(key, found);
    }
    return found;
  };
  for (const sku of skus) {
    const usage = sku.category?.usageType;
    const market = usage === "OnDemand" ? "on-demand" : usage === "Preemptible" ? "spot" : undefined;
    if (!market) continue;
    const price = unitPrice(sku);
    if (price === undefined) continue;
    const core = CORE.exec(sku.description);
    const ram = core ? null : RAM.exec(sku.description);
    const gpu = core || ram ? null : GPU.exec(sku.description);
    const localSsd = LOCAL_SSD.test(sku.description);
    const perMonth = sku.pricingInfo?.[0]?.pricingExpression.usageUnit === "GiBy.mo";
    for (const region of sku.serviceRegions ?? []) {
      const parts = book(region, market);
      if (core?.[1]) parts.core.set(core[1].toUpperCase(), price);
      else if (ram?.[1]) parts.ram.set(ram[1].toUpperCase(), price);
      else if (gpu?.[1]) parts.gpu.set(gpu[1], price);
      else if (localSsd) parts.localSsd = perMonth ? price / HOURS_PER_MONTH : price;
    }
  }
  const empty: PartPrices = { core: new Map(), ram: new Map(), gpu: new Map() };
  return {
    asOf,
    parts: (region, market) => books.get(`${region} ${market}`) ?? empty,
  };
}

/** What a VM is made of, for pricing. */
export interface VmParts {
  /** The machine type's series (`n1-standard-4` → `N1`). */
  readonly series: string;
  readonly vcpus: number;
  /** Memory, GiB. */
  readonly memoryGib: number;
  /** The GPUs' SKU names (the Catalog may use either) and count, or null. */
  readonly gpu: { readonly skuNames: readonly string[]; readonly count: number } | null;
  /** Local SSD that comes with the machine type, GB (billed beside it). */
  readonly localSsdGb?: number;
}

/** The VM's hourly price in `region` for `market`, or null when a part has no price there. */
export function vmPrice(
  book: PriceBook,
  region: string,
  market: "spot" | "on-demand",
  vm: VmParts,
): number | null {
  const parts = book.parts(region, market);
  const core = parts.core.get(vm.series);
  const ram = parts.ram.get(vm.series);
  if (core === undefined || ram === undefined) return null;
  let total = core * vm.vcpus + ram * vm.memoryGib;
  if (vm.gpu) {
    const gpu = vm.gpu.skuNames.map((name) => parts.gpu.get(name)).find((price) => price !== undefined);
    if (gpu === undefined) return null;
    total += gpu * vm.gpu.count;
  }
  if ((vm.localSsdGb ?? 0) > 0) {
    // Bundled, so billed: a VM whose local SSD has no price has no known price.
    if (parts.localSsd === undefined) return null;
    total += parts.localSsd * (vm.localSsdGb ?? 0);
  }
  return roundPrice(total);
}

/** Reads every Compute Engine SKU (all pages) from the Catalog API. */
export async function fetchPriceBook(clients: GcpClients, signal: AbortSignal): Promise<PriceBook> {
  const skus: Sku[] = [];
  let pageToken = "";
  do {
    const raw = await clients.billing(
      `/v1/services/${COMPUTE_ENGINE_SERVICE_ID}/skus`,
      { currencyCode: "USD", pageSize: "5000", ...(pageToken ? { pageToken } : {}) },
      signal,
    );
    const parsed = pageSchema.safeParse(raw);
    if (!parsed.success)
      throw new ProvisionError({
        provider: PROVIDER_NAME,
        message: `the Cloud Billing API answered an unexpected SKU list: ${parsed.error.issues[0]?.message ?? "invalid"}`,
      });
    const page = parsed.data;
    skus.push(...(page.skus ?? []));
    pageToken = page.nextPageToken ?? "";
  } while (pageToken);
  return priceBookFromSkus(skus, new Date().toISOString());
}
