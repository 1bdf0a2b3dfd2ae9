/**
 * What the provider conformance suite checks values against: an offer, an offer against its query,
 * an instance, a worker endpoint and a cluster, each described in words (an empty array when
 * nothing is wrong); and the small helpers the suite's tests share.
 */
import type { Provider } from "@skyward/core";
import {
  acceleratorCatalog,
  type Cluster,
  type Offer,
  type OfferQuery,
  offerFormFactorFit,
  offerPrice,
  PROVIDER_METHODS,
} from "@skyward/core/contract";

const INSTANCE_STATUSES = new Set(["pending", "running", "stopping", "terminated"]);
const ARCHITECTURES = new Set(["x86_64", "arm64"]);
const BILLING_UNITS = new Set(["second", "minute", "hour"]);
const CATALOG_NAMES = new Set<string>(acceleratorCatalog.map((entry) => entry.name));

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isNonNegativeNumber(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0;
}

/**
 * What is wrong with an offer as plain data, in words (an empty array when nothing is): every field of
 * `Offer` present and typed, prices >= 0 or null, `pricesAsOf` a date, accelerators named as in the
 * catalog, and nothing that would not survive JSON (offers are shown, logged and cached).
 */
export function offerProblems(offer: unknown, providerName: string): string[] {
  if (!isRecord(offer)) return [`expected an offer object, received ${JSON.stringify(offer)}`];
  const label = `offer ${typeof offer.id === "string" ? JSON.stringify(offer.id) : "(no id)"}`;
  const problems: string[] = [];
  const fail = (field: string, message: string) => problems.push(`${label}: ${field} ${message}`);
  if (typeof offer.id !== "string" || offer.id === "") fail("id", "must be a non-empty string");
  if (offer.provider !== providerName) {
    fail(
      "provider",
      `must be the provider's name ${JSON.stringify(providerName)}, is ${JSON.stringify(offer.provider)}`,
    );
  }
  if (typeof offer.instanceType !== "string" || offer.instanceType === "")
    fail("instanceType", "must be a non-empty string");
  if (!("accelerator" in offer)) fail("accelerator", "is missing (null for CPU-only)");
  else if (offer.accelerator !== null) {
    const accelerator = offer.accelerator;
    if (!isRecord(accelerator)) fail("accelerator", "must be an object or null");
    else {
      if (typeof accelerator.name !== "string" || !CATALOG_NAMES.has(accelerator.name)) {
        fail(
          "accelerator.name",
          `must be a canonical catalog name (A100, H100, RTX_4090, …), is ${JSON.stringify(accelerator.name)}`,
        );
      }
      if (typeof accelerator.count !== "number" || !(accelerator.count > 0))
        fail("accelerator.count", "must be a number > 0");
      if (!isNonNegativeNumber(accelerator.memoryGb)) fail("accelerator.memoryGb", "must be a number >= 0");
      if (accelerator.formFactor !== undefined) {
        const variants =
          acceleratorCatalog.find((entry) => entry.name === accelerator.name)?.formFactors ?? [];
        if (typeof accelerator.formFactor !== "string" || !variants.includes(accelerator.formFactor))
          fail(
            "accelerator.formFactor",
            `must be one of ${accelerator.name}'s form factors as the catalog spells them (${variants.join(", ") || "it has none"}) when present, is ${JSON.stringify(accelerator.formFactor)}`,
          );
      }
    }
  }
  if (!isNonNegativeNumber(offer.vcpus)) fail("vcpus", "must be a number >= 0");
  if (!isNonNegativeNumber(offer.memoryGb)) fail("memoryGb", "must be a number >= 0");
  if (offer.diskGb !== undefined && !isNonNegativeNumber(offer.diskGb))
    fail("diskGb", "must be a number >= 0 when present");
  if (typeof offer.architecture !== "string" || !ARCHITECTURES.has(offer.architecture))
    fail("architecture", `must be "x86_64" or "arm64", is ${JSON.stringify(offer.architecture)}`);
  if (typeof offer.region !== "string" || offer.region === "") fail("region", "must be a non-empty string");
  for (const field of ["spotPrice", "onDemandPrice"] as const) {
    if (!(field in offer)) fail(field, "is missing (null when there is no such option)");
    else if (offer[field] !== null && !isNonNegativeNumber(offer[field]))
      fail(field, `must be a number >= 0 or null, is ${JSON.stringify(offer[field])}`);
  }
  if (offer.spotPrice === null && offer.onDemandPrice === null)
    problems.push(`${label}: has neither a spot nor an on-demand price, so it cannot be bought`);
  if (offer.billingUnit !== undefined && !BILLING_UNITS.has(offer.billingUnit as string))
    fail("billingUnit", 'must be "second", "minute" or "hour" when present');
  if (
    typeof offer.pricesAsOf !== "string" ||
    !/^\d{4}-\d{2}-\d{2}/.test(offer.pricesAsOf) ||
    Number.isNaN(Date.parse(offer.pricesAsOf))
  ) {
    fail("pricesAsOf", `must be an ISO 8601 date or date-time, is ${JSON.stringify(offer.pricesAsOf)}`);
  }
  if (!isRecord(offer.specific)) fail("specific", "must be an object (the provider's own data)");
  try {
    if (!jsonEqual(JSON.parse(JSON.stringify(offer)), offer))
      problems.push(`${label}: does not survive JSON`);
  } catch (error) {
    problems.push(`${label}: cannot be written as JSON (${(error as Error).message})`);
  }
  return problems;
}

