/**
 * Vast.ai's offers: the search query JSON built from an offer query and the settings (the country asked
 * of the search itself), both markets searched (`on-demand`, and `bid` priced at the minimum bid), and
 * each ask turned into an {@link Offer} priced in each market by its own search.
 */
import type { Offer, OfferQuery } from "@skyward/core/contract";
import {
  acceleratorFromNames,
  filterOffers,
  machineOffer,
  type PairedListing,
  pairedListings,
  roundPrice,
} from "@skyward/provider-utils";
import type { VastClient, VastOffer } from "./vastai-api.js";
import type { ParsedSettings } from "./vastai-settings.js";

/** What an offer of this provider carries in {@link Offer.specific}. */
export interface VastOfferData {
  /** The ask to rent (`PUT /asks/{askId}/`). */
  readonly askId: number;
  readonly machineId: number | null;
  /** Vast.ai's name of the GPU (`RTX 4090`). */
  readonly gpuName: string;
  readonly numGpus: number;
  /** The bid placed for an interruptible instance, $/h; null when the offer takes no bids. */
  readonly bid: number | null;
  readonly reliability: number | null;
  readonly geolocation: string | null;
}

/**
 * The names Vast.ai may list a catalog accelerator under (`RTX_4090` → `RTX 4090`, `RTX 4090D`…; `A100`
 * → `A100 PCIE`, `A100 SXM4`…). Over-inclusive on purpose: every result is checked again against the
 * canonical name.
 */
export function vastGpuNames(canonical: string): string[] {
  const base = canonical.replaceAll("_", " ");
  // The boards ("A100 SXM4") and the name joined ("RTX 6000Ada", "RTX 4090D").
  const suffixes = [" PCIE", " SXM", " SXM2", " SXM4", " SXM5", " NVL", " D", " S", " X", "D", "S", "X"];
  const joined = base.replace(/ (\S+)$/, "$1");
  const names = [base, `Tesla ${base}`, `Q ${base}`, joined, ...suffixes.map((suffix) => base + suffix)];
  return [...new Set(names)];
}

/**
 * The two-letter country a region names (`"DE"`, `"Texas, US"` → `US`), the form the search's
 * `geolocation` filter takes ("Two letter country code", vast-cli's `search offers` help); undefined for none.
 */
function countryCode(region: string | undefined): string | undefined {
  const code = region?.split(",").at(-1)?.trim().toUpperCase();
  return code !== undefined && /^[A-Z]{2}$/.test(code) ? code : undefined;
}

function geolocationMatches(geolocation: string | null | undefined, wanted: string): boolean {
  const normal = (text: string) => text.trim().toUpperCase();
  return !!geolocation && [countryCode(geolocation), normal(geolocation)].includes(normal(wanted));
}

/** The disk each instance gets, GB: the setting, raised by the spec's `diskGb`. */
export const diskFor = (settings: ParsedSettings, diskGb: number | undefined) =>
  Math.max(settings.diskGb, Math.ceil(diskGb ?? 0));

