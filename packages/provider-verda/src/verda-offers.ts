/** Verda's offers and the OS image of a type, chosen from its `supported_os` (README: Offers, OS images). */
import type { Offer, OfferQuery } from "@skyward/core/contract";
import { acceleratorFromNames, pricedOffer, refuseSetting, roundPrice } from "@skyward/provider-utils";
import type { VerdaCapacity, VerdaInstanceType } from "./verda-api.js";
import type { ParsedSettings } from "./verda-settings.js";

/** What an offer of this provider carries in {@link Offer.specific}. */
export interface VerdaOfferData {
  /** Verda's instance type (`1H100.80S.30V`). */
  readonly instanceType: string;
  /** The location code (`FIN-01`). */
  readonly location: string;
  /** The OS images the type can be deployed with (`supported_os`); empty when Verda lists none. */
  readonly supportedOs?: readonly string[];
}

type Availability = Readonly<Record<"onDemand" | "spot", VerdaCapacity>>;

/** The canonical accelerator of a type (`model`, else its GPU description `1x H100 SXM5 80GB`), with the form factor it says. */
function acceleratorOf(type: VerdaInstanceType) {
  const count = type.gpu?.number_of_gpus ?? 0;
  const described = /^\d+x\s+(.+?)\s+\d+GB$/.exec(type.gpu?.description ?? "")?.[1];
  const total = type.gpu_memory?.size_in_gigabytes ?? 0;
  const names = [type.model, described?.replace(/\s+SXM\d*/, ""), described];
  const named = count ? acceleratorFromNames(names, total > 0 ? total / count : 0) : null;
  return named ? { ...named, count } : null;
}

/** The offers of `types` in the locations with capacity (the query's region's alone) for the query's accelerator (or CPU types). */
export function toOffers(types: readonly VerdaInstanceType[], available: Availability, query: OfferQuery) {
  const codes = new Set([...available.onDemand, ...available.spot].map((entry) => entry.location_code));
  const locations = [...codes].filter((code) => query.region === undefined || code === query.region).sort();
  return types.flatMap((type) => {
    const accelerator = acceleratorOf(type);
    const wanted = query.accelerator
      ? accelerator?.name === query.accelerator.name && accelerator.count === query.accelerator.count
      : (type.gpu?.number_of_gpus ?? 0) === 0;
    if (!wanted) return [];
    const priceIn = (market: keyof Availability, code: string, price: number | null | undefined) => {
      const at = available[market].find((entry) => entry.location_code === code);
      return at?.availabilities?.includes(type.instance_type) && price != null ? roundPrice(price) : null;
    };
    return locations.flatMap((code) =>
      pricedOffer({
        id: `verda:${code}:${type.instance_type}`,
        provider: "verda",
        instanceType: type.instance_type,
        accelerator,
        vcpus: type.cpu?.number_of_cores ?? 0,
        memoryGb: type.memory?.size_in_gigabytes ?? 0,
        architecture: /GH200|GB200/i.test(type.model ?? "") ? "arm64" : "x86_64",
        region: code,
        spotPrice: priceIn("spot", code, type.spot_price),
        onDemandPrice: priceIn("onDemand", code, type.price_per_hour),
        specific: { instanceType: type.instance_type, location: code, supportedOs: type.supported_os ?? [] },
      }),
    );
  });
}

/** The OS image of an offer's instances: the `image` setting if `supported_os` has it, else the default (README: OS images). */
export function imageFor(settings: ParsedSettings, offer: Offer): string {
  const supported = (offer.specific as unknown as VerdaOfferData).supportedOs ?? [];
  const allowed = (image: string) => supported.length === 0 || supported.includes(image);
  const { image } = settings;
  if (image !== undefined && allowed(image)) return image;
  const takes = `Verda's ${offer.instanceType} (it takes ${supported.join(", ")})`;
  if (image !== undefined) refuseSetting("image", `${image} is not an OS image of ${takes}`);
  if (!offer.accelerator) return "ubuntu-24.04";
  const preferred = `ubuntu-24.04-cuda-${settings.cuda}-open`;
  if (allowed(preferred)) return preferred;
  // Major and minor compared as integers: CUDA 12.10 is newer than 12.9 (as decimals it sorted below).
  const version = (image: string) => (/cuda-(\d+)\.(\d+)/.exec(image)?.slice(1) ?? []).map(Number);
  const newer = (a: string, b: string) => {
    const [[aMajor = 0, aMinor = 0], [bMajor = 0, bMinor = 0]] = [version(a), version(b)];
    return bMajor - aMajor || bMinor - aMinor;
  };
  const cuda = supported.filter((image) => /^ubuntu-24\.04-cuda-[\d.]+-open$/.test(image)).sort(newer);
  return cuda[0] ?? supported[0] ?? preferred;
}