/** Deep equality of JSON-like values, where a property holding undefined counts as absent. */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return (
      Array.isArray(a) &&
      Array.isArray(b) &&
      a.length === b.length &&
      a.every((item, index) => jsonEqual(item, b[index]))
    );
  }
  if (!isRecord(a) || !isRecord(b)) return false;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)].filter((key) => b[key] !== undefined));
  return [...keys].every((key) => jsonEqual(a[key], b[key]));
}

/**
 * How an offer fails to satisfy a query, in words (an empty array when it satisfies it): the
 * accelerator (or none; a form factor asked for excludes offers labelled with another), minimum
 * vCPUs, memory and disk, architecture, the allocation's price and the price cap.
 */
export function offerQueryProblems(offer: Offer, query: OfferQuery): string[] {
  const label = `offer ${JSON.stringify(offer.id)}`;
  const problems: string[] = [];
  const wanted = query.accelerator;
  if (wanted === null) {
    if (offer.accelerator !== null)
      problems.push(
        `${label}: has ${offer.accelerator.name} accelerators, but the query asked for CPU-only nodes`,
      );
  } else if (offer.accelerator === null) {
    problems.push(`${label}: has no accelerator, but the query asked for ${wanted.name}`);
  } else {
    if (offer.accelerator.name !== wanted.name)
      problems.push(`${label}: has ${offer.accelerator.name}, but the query asked for ${wanted.name}`);
    if (offer.accelerator.count < wanted.count)
      problems.push(
        `${label}: has ${offer.accelerator.count} accelerators, the query asked for ${wanted.count}`,
      );
    if (wanted.memoryGb !== undefined && offer.accelerator.memoryGb < wanted.memoryGb) {
      problems.push(
        `${label}: has ${offer.accelerator.memoryGb} GB per accelerator, the query asked for ${wanted.memoryGb}`,
      );
    }
    if (offerFormFactorFit(offer, query) === "differs")
      problems.push(
        `${label}: has form factor ${offer.accelerator.formFactor}, the query asked for ${wanted.formFactor}`,
      );
  }
  if (query.vcpus !== undefined && offer.vcpus < query.vcpus)
    problems.push(`${label}: has ${offer.vcpus} vCPUs, the query asked for at least ${query.vcpus}`);
  if (query.memoryGb !== undefined && offer.memoryGb < query.memoryGb)
    problems.push(`${label}: has ${offer.memoryGb} GB, the query asked for at least ${query.memoryGb}`);
  if (query.diskGb !== undefined && offer.diskGb !== undefined && offer.diskGb < query.diskGb)
    problems.push(`${label}: has ${offer.diskGb} GB of disk, the query asked for at least ${query.diskGb}`);
  if (query.architecture !== undefined && offer.architecture !== query.architecture)
    problems.push(`${label}: is ${offer.architecture}, the query asked for ${query.architecture}`);
  if (query.allocation === "spot" && offer.spotPrice === null)
    problems.push(`${label}: has no spot price, but the query asked for allocation "spot"`);
  if (query.allocation === "on-demand" && offer.onDemandPrice === null)
    problems.push(`${label}: has no on-demand price, but the query asked for allocation "on-demand"`);
  const price = offerPrice(offer, query.allocation);
  if (query.maxHourlyCost !== undefined && price !== null && price > query.maxHourlyCost) {
    problems.push(
      `${label}: costs $${price}/h under "${query.allocation}", above the query's maxHourlyCost $${query.maxHourlyCost}`,
    );
  }
  return problems;
}

