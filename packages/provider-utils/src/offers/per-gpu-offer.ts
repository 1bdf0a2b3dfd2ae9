/**
 * The offer of a marketplace that lists GPU products with their vCPUs, memory and prices per GPU
 * (Novita's products, RunPod's GPU types): a machine of `accelerator.count` GPUs is offered as
 * `<provider>:<key>:x<count>`, its type `<count>x <name>` (the name alone for one GPU), its vCPUs,
 * memory and both prices the count times the product's, written once for every such marketplace.
 */
import type { Offer } from "@skyward/core/contract";
import { type MachineOfferFacts, pricedOffer } from "./machine-offer.js";
import { roundPrice } from "./prices.js";

/** What {@link perGpuOffer} is given: `vcpus`, `memoryGb` and the prices (USD an hour, null: not sold there) are one GPU's. */
export interface PerGpuOfferFacts extends Omit<MachineOfferFacts, "id" | "instanceType" | "accelerator"> {
  /** What tells the product (and its cloud) apart in the offer's id (`secure:NVIDIA A100 80GB PCIe`). */
  readonly key: string;
  /** The product's name, in the instance type. */
  readonly name: string;
  readonly accelerator: NonNullable<MachineOfferFacts["accelerator"]>;
}

/** The offer of `facts.accelerator.count` GPUs of a product, as a list (empty when neither market has a price). */
export function perGpuOffer(facts: PerGpuOfferFacts): Offer[] {
  const { key, name, ...perGpu } = facts;
  const { count } = perGpu.accelerator;
  const times = (price: number | null) => (price === null ? null : roundPrice(price * count));
  return pricedOffer({
    ...perGpu,
    id: `${perGpu.provider}:${key}:x${count}`,
    instanceType: `${count > 1 ? `${count}x ` : ""}${name}`,
    vcpus: perGpu.vcpus * count,
    memoryGb: perGpu.memoryGb * count,
    spotPrice: times(perGpu.spotPrice),
    onDemandPrice: times(perGpu.onDemandPrice),
  });
}
