/**
 * An offer of a marketplace that rents a GPU type by the GPU (a pod of any count of one type, Novita's
 * products): the count asked, the type's prices, vCPUs and memory per GPU multiplied by it, and the
 * offer's id and name saying it (`acme:h100:x2`, `2x H100`).
 */
import type { Offer } from "@skyward/core/contract";
import type { NamedAccelerator } from "./accelerator-names.js";
import { type MachineOfferFacts, pricedOffer } from "./machine-offer.js";
import { roundPrice } from "./prices.js";

/** What a GPU type has per GPU: its price in each market, USD per hour (null: not sold there), vCPUs and memory (GB, default 0). */
export interface PerGpu {
  readonly spotPrice: number | null;
  readonly onDemandPrice: number | null;
  readonly vcpus?: number | null | undefined;
  readonly memoryGb?: number | null | undefined;
}

/** What {@link perGpuOffer} is given. */
export interface PerGpuOfferFacts
  extends Pick<MachineOfferFacts, "provider" | "specific" | "architecture" | "billingUnit" | "diskGb"> {
  /** The type in the offer id, between the provider's name and the count (`secure:H100`). */
  readonly key: string;
  /** The type's name, after the count in `instanceType` (`H100 SXM`). */
  readonly typeName: string;
  readonly accelerator: NamedAccelerator;
  readonly count: number;
  /** The region the offers were asked for; default `any`. */
  readonly region?: string | undefined;
  readonly perGpu: PerGpu;
}

/** The offer of `count` GPUs of a type, as a list, empty when neither market has a price (see `pricedOffer`). */
export function perGpuOffer(facts: PerGpuOfferFacts): Offer[] {
  const { key, typeName, accelerator, count, region, perGpu, ...rest } = facts;
  const times = (value: number | null | undefined) => (value == null ? null : roundPrice(value * count));
  return pricedOffer({
    ...rest,
    id: `${facts.provider}:${key}:x${count}`,
    instanceType: `${count > 1 ? `${count}x ` : ""}${typeName}`,
    accelerator: { ...accelerator, count },
    vcpus: (perGpu.vcpus ?? 0) * count,
    memoryGb: (perGpu.memoryGb ?? 0) * count,
    region: region ?? "any",
    spotPrice: times(perGpu.spotPrice),
    onDemandPrice: times(perGpu.onDemandPrice),
  });
}
