/**
 * The provider contract, version `v1`: plain object types a provider package implements (AWS,
 * RunPod, Vast.ai, SSH hosts, this machine…), plus the runtime check spec validation uses. No
 * provider lives here.
 *
 * The pool drives a provider in this order: `offers` → `prepare` → `provision` (then `getInstance`
 * until each instance runs) → … → `terminate` → `teardown`. The CLI uses `listInstances`, `terminate`
 * and `cleanup` without a pool. Every call that can hang receives an
 * `AbortSignal` and must give up promptly when it aborts.
 */
import { z } from "zod";
import { canonicalFormFactor } from "../spec/accelerators.js";
import type { AllocationStrategy } from "../spec/nodes.js";
import type { ClusterFromTags, Instance, Offer, OfferQuery, PoolSpec, Provider } from "./types.js";

export type {
  CleanupOptions,
  CleanupResult,
  Cluster,
  ClusterCallOptions,
  ClusterFromTags,
  ClusterIdentity,
  ClusterSsh,
  GetInstanceOptions,
  Instance,
  InstanceSsh,
  InstanceStatus,
  InterruptionNoticeSource,
  LaunchWorkerOptions,
  LeftPoolResource,
  Offer,
  OfferQuery,
  OffersOptions,
  PoolResource,
  PrepareOptions,
  ProgressReport,
  Provider,
  ProviderCallOptions,
  ProviderCapabilities,
  ProviderV1,
  ProvisionOptions,
  RecordedCluster,
  SelfDestructOptions,
  ShellOp,
  TerminateOptions,
  WorkerEndpoint,
  WorkerEnvironment,
  WorkerLaunchRequest,
} from "./types.js";

/** The version of the provider contract this package implements. */
export const PROVIDER_SPECIFICATION_VERSION = "v1";

/**
 * The price an offer is ranked by under an allocation, as the pool ranks offers: the spot price for
 * `"spot"`, the on-demand price for `"on-demand"`, otherwise the lower of the two; null when the offer
 * cannot be bought that way.
 */
export function offerPrice(
  offer: Pick<Offer, "spotPrice" | "onDemandPrice">,
  allocation: AllocationStrategy,
): number | null {
  if (allocation === "spot") return offer.spotPrice;
  if (allocation === "on-demand") return offer.onDemandPrice;
  const prices = [offer.spotPrice, offer.onDemandPrice].filter((price): price is number => price !== null);
  return prices.length > 0 ? Math.min(...prices) : null;
}

/**
 * Whether to ask for spot capacity first for an offer under an allocation: for `"spot"` and
 * `"spot-if-available"` when the offer has a spot price, for `"cheapest"` when spot is not dearer than
 * on-demand (or on-demand has no price); never for `"on-demand"`.
 */
export function prefersSpot(
  allocation: AllocationStrategy,
  offer: Pick<Offer, "spotPrice" | "onDemandPrice">,
): boolean {
  if (offer.spotPrice === null) return false;
  if (allocation === "spot" || allocation === "spot-if-available") return true;
  if (allocation === "cheapest")
    return offer.onDemandPrice === null || offer.spotPrice <= offer.onDemandPrice;
  return false;
}

/** The query the pool sends to `offers` for a resolved pool spec: its per-node requirements. */
export function offerQuery(spec: PoolSpec): OfferQuery {
  return {
    accelerator: spec.accelerator
      ? {
          name: spec.accelerator.name,
          count: spec.accelerator.count,
          ...(spec.accelerator.memoryGb ? { memoryGb: spec.accelerator.memoryGb } : {}),
          ...(spec.accelerator.formFactor !== undefined ? { formFactor: spec.accelerator.formFactor } : {}),
        }
      : null,
    ...(spec.vcpus !== undefined ? { vcpus: spec.vcpus } : {}),
    ...(spec.memoryGb !== undefined ? { memoryGb: spec.memoryGb } : {}),
    ...(spec.diskGb !== undefined ? { diskGb: spec.diskGb } : {}),
    ...(spec.architecture !== undefined ? { architecture: spec.architecture } : {}),
    allocation: spec.allocation,
    ...(spec.region !== undefined ? { region: spec.region } : {}),
    ...(spec.maxHourlyCost !== undefined ? { maxHourlyCost: spec.maxHourlyCost } : {}),
  };
}

/**
 * How an offer's accelerator form factor answers the query's: `"fits"` when the query asks for none
 * or the offer's is the one asked for (`SXM5` is `SXM`, case aside); `"differs"` when the offer says
 * another one; `"unknown"` when the query asks for one and the offer does not say its own. The pool
 * and `skyward offers` drop `"differs"` offers and keep `"unknown"` ones, saying so.
 */
