/**
 * The provider conformance suite: one vitest `describe` block that checks a provider against the
 * `v1` contract of `@skyward/core` — methods that each take one options object, well-formed offers
 * that respect the query, a read-only `offers`, and the whole lifecycle `prepare` → `provision` →
 * `getInstance` → `terminate` → `teardown` leaving nothing behind; for a provider that has it,
 * `cleanup` removing what pools without instances left; and, when asked, a real pool whose workers
 * `launchWorker` started. Every provider package runs it, the built-ins included.
 */
import {
  compute,
  type FlatComputeInput,
  type PoolSpec,
  type Provider,
  python,
  options as resolvePoolOptions,
  spec as resolveSpec,
  type SpecInput,
} from "@skyward/core";
import {
  acceleratorCatalog,
  type Cluster,
  clusterFromInstance,
  type Instance,
  type Offer,
  type OfferQuery,
  offerFormFactorFit,
  offerPrice,
  offerQuery,
  PROVIDER_METHODS,
  type ProviderCallOptions,
  resolvePoolSpec,
  whyNotProvider,
} from "@skyward/core/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** What a provider under test can do in its test environment; every field is optional. */
export interface ProviderConformanceSupport {
  /**
   * Whether `prepare`, `provision`, `terminate` and `teardown` are exercised. Default true; set false
   * only when the test environment cannot create instances at all (the offer checks still run).
   */
  lifecycle?: boolean;
  /**
   * A canonical accelerator name (`"A100"`) the provider offers in the test environment: a query for it
   * must then return at least one offer. Without it the suite asks for `"A100"` and checks only that
   * whatever comes back matches.
   */
  accelerator?: string;
  /**
   * Whether the provider has a machine to end, so that `selfDestruct` must return a non-empty shell
   * operation. Default true; false for providers like `Local` whose workers simply exit.
   */
  selfDestruct?: boolean;
}

/**
 * The pool {@link ProviderConformanceOptions.pool} asks for: `sky.compute` input fields (without
 * `provider`) laid over the suite's `spec` — `nodes` (default: `provisionCount`), `image`, `ttl`,
 * and pool `options` such as `bootstrapTimeout` or `sshTimeout` (`console` is off unless set).
 */
export type ProviderConformancePool = Omit<FlatComputeInput, "provider">;