/** The offers of the settings' searches for a query (none for CPU-only nodes). */
export function vastOffers(settings: ParsedSettings, client: VastClient) {
  /** The search query JSON for `query` in one market (`type`). */
  function searchBody(query: OfferQuery, type: "on-demand" | "bid") {
    const accelerator = query.accelerator as NonNullable<OfferQuery["accelerator"]>;
    const diskGb = diskFor(settings, query.diskGb);
    const body: Record<string, unknown> = {
      rentable: { eq: true },
      rented: { eq: false },
      ...(settings.verifiedOnly ? { verified: { eq: true } } : {}),
      type,
      gpu_name: { in: vastGpuNames(accelerator.name) },
      num_gpus: { eq: accelerator.count },
      reliability: { gte: settings.minReliability },
      cuda_max_good: { gte: settings.minCuda },
      allocated_storage: diskGb,
      disk_space: { gte: diskGb },
      order: [["dph_total", "asc"]],
      limit: settings.searchLimit,
    };
    if (accelerator.memoryGb !== undefined)
      body.gpu_ram = { gte: Math.round(accelerator.memoryGb * 1024 * 0.97) };
    if (query.vcpus !== undefined) body.cpu_cores_effective = { gte: query.vcpus };
    if (query.memoryGb !== undefined) body.cpu_ram = { gte: Math.round(query.memoryGb * 1024) };
    if (query.architecture !== undefined)
      body.cpu_arch = { eq: query.architecture === "arm64" ? "arm64" : "amd64" };
    if (settings.ssh === "direct") body.direct_port_count = { gte: 1 };
    // Asked of the search itself: filtered afterwards, the cheapest `searchLimit` offers worldwide may
    // hold none of the country's though it has some.
    const country = countryCode(query.region ?? settings.geolocation);
    if (country !== undefined) body.geolocation = { eq: country };
    // In either search `dph_total` is that market's price (a bid search's at the minimum bid).
    if (query.maxHourlyCost !== undefined) body.dph_total = { lte: query.maxHourlyCost };
    return body;
  }

  /**
   * The offer of one ask, from its on-demand search result (the on-demand price: `dph_total`) and its bid
   * search result (`dph_total` there is the price at the minimum bid: the bid placed is `min_bid` ×
   * `bidMultiplier`, and the rest of `dph_total`, storage and the like, is added to it). Either may be
   * missing: that market then has no price.
   */
  function toOffer({ onDemand, spot: bidden }: PairedListing<VastOffer>): Offer {
    const raw = (onDemand ?? bidden) as VastOffer;
    const minBid = bidden?.min_bid ?? null;
    const bid = minBid !== null && minBid > 0 ? roundPrice(minBid * settings.bidMultiplier) : null;
    const extras = bidden?.dph_total != null && minBid !== null ? Math.max(0, bidden.dph_total - minBid) : 0;
    const onDemandPrice =
      onDemand?.dph_total != null && onDemand.dph_total > 0 ? roundPrice(onDemand.dph_total) : null;
    // A partial rental (`gpu_frac` < 1) gets its share of the machine's RAM, as of its CPUs.
    const share = raw.gpu_frac !== null && raw.gpu_frac > 0 && raw.gpu_frac < 1 ? raw.gpu_frac : 1;
    // gpu_name says the board when there are several ("H100 SXM", "H100 PCIE", "H100 NVL", "A100 SXM4").
    const accelerator = acceleratorFromNames([raw.gpu_name], Math.round((raw.gpu_ram ?? 0) / 1024));
    return machineOffer({
      id: `vastai:${raw.id}`,
      provider: "vastai",
      instanceType: `${raw.num_gpus}x ${raw.gpu_name}${raw.machine_id ? ` (machine ${raw.machine_id})` : ""}`,
      accelerator: accelerator ? { ...accelerator, count: raw.num_gpus } : null,
      vcpus: raw.cpu_cores_effective ?? raw.cpu_cores ?? 0,
      memoryGb: raw.cpu_ram === null ? 0 : Number(((raw.cpu_ram * share) / 1024).toFixed(4)),
      ...(raw.disk_space !== null ? { diskGb: Math.floor(raw.disk_space) } : {}),
      architecture: /^(arm64|aarch64)$/i.test(raw.cpu_arch ?? "") ? "arm64" : "x86_64",
      region: raw.geolocation?.trim() || "unknown",
      spotPrice: bid === null ? null : roundPrice(bid + extras),
      onDemandPrice,
      billingUnit: "second",
      specific: {
        askId: raw.id,
        machineId: raw.machine_id ?? null,
        gpuName: raw.gpu_name,
        numGpus: raw.num_gpus,
        bid,
        reliability: raw.reliability2 ?? raw.reliability,
        geolocation: raw.geolocation ?? null,
      } satisfies VastOfferData,
    });
  }

  /** One search per market the allocation may use, joined by ask. */
  return async (query: OfferQuery, signal: AbortSignal) => {
    if (!query.accelerator) return [];
    const region = query.region ?? settings.geolocation;
    const market = async (type: "on-demand" | "bid") => {
      const purpose = type === "bid" ? "searching interruptible offers" : "searching offers";
      const { offers } = await client.search({ body: searchBody(query, type), purpose }, signal);
      return offers.filter(
        (raw) =>
          (raw.reliability2 ?? raw.reliability ?? 1) >= settings.minReliability &&
          (region === undefined || geolocationMatches(raw.geolocation, region)),
      );
    };
    // The accelerator's name and count are checked of the offers (`filterOffers`).
    const onDemand = query.allocation !== "spot" ? await market("on-demand") : [];
    const spot = query.allocation !== "on-demand" ? await market("bid") : [];
    return filterOffers(pairedListings({ onDemand, spot }, (raw) => raw.id).map(toOffer), query);
  };
}