export function offerFormFactorFit(
  offer: { readonly accelerator: Pick<NonNullable<Offer["accelerator"]>, "formFactor"> | null },
  query: { readonly accelerator: Pick<NonNullable<OfferQuery["accelerator"]>, "formFactor"> | null },
): "fits" | "differs" | "unknown" {
  const wanted = canonicalFormFactor(query.accelerator?.formFactor);
  if (wanted === undefined) return "fits";
  const have = canonicalFormFactor(offer.accelerator?.formFactor);
  if (have === undefined) return "unknown";
  return have.toUpperCase() === wanted.toUpperCase() ? "fits" : "differs";
}

/**
 * The cluster handed to `terminate` for an instance found by `listInstances`, when there is no cluster
 * object (`skyward down`): only what the instance's tags say — `id` (`skyward:cluster`), `provider`,
 * `poolId` (`skyward:pool`) and `region` (`skyward:region`). Its `spec`, `offer` and `specific` are
 * absent, so a provider with `listInstances` must terminate by instance id alone; the conformance
 * suite of `@skyward/testing` checks that it does.
 */
export function clusterFromInstance(providerName: string, instance: Instance): ClusterFromTags {
  const tags = instance.tags;
  return Object.freeze({
    id: tags["skyward:cluster"] ?? "",
    provider: providerName,
    poolId: tags["skyward:pool"] ?? "",
    region: tags["skyward:region"] ?? "",
    spec: undefined,
    offer: undefined,
    ssh: null,
    specific: undefined,
  });
}

/** The methods of the `v1` provider contract: those every provider has, and those it may leave out. */
export const PROVIDER_METHODS = Object.freeze({
  required: Object.freeze([
    "offers",
    "prepare",
    "provision",
    "getInstance",
    "launchWorker",
    "terminate",
    "teardown",
    "selfDestruct",
  ] as const),
  optional: Object.freeze(["listInstances", "cleanup", "interruptionNotice", "reconnectWorker"] as const),
});

/**
 * Why `value` is not a usable provider, in words, or undefined when it is one. Explains a wrong
 * contract version, a missing name or capabilities, and missing methods.
 */
export function whyNotProvider(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null)
    return `expected a provider object, received ${describe(value)}`;
  const candidate = value as Record<string, unknown>;
  const version = candidate.specificationVersion;
  const label = typeof candidate.name === "string" ? `provider "${candidate.name}"` : "the provider";
  if (version === undefined) return `${label} has no specificationVersion`;
  if (version !== PROVIDER_SPECIFICATION_VERSION) {
    return `${label} implements specification version ${JSON.stringify(version)}, but this version of @skyward/core supports "${PROVIDER_SPECIFICATION_VERSION}"`;
  }
  if (typeof candidate.name !== "string" || candidate.name === "") return `${label} has no name`;
  const capabilities = candidate.capabilities;
  if (typeof capabilities !== "object" || capabilities === null) return `${label} has no capabilities object`;
  const provisionTimeout = (capabilities as Record<string, unknown>).provisionTimeout;
  if (
    provisionTimeout !== undefined &&
    !(typeof provisionTimeout === "number" && Number.isFinite(provisionTimeout) && provisionTimeout > 0)
  )
    return `${label} has capabilities.provisionTimeout ${describe(provisionTimeout)}, expected seconds > 0`;
  const peerNetwork = (capabilities as Record<string, unknown>).peerNetwork;
  if (peerNetwork !== undefined && !["private", "accelerated", "none"].includes(peerNetwork as string))
    return `${label} has capabilities.peerNetwork ${describe(peerNetwork)}, expected "private", "accelerated" or "none"`;
  const missing = PROVIDER_METHODS.required.filter((method) => typeof candidate[method] !== "function");
  if (missing.length > 0)
    return `${label} is missing method${missing.length > 1 ? "s" : ""} ${missing.join(", ")}`;
  for (const method of PROVIDER_METHODS.optional) {
    if (candidate[method] !== undefined && typeof candidate[method] !== "function")
      return `${label} has a ${method} that is not a function`;
  }
  return undefined;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (typeof value === "function") return "a function";
  if (typeof value === "object") return "an object";
  if (value === undefined) return "nothing";
  return `${typeof value} ${String(value)}`;
}

/** True when `value` implements the `v1` provider contract (checked by shape, not by class). */
export function isProvider(value: unknown): value is Provider {
  return whyNotProvider(value) === undefined;
}

const providerExpectation = 'expected a provider (e.g. sky.Local(), AWS(...)) with specificationVersion "v1"';

/**
 * Validates a provider field of a spec. Its issue messages say what was expected and, for a provider
 * object built for another contract version, which version it has and which is supported.
 */
export const providerSchema = z.custom<Provider>(isProvider, {
  error: (issue) => {
    const reason = whyNotProvider(issue.input);
    const input = issue.input;
    if (typeof input === "object" && input !== null && "specificationVersion" in input) {
      return reason ? `${providerExpectation}; ${reason}` : providerExpectation;
    }
    return `${providerExpectation}, received ${describe(input)}`;
  },
});