/**
 * What is wrong with an instance, in words (an empty array when nothing is): every field of `Instance`
 * present and typed, `createdAt` in milliseconds, and tagged with `cluster` — a tag whose value is the
 * cluster id (`skyward:cluster` by convention).
 */
export function instanceProblems(instance: unknown, cluster: Cluster): string[] {
  if (!isRecord(instance)) return [`expected an instance object, received ${JSON.stringify(instance)}`];
  const label = `instance ${typeof instance.id === "string" ? JSON.stringify(instance.id) : "(no id)"}`;
  const problems: string[] = [];
  const fail = (field: string, message: string) => problems.push(`${label}: ${field} ${message}`);
  if (typeof instance.id !== "string" || instance.id === "") fail("id", "must be a non-empty string");
  if (typeof instance.status !== "string" || !INSTANCE_STATUSES.has(instance.status))
    fail("status", `must be pending, running, stopping or terminated, is ${JSON.stringify(instance.status)}`);
  for (const field of ["publicIp", "privateIp"] as const) {
    if (!(field in instance) || (instance[field] !== null && typeof instance[field] !== "string"))
      fail(field, "must be a string or null");
  }
  if (!("ssh" in instance)) fail("ssh", "is missing (null when not reached over SSH)");
  else if (instance.ssh !== null) {
    const ssh = instance.ssh;
    if (!isRecord(ssh)) fail("ssh", "must be an object or null");
    else {
      if (typeof ssh.host !== "string" || ssh.host === "") fail("ssh.host", "must be a non-empty string");
      if (typeof ssh.port !== "number" || !Number.isInteger(ssh.port) || ssh.port < 1 || ssh.port > 65_535)
        fail("ssh.port", "must be a port number");
      if (typeof ssh.user !== "string" || ssh.user === "") fail("ssh.user", "must be a non-empty string");
      for (const field of ["privateKey", "identityFile", "hostKeyFingerprint", "root"] as const) {
        if (ssh[field] !== undefined && typeof ssh[field] !== "string")
          fail(`ssh.${field}`, "must be a string when present");
      }
    }
  }
  if (typeof instance.spot !== "boolean") fail("spot", "must be a boolean");
  if (instance.hourlyPrice !== null && !isNonNegativeNumber(instance.hourlyPrice))
    fail("hourlyPrice", "must be a number >= 0 or null");
  if (typeof instance.offerId !== "string" || instance.offerId === "")
    fail("offerId", "must be a non-empty string");
  if (typeof instance.createdAt !== "number" || !Number.isFinite(instance.createdAt))
    fail("createdAt", "must be a number");
  else if (instance.createdAt < 1e12 || instance.createdAt > Date.now() + 600_000)
    fail("createdAt", `must be milliseconds since the epoch, is ${instance.createdAt}`);
  const tags = instance.tags;
  if (!isRecord(tags) || Object.values(tags).some((value) => typeof value !== "string"))
    fail("tags", "must be an object of strings");
  else if (!Object.values(tags).includes(cluster.id))
    fail("tags", `must carry the cluster id ${JSON.stringify(cluster.id)} (as "skyward:cluster")`);
  return problems;
}

/**
 * What is wrong with what `launchWorker` returned, in words (an empty array when nothing is): a
 * non-empty `host`, a port number, the worker's process id, and, when present, a string `token`, a
 * boolean `warm`, and functions `openStream` and `close`.
 */