/** Options of {@link runProviderConformance}. */
export interface ProviderConformanceOptions {
  /** Names the `describe` block: `provider conformance: <name>`. */
  name: string;
  /**
   * Creates the provider under test. Called once, in the suite's `beforeAll` — after the caller's own
   * `beforeAll` hooks, so a server (moto, msw) started there is up.
   */
  create: () => Provider | Promise<Provider>;
  /**
   * The spec (without `provider`) whose offers are checked and whose cheapest offer the lifecycle
   * provisions. Default `{}`: one CPU node, `allocation: "spot-if-available"`.
   */
  spec?: Omit<SpecInput, "provider">;
  /** What the provider can do in this test environment. */
  supports?: ProviderConformanceSupport;
  /** Adjusts the resolved pool spec handed to `prepare` (worker settings, timeouts…). */
  prepareSpec?: (spec: PoolSpec) => PoolSpec | Promise<PoolSpec>;
  /**
   * Describes what Skyward has left at the provider (instances, security groups, key pairs, … — found
   * e.g. by querying moto for Skyward's tags): one entry per resource, anything printable. Must not
   * change across `offers`, and must be empty after `teardown`. Without it only `listInstances` (when
   * the provider has it) is consulted.
   */
  leftovers?: () => readonly unknown[] | Promise<readonly unknown[]>;
  /** Runs last, after the suite's own best-effort teardown (close a server, remove a directory). */
  cleanup?: () => void | Promise<void>;
  /** How many instances the lifecycle asks `provision` for. Default 1. */
  provisionCount?: number;
  /**
   * An instance id the provider has never issued, in its own format (moto rejects malformed EC2 ids
   * differently from unknown ones). Default `"skyward-conformance-unknown"`.
   */
  unknownInstanceId?: string;
  /**
   * Also start a real pool on the provider (`sky.compute`), so every node's worker is started by
   * `launchWorker`, and check that each worker answers a task and that closing the pool leaves
   * `leftovers()` as it found them. Off by default: it needs nodes that can run the worker (Python
   * 3.10 or newer, and whatever the image installs). `true` uses the suite's `spec`; an object adds
   * to it (see {@link ProviderConformancePool}).
   */
  pool?: boolean | ProviderConformancePool;
  /**
   * Deadline of each provider call and of each test, milliseconds. Default 120000. The pool test
   * (`pool`) gets twice as long: starting the pool may take up to this deadline, closing it as much.
   */
  timeoutMs?: number;
}

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
function clusterProblems(cluster: unknown, providerName: string, offer: Offer): string[] {
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
const CONTRACT_METHODS = [...PROVIDER_METHODS.required, ...PROVIDER_METHODS.optional];

/**
 * The provider as the pool sees it, with every `launchWorker` result recorded: an object inheriting
 * from the provider (frozen or not), whose own `launchWorker` calls the provider's.
 */
function recordingLaunches(provider: Provider, endpoints: unknown[]): Provider {
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

function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}

/**
 * Registers a vitest `describe` block, `provider conformance: <name>`, that checks a provider against
 * the `v1` contract. Call it at the top level of a test file (or inside a `describe`, e.g. one skipped
 * when the test environment is missing):
 *
 * ```ts
 * import { AWS } from "@skyward/provider-aws";
 * import { runProviderConformance } from "@skyward/testing";
 *
 * declare const moto: { url: string }; // a moto server, started in your beforeAll
 * declare function listSkywardResources(endpoint: string): Promise<unknown[]>;
 * runProviderConformance({
 *   name: "aws (moto)",
 *   create: () => AWS({ region: "us-east-1", endpoint: moto.url }),
 *   leftovers: () => listSkywardResources(moto.url),
 *   supports: { accelerator: "T4" },
 * });
 * ```
 *
 * The lifecycle tests run in order and share one cluster; whatever a failing test leaves is
 * terminated and torn down in `afterAll`, before `cleanup`. With `pool`, a real pool is started last,
 * so every node's worker comes from `launchWorker`, and closed again.
 */
export function runProviderConformance(options: ProviderConformanceOptions): void {
  const timeoutMs = options.timeoutMs ?? 120_000;
  const provisionCount = options.provisionCount ?? 1;
  const supports = options.supports ?? {};
  const unknownId = options.unknownInstanceId ?? "skyward-conformance-unknown";
  /** The options every provider call gets: a deadline. */
  const callOptions = (): ProviderCallOptions => ({ signal: AbortSignal.timeout(timeoutMs) });

  describe(`provider conformance: ${options.name}`, () => {
    let provider: Provider;
    let poolSpec: PoolSpec;
    let query: OfferQuery;
    let offer: Offer | undefined;
    let cluster: Cluster | undefined;
    let instances: readonly Instance[] = [];
    let tornDown = false;
    /** Makes the pool ids of this run's clusters unique (`conf0…` for the lifecycle's). */
    const suffix = Math.random().toString(16).slice(2, 8);
    /** Clusters the cleanup check prepared; torn down in afterAll if the check fails half way. */
    const orphans: Cluster[] = [];

    const requireCluster = (): Cluster => {
      if (!cluster) throw new Error("prepare did not return a cluster (see the prepare test)");
      return cluster;
    };
    const requireInstances = (): readonly Instance[] => {
      if (instances.length === 0) throw new Error("provision returned no instances (see the provision test)");
      return instances;
    };
    const leftovers = async (): Promise<readonly unknown[]> => (options.leftovers ? options.leftovers() : []);
    const listed = async (): Promise<readonly Instance[]> =>
      provider.listInstances ? provider.listInstances(callOptions()) : [];
    const offersFor = async (wanted: OfferQuery): Promise<readonly Offer[]> => {
      const offers = await provider.offers({ ...callOptions(), query: wanted });
      expect(Array.isArray(offers), "offers must resolve to an array").toBe(true);
      expect(offers.flatMap((entry) => offerProblems(entry, provider.name))).toEqual([]);
      expect(offers.flatMap((entry) => offerQueryProblems(entry, wanted))).toEqual([]);
      return offers;
    };

    beforeAll(async () => {
      provider = await options.create();
      // A provider that is not one fails the first test, with the reason, rather than the whole suite.
      const valid = whyNotProvider(provider) === undefined;
      poolSpec = resolvePoolSpec(
        resolveSpec({ ...options.spec, ...(valid ? { provider } : {}) }),
        resolvePoolOptions({}),
      );
      query = offerQuery(poolSpec);
    }, timeoutMs);

    afterAll(async () => {
      try {
        if (cluster && !tornDown) {
          const ids = instances.map((instance) => instance.id);
          await provider.terminate({ ...callOptions(), cluster, ids }).catch(() => undefined);
          await provider.teardown({ ...callOptions(), cluster }).catch(() => undefined);
        }
        for (const orphan of orphans)
          await provider.teardown({ ...callOptions(), cluster: orphan }).catch(() => undefined);
      } finally {
        await options.cleanup?.();
      }
    }, timeoutMs);

    it("is a v1 provider with a short lower-case name and typed capabilities", () => {
      expect(whyNotProvider(provider)).toBeUndefined();
      expect(provider.name).toMatch(/^[a-z0-9][a-z0-9-]*$/);
      const { spot, maxInstances } = provider.capabilities;
      expect(typeof spot).toBe("boolean");
      if (maxInstances !== undefined) expect(Number.isInteger(maxInstances) && maxInstances > 0).toBe(true);
    });

    it("every method takes one options object, launchWorker included", () => {
      expect(
        typeof provider.launchWorker,
        "launchWorker is required: the pool starts every node with it",
      ).toBe("function");
      const positional = CONTRACT_METHODS.flatMap((method) => {
        const value: unknown = provider[method];
        return typeof value === "function" && value.length > 1
          ? [`${method} declares ${value.length} parameters`]
          : [];
      });
      expect(positional, "each v1 method takes a single options object, not positional arguments").toEqual(
        [],
      );
    });

    it(
      "offers for the spec are well formed and satisfy the query",
      async () => {
        const offers = await offersFor(query);
        if (supports.lifecycle !== false)
          expect(offers.length, "the lifecycle tests need at least one offer for the spec").toBeGreaterThan(
            0,
          );
      },
      timeoutMs,
    );

    it(
      "an accelerator query returns only offers with that accelerator",
      async () => {
        const name = supports.accelerator ?? "A100";
        const offers = await offersFor({ ...query, accelerator: { name, count: 1 } });
        if (supports.accelerator !== undefined)
          expect(offers.length, `supports.accelerator says ${name} is offered`).toBeGreaterThan(0);
      },
      timeoutMs,
    );

    it(
      'allocation "spot" returns only offers with a spot price, "on-demand" only offers with an on-demand price',
      async () => {
        const spot = await offersFor({ ...query, allocation: "spot" });
        if (!provider.capabilities.spot) expect(spot, "capabilities.spot is false").toEqual([]);
        await offersFor({ ...query, allocation: "on-demand" });
      },
      timeoutMs,
    );

    it(
      "maxHourlyCost is honoured",
      async (context) => {
        const { maxHourlyCost: _, ...uncappedQuery } = query;
        let base: OfferQuery = uncappedQuery;
        let offers = await offersFor(base);
        if (offers.length === 0 && supports.accelerator !== undefined) {
          base = { ...uncappedQuery, accelerator: { name: supports.accelerator, count: 1 } };
          offers = await offersFor(base);
        }
        const prices = offers
          .map((entry) => offerPrice(entry, base.allocation))
          .filter((price): price is number => price !== null)
          .sort((a, b) => a - b);
        if (prices.length === 0) return context.skip("no priced offers to cap");
        const cap = Math.max(prices[Math.floor((prices.length - 1) / 2)] as number, 0.01);
        const capped = await offersFor({ ...base, maxHourlyCost: cap });
        // offersFor already failed the test for any offer above the cap; the cheapest must stay.
        expect(
          capped.length,
          `offers at or under $${cap}/h exist, so the capped query must find some`,
        ).toBeGreaterThan(0);
      },
      timeoutMs,
    );

    it(
      "offers creates nothing",
      async (context) => {
        if (!options.leftovers && !provider.listInstances)
          return context.skip("neither leftovers nor listInstances can tell what exists");
        const before = await leftovers();
        const listedBefore = (await listed()).map((instance) => instance.id).sort();
        await provider.offers({ ...callOptions(), query });
        await provider.offers({
          ...callOptions(),
          query: { ...query, accelerator: { name: supports.accelerator ?? "A100", count: 1 } },
        });
        await provider.offers({ ...callOptions(), query: { ...query, allocation: "spot" } });
        expect(await leftovers()).toEqual(before);
        expect((await listed()).map((instance) => instance.id).sort()).toEqual(listedBefore);
      },
      timeoutMs,
    );

    describe.skipIf(supports.lifecycle === false)("lifecycle", () => {
      it(
        "prepare returns a cluster with the contract's fields",
        async () => {
          // The offer checks are the offer tests' job; here any priced offer will do.
          const offers = await provider.offers({ ...callOptions(), query });
          const priced = offers
            .map((entry) => ({ entry, price: offerPrice(entry, query.allocation) }))
            .filter((candidate): candidate is { entry: Offer; price: number } => candidate.price !== null)
            .sort((a, b) => a.price - b.price);
          offer = priced[0]?.entry;
          if (!offer) throw new Error("no priced offer for the spec to prepare a cluster for");
          const spec = options.prepareSpec ? await options.prepareSpec(poolSpec) : poolSpec;
          const prepared = await provider.prepare({
            ...callOptions(),
            spec,
            offer,
            poolId: `conf0${suffix}`,
          });
          cluster = prepared;
          expect(clusterProblems(prepared, provider.name, offer)).toEqual([]);
        },
        timeoutMs,
      );

      it(
        `provision returns up to ${provisionCount} instance(s) tagged with the cluster`,
        async () => {
          const current = requireCluster();
          const { maxInstances } = provider.capabilities;
          if (maxInstances !== undefined) expect(provisionCount).toBeLessThanOrEqual(maxInstances);
          const created = await provider.provision({
            ...callOptions(),
            cluster: current,
            count: provisionCount,
          });
          instances = created;
          expect(Array.isArray(created)).toBe(true);
          expect(created.length).toBeGreaterThanOrEqual(1);
          expect(created.length).toBeLessThanOrEqual(provisionCount);
          expect(created.flatMap((instance) => instanceProblems(instance, current))).toEqual([]);
          expect(new Set(created.map((instance) => instance.id)).size, "instance ids must be unique").toBe(
            created.length,
          );
          for (const instance of created) {
            expect(instance.status).not.toBe("terminated");
            expect(instance.offerId).toBe(current.offer.id);
            if (instance.spot)
              expect(provider.capabilities.spot, "a spot instance needs capabilities.spot").toBe(true);
          }
        },
        timeoutMs,
      );

      it(
        "getInstance finds every provisioned instance",
        async () => {
          const current = requireCluster();
          for (const instance of requireInstances()) {
            const found = await provider.getInstance({ ...callOptions(), cluster: current, id: instance.id });
            expect(found, `getInstance(${JSON.stringify(instance.id)})`).not.toBeNull();
            expect(found?.id).toBe(instance.id);
            expect(found?.status).not.toBe("terminated");
            expect(instanceProblems(found, current)).toEqual([]);
          }
        },
        timeoutMs,
      );

      it("selfDestruct returns a shell operation, synchronously", () => {
        const current = requireCluster();
        for (const instance of requireInstances()) {
          const op = provider.selfDestruct({ cluster: current, instance });
          expect(typeof op, "selfDestruct must return a string, not a promise").toBe("string");
          if (supports.selfDestruct !== false) {
            expect(
              op.trim(),
              "a provider with machines to end must say how (supports.selfDestruct)",
            ).not.toBe("");
          }
        }
      });

      it(
        "listInstances (when the provider has it) lists them, and terminate works with the cluster rebuilt from their tags",
        async (context) => {
          if (!provider.listInstances) return context.skip("the provider has no listInstances");
          const current = requireCluster();
          const ids = requireInstances().map((instance) => instance.id);
          const all = await provider.listInstances(callOptions());
          const mine = all.filter((instance) => ids.includes(instance.id));
          expect(mine.map((instance) => instance.id).sort()).toEqual([...ids].sort());
          expect(mine.flatMap((instance) => instanceProblems(instance, current))).toEqual([]);
          // What `skyward down` does: it has no cluster object, only what listInstances returned.
          const first = mine[0] as Instance;
          await provider.terminate({
            ...callOptions(),
            cluster: clusterFromInstance(provider.name, first),
            ids: [first.id],
          });
          const after = await provider.getInstance({ ...callOptions(), cluster: current, id: first.id });
          expect(
            after === null || after.status === "terminated" || after.status === "stopping",
            `after terminate with the rebuilt cluster, ${first.id} is ${after?.status}`,
          ).toBe(true);
        },
        timeoutMs,
      );

      it(
        "terminate is idempotent: twice, with unknown ids, with no ids",
        async () => {
          const current = requireCluster();
          const ids = requireInstances().map((instance) => instance.id);
          await provider.terminate({ ...callOptions(), cluster: current, ids });
          await provider.terminate({ ...callOptions(), cluster: current, ids });
          await provider.terminate({ ...callOptions(), cluster: current, ids: [unknownId] });
          await provider.terminate({ ...callOptions(), cluster: current, ids: [...ids, unknownId] });
          await provider.terminate({ ...callOptions(), cluster: current, ids: [] });
        },
        timeoutMs,
      );

      it(
        "after terminate, getInstance returns null or a terminated instance",
        async () => {
          const current = requireCluster();
          const deadline = Date.now() + timeoutMs / 2;
          for (const instance of requireInstances()) {
            let found = await provider.getInstance({ ...callOptions(), cluster: current, id: instance.id });
            while (found !== null && found.status !== "terminated" && Date.now() < deadline) {
              await sleep(250);
              found = await provider.getInstance({ ...callOptions(), cluster: current, id: instance.id });
            }
            expect(
              found === null ? "null" : found.status,
              `getInstance(${JSON.stringify(instance.id)})`,
            ).toMatch(/^(null|terminated)$/);
          }
          expect(
            await provider.getInstance({ ...callOptions(), cluster: current, id: unknownId }),
          ).toBeNull();
        },
        timeoutMs,
      );

      it(
        "teardown (twice) leaves nothing behind",
        async () => {
          const current = requireCluster();
          await provider.teardown({ ...callOptions(), cluster: current });
          await provider.teardown({ ...callOptions(), cluster: current });
          tornDown = true;
          expect(await leftovers()).toEqual([]);
          const ids = instances.map((instance) => instance.id);
          const live = (await listed()).filter(
            (instance) => ids.includes(instance.id) && instance.status !== "terminated",
          );
          expect(live.map((instance) => `${instance.id} (${instance.status})`)).toEqual([]);
        },
        timeoutMs,
      );

      it(
        "cleanup (when the provider has it) removes what prepare made for pools without instances, one pool at a time, with no cluster object",
        async (context) => {
          if (!provider.cleanup) return context.skip("the provider has no cleanup");
          const chosen = offer;
          if (!chosen) throw new Error("prepare did not run (see the prepare test)");
          const spec = options.prepareSpec ? await options.prepareSpec(poolSpec) : poolSpec;
          // What earlier checks left (a leak they already reported) is not this check's to judge.
          const before = await leftovers();
          // Two pools whose clients died right after prepare: each left what it shares, no instance.
          const first = await provider.prepare({
            ...callOptions(),
            spec,
            offer: chosen,
            poolId: `conf1${suffix}`,
          });
          orphans.push(first);
          const second = await provider.prepare({
            ...callOptions(),
            spec,
            offer: chosen,
            poolId: `conf2${suffix}`,
          });
          orphans.push(second);
          const both = await leftovers();

          const result = await provider.cleanup({ ...callOptions(), pools: [first.poolId] });
          expect(Array.isArray(result.removed) && Array.isArray(result.left)).toBe(true);
          expect(result.left, "a pool without instances keeps nothing").toEqual([]);
          for (const resource of result.removed) {
            expect(resource.poolId).toBe(first.poolId);
            expect(typeof resource.kind === "string" && resource.kind !== "").toBe(true);
            expect(typeof resource.id === "string" && resource.id !== "").toBe(true);
          }
          if (options.leftovers) {
            const afterFirst = await leftovers();
            // Only the named pool's resources went: the other pool's are all still there.
            expect(afterFirst.length).toBeLessThan(both.length);
            expect(both).toEqual(expect.arrayContaining([...afterFirst]));
          }
          expect(await provider.cleanup({ ...callOptions(), pools: [first.poolId] })).toEqual({
            removed: [],
            left: [],
          });
          await provider.cleanup({ ...callOptions(), pools: [second.poolId] });
          expect(await leftovers()).toEqual(before);
          orphans.length = 0;
        },
        timeoutMs,
      );
    });

    describe.skipIf(!options.pool)("pool", () => {
      it(
        "a pool on it answers on every node its launchWorker started, and closing it leaves nothing behind",
        async () => {
          const input: ProviderConformancePool = typeof options.pool === "object" ? options.pool : {};
          const { options: poolOptions, ...fields } = input;
          const before = await leftovers();
          const endpoints: unknown[] = [];
          const isHead = python<[], boolean>("skyward:is_head");
          let ids: string[] = [];
          {
            await using pool = await compute(
              {
                nodes: provisionCount,
                ...options.spec,
                ...fields,
                provider: recordingLaunches(provider, endpoints),
                options: { console: false, ...poolOptions },
              },
              { handleSignals: false, signal: AbortSignal.timeout(timeoutMs) },
            );
            const nodes = pool.nodes();
            ids = nodes.map((node) => node.instanceId);
            expect(nodes.length).toBeGreaterThan(0);
            expect(nodes.filter((node) => !node.ready).map((node) => node.index)).toEqual([]);
            expect(new Set(ids).size, "each node has its own instance").toBe(nodes.length);
            expect(endpoints.length, "the pool starts every node with launchWorker").toBeGreaterThanOrEqual(
              nodes.length,
            );
            expect(endpoints.flatMap((endpoint) => workerEndpointProblems(endpoint))).toEqual([]);
            const heads = await pool.broadcast(isHead());
            expect(heads.length, "every node's worker answers").toBe(nodes.length);
            expect(heads.filter(Boolean).length, "exactly one worker is the head").toBe(1);
          }
          expect(await leftovers()).toEqual(before);
          const live = (await listed()).filter(
            (instance) => ids.includes(instance.id) && instance.status !== "terminated",
          );
          expect(live.map((instance) => `${instance.id} (${instance.status})`)).toEqual([]);
        },
        2 * timeoutMs,
      );
    });
  });
}
