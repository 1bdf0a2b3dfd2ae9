/**
 * An offer of a machine-renting API, frozen as the core expects it: the provider gives what its
 * listing says, the accelerator as {@link acceleratorFromNames} (or its own catalog) names it, and
 * the architecture (default x86_64) and price date (default now) are filled in.
 */
import type { Offer } from "@skyward/core/contract";
import type { NamedAccelerator } from "./accelerator-names.js";

/** What {@link machineOffer} makes an {@link Offer} of. */
export interface MachineOfferFacts
  extends Omit<Offer, "accelerator" | "architecture" | "pricesAsOf" | "specific"> {
  /** The accelerator and how many the machine has; null for a CPU machine. */
  readonly accelerator: (NamedAccelerator & { readonly count: number }) | null;
  /** Default `x86_64`. */
  readonly architecture?: Offer["architecture"];
  /** When the prices were read; default now. */
  readonly pricesAsOf?: string;
  /** What the provider keeps to create the machine. */
  readonly specific: object;
}

/** The frozen {@link Offer} of `facts`. */
export function machineOffer(facts: MachineOfferFacts): Offer {
  const { accelerator, architecture, pricesAsOf, specific, ...rest } = facts;
  const gpu = accelerator && {
    name: accelerator.name,
    count: accelerator.count,
    memoryGb: accelerator.memoryGb,
    ...(accelerator.formFactor === undefined ? {} : { formFactor: accelerator.formFactor }),
  };
  return Object.freeze({
    ...rest,
    accelerator: gpu && Object.freeze(gpu),
    architecture: architecture ?? "x86_64",
    pricesAsOf: pricesAsOf ?? new Date().toISOString(),
    specific: Object.freeze({ ...specific }),
  });
}

/** The offer of `facts` as a list, empty when neither market has a price: nothing to launch at a known price. */
export function pricedOffer(facts: MachineOfferFacts): Offer[] {
  return facts.spotPrice === null && facts.onDemandPrice === null ? [] : [machineOffer(facts)];
}