export function workerEndpointProblems(endpoint: unknown): string[] {
  if (!isRecord(endpoint)) return [`expected a worker endpoint object, received ${JSON.stringify(endpoint)}`];
  const problems: string[] = [];
  const fail = (field: string, message: string) => problems.push(`worker endpoint: ${field} ${message}`);
  if (typeof endpoint.host !== "string" || endpoint.host === "") fail("host", "must be a non-empty string");
  const port = endpoint.port;
  if (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65_535)
    fail("port", `must be a port number, is ${JSON.stringify(port)}`);
  if (typeof endpoint.pid !== "number" || !Number.isInteger(endpoint.pid) || endpoint.pid < 1)
    fail("pid", `must be the worker's process id, is ${JSON.stringify(endpoint.pid)}`);
  if (endpoint.token !== undefined && typeof endpoint.token !== "string")
    fail("token", "must be a string when present");
  if (endpoint.warm !== undefined && typeof endpoint.warm !== "boolean")
    fail("warm", "must be a boolean when present");
  for (const field of ["openStream", "close"] as const) {
    if (endpoint[field] !== undefined && typeof endpoint[field] !== "function")
      fail(field, "must be a function when present");
  }
  return problems;
}

/** What is wrong with a cluster `prepare` returned, in words (an empty array when nothing is). */
export function clusterProblems(cluster: unknown, providerName: string, offer: Offer): string[] {
  if (!isRecord(cluster)) return [`expected a cluster object, received ${JSON.stringify(cluster)}`];
  const problems: string[] = [];
  const fail = (field: string, message: string) => problems.push(`cluster: ${field} ${message}`);
  if (typeof cluster.id !== "string" || cluster.id === "") fail("id", "must be a non-empty string");
  if (cluster.provider !== providerName)
    fail("provider", `must be ${JSON.stringify(providerName)}, is ${JSON.stringify(cluster.provider)}`);
  if (typeof cluster.poolId !== "string") fail("poolId", "must be a string");
  if (typeof cluster.region !== "string" || cluster.region === "")
    fail("region", "must be a non-empty string");
  if (!isRecord(cluster.spec)) fail("spec", "must be the pool spec it was prepared for");
  if (!isRecord(cluster.offer) || cluster.offer.id !== offer.id)
    fail("offer", `must be the offer it was prepared for (${JSON.stringify(offer.id)})`);
  if (!("ssh" in cluster)) fail("ssh", "is missing (null when nodes are not reached over SSH)");
  else if (cluster.ssh !== null) {
    const ssh = cluster.ssh;
    if (!isRecord(ssh)) fail("ssh", "must be an object or null");
    else {
      if (typeof ssh.user !== "string" || ssh.user === "") fail("ssh.user", "must be a non-empty string");
      if (typeof ssh.sudo !== "boolean") fail("ssh.sudo", "must be a boolean");
      if (ssh.port !== undefined && (typeof ssh.port !== "number" || !Number.isInteger(ssh.port)))
        fail("ssh.port", "must be a port number when present");
      for (const field of ["privateKey", "identityFile"] as const) {
        if (ssh[field] !== undefined && typeof ssh[field] !== "string")
          fail(`ssh.${field}`, "must be a string when present");
      }
    }
  }
  if (!("specific" in cluster)) fail("specific", "is missing");
  return problems;
}

/** The contract's methods, each taking one options object. */
export const CONTRACT_METHODS = [...PROVIDER_METHODS.required, ...PROVIDER_METHODS.optional];

/**
 * The provider as the pool sees it, with every `launchWorker` result recorded: an object inheriting
 * from the provider (frozen or not), whose own `launchWorker` calls the provider's.
 */
export function recordingLaunches(provider: Provider, endpoints: unknown[]): Provider {
  const recording: Provider = Object.create(provider);
  Object.defineProperty(recording, "launchWorker", {
    enumerable: true,
    value: async (options: Parameters<Provider["launchWorker"]>[0]) => {
      const endpoint = await provider.launchWorker(options);
      endpoints.push(endpoint);
      return endpoint;
    },
  });
  return recording;
}

export function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}
