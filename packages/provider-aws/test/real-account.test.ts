/**
 * What real AWS accounts do that plain moto does not, reproduced in front of moto (`aws-double.ts`,
 * which every moto suite gets, and per-test fault proxies), and the provider's answer to each:
 *
 * - the budget checked on the market actually launched (spot refused, on-demand over the cap);
 * - on-demand prices per region from the Price List API, cached on disk with their date; the
 *   built-in table only for us-east-1 when the API cannot be read, never for another region;
 * - eventual consistency right after `RunInstances` and `CreateSecurityGroup`
 *   (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html): an instance id
 *   unknown for a while to `TerminateInstances` and `DescribeInstances`, a group unknown to
 *   `AuthorizeSecurityGroupIngress`;
 * - the AMI's snapshot size against `diskGb` (`InvalidBlockDeviceMapping`): a smaller `diskGb` is raised;
 * - quota errors versus capacity errors, and a bound on `RunInstances` calls;
 * - a public address in a user's subnet; unsupported GPU families and the image lookup;
 * - regions for `listInstances`/`cleanup`; placement groups; one zone per pool; SSH ingress.
 */
import { readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { join } from "node:path";
import {
  CreateSubnetCommand,
  DescribeInstancesCommand,
  DescribeSecurityGroupsCommand,
  DescribeVpcsCommand,
  EC2Client,
  type Instance as Ec2Instance,
} from "@aws-sdk/client-ec2";
import * as sky from "@skyward/core";
import { NoCapacityError, options, ProvisionError, spec } from "@skyward/core";
import {
  type Cluster,
  clusterFromInstance,
  type Offer,
  type OfferQuery,
  resolvePoolSpec,
} from "@skyward/core/contract";
import { whenRunning } from "@skyward/testing";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_LAUNCH_ATTEMPTS } from "../src/allocation.js";
import {
  AWS,
  type AwsClusterData,
  CLUSTER_FAILED_LAUNCH_LIMIT,
  DEFAULT_ROOT_VOLUME_GB,
} from "../src/aws-provider.js";
import { ON_DEMAND_PRICES_AS_OF } from "../src/on-demand-prices.js";
import { priceCacheFile } from "../src/pricing.js";
import { MOTO_SNAPSHOT_GB, startAwsDouble } from "./aws-double.js";
import { type InjectedFault, startFaultProxy } from "./fault-proxy.js";
import { motoInventory, motoSkipReason, motoUbuntuAmi } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason();
const call = (poolId?: string) => ({
  signal: AbortSignal.timeout(180_000),
  ...(poolId !== undefined ? { poolId } : {}),
});

function poolSpec(fields: Parameters<typeof spec>[0] = {}) {
  return resolvePoolSpec(
    spec({ nodes: 1, ttl: 60, ...fields }),
    options({ sshTimeout: 120, bootstrapTimeout: 240 }),
  );
}

const cpuQuery: OfferQuery = {
  accelerator: null,
  vcpus: 2,
  memoryGb: 4,
  architecture: "x86_64",
  allocation: "on-demand",
};

async function offerOf(aws: ReturnType<typeof AWS>, query: OfferQuery, instanceType: string): Promise<Offer> {
  const offers = await aws.offers({ query, ...call() });
  const offer = offers.find((candidate) => candidate.instanceType === instanceType);
  if (!offer)
    throw new Error(`no ${instanceType} offer among ${offers.map((o) => o.instanceType).join(", ")}`);
  return offer;
}

const runs = (calls: { action: string; params: URLSearchParams }[]) =>
  calls.filter((entry) => entry.action === "RunInstances");

/** Every instance moto knows in `region`, any state. */
async function motoInstances(ec2: EC2Client): Promise<Ec2Instance[]> {
  const described = await ec2.send(new DescribeInstancesCommand({}));
  return (described.Reservations ?? []).flatMap((reservation) => reservation.Instances ?? []);
}

/** Removes from a `DescribeInstances` answer every reservation holding one of `hidden`. */
function dropReservations(body: string, hidden: (id: string) => boolean): string {
  const start = body.indexOf("<reservationSet>");
  const end = body.indexOf("</reservationSet>");
  if (start < 0 || end < 0) return body;
  const inner = body.slice(start + "<reservationSet>".length, end);
  const items: string[] = [];
  let depth = 0;
  let from = 0;
  const tags = /<item>|<\/item>/g;
  for (let match = tags.exec(inner); match; match = tags.exec(inner)) {
    if (match[0] === "<item>") {
      if (depth === 0) from = match.index;
      depth += 1;
    } else {
      depth -= 1;
      if (depth === 0) items.push(inner.slice(from, match.index + "</item>".length));
    }
  }
  const kept = items.filter(
    (item) => ![...item.matchAll(/<instanceId>(i-[0-9a-f]+)<\/instanceId>/g)].some((m) => hidden(m[1] ?? "")),
  );
  return `${body.slice(0, start)}<reservationSet>${kept.join("")}${body.slice(end)}`;
}

/**
 * A proxy that behaves as EC2 does right after `RunInstances` (eventual consistency,
 * https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html and
 * https://docs.aws.amazon.com/AWSEC2/latest/APIReference/query-api-troubleshooting.html#eventual-consistency):
 * for `terminateLagMs` `TerminateInstances` answers `InvalidInstanceID.NotFound` for a new instance;
 * for `describeLagMs` `DescribeInstances` by id answers the same and a filtered one leaves it out (for
 * `tagLagMs` when the filter is on a tag).
 */
async function eventuallyConsistent(
  target: string,
  lags: { terminateLagMs: number; describeLagMs: number; tagLagMs?: number },
  extraFault?: (action: string, params: URLSearchParams) => InjectedFault | undefined,
) {
  const created = new Map<string, number>();
  const within = (id: string, ms: number) => {
    const at = created.get(id);
    return at !== undefined && Date.now() - at < ms;
  };
  const idsIn = (params: URLSearchParams) =>
    [...params].filter(([key]) => /^InstanceId\.\d+$/.test(key)).map(([, value]) => value);
  const notFound = (id: string): InjectedFault => ({
    status: 400,
    code: "InvalidInstanceID.NotFound",
    message: `The instance ID '${id}' does not exist`,
  });
  const proxy = await startFaultProxy(
    target,
    (action, params) => {
      const injected = extraFault?.(action, params);
      if (injected) return injected;
      if (action === "TerminateInstances") {
        const hidden = idsIn(params).find((id) => within(id, lags.terminateLagMs));
        if (hidden) return notFound(hidden);
      }
      if (action === "DescribeInstances") {
        const hidden = idsIn(params).find((id) => within(id, lags.describeLagMs));
        if (hidden) return notFound(hidden);
      }
      return undefined;
    },
    (action, params, body) => {
      if (action === "RunInstances")
        for (const match of body.matchAll(/<instanceId>(i-[0-9a-f]+)<\/instanceId>/g))
          created.set(match[1] ?? "", Date.now());
      if (action !== "DescribeInstances") return body;
      const byTag = [...params].some(
        ([key, value]) => /^Filter\.\d+\.Name$/.test(key) && value.startsWith("tag"),
      );
      const lag = byTag ? (lags.tagLagMs ?? lags.describeLagMs) : lags.describeLagMs;
      return dropReservations(body, (id) => within(id, lag));
    },
  );
  return Object.assign(proxy, { launched: () => [...created.keys()] });
}

describe.skipIf(skipReason !== undefined)("AWS as real accounts behave (moto behind doubles)", () => {
  const suite = useMotoSuite("skyward-aws-real-");

  afterEach(async () => {
    await suite.moto.reset();
  });

  describe("budget", () => {
    it("spot-if-available never falls back to on-demand above maxHourlyCost", async () => {
      // moto quotes spot at $0.00001; g4dn.xlarge on demand is $0.526: the offer fits a $0.01 cap
      // only by its spot price. A proxy refuses spot for lack of capacity.
      const proxy = await startFaultProxy(suite.moto.endpoint, (action, params) =>
        action === "RunInstances" && params.get("InstanceMarketOptions.MarketType") === "spot"
          ? {
              status: 500,
              code: "InsufficientInstanceCapacity",
              message: "There is no Spot capacity available.",
            }
          : undefined,
      );
      try {
        const aws = AWS({ endpoint: proxy.endpoint, amiId: await motoUbuntuAmi(suite.ec2) });
        const query: OfferQuery = {
          accelerator: { name: "T4", count: 1 },
          allocation: "spot-if-available",
          maxHourlyCost: 0.01,
        };
        const offer = await offerOf(aws, query, "g4dn.xlarge");
        expect(offer.onDemandPrice).toBe(0.526);
        const capped = poolSpec({ allocation: "spot-if-available", maxHourlyCost: 0.01 });
        const cluster = await aws.prepare({ spec: capped, offer, ...call() });
        const failure = await aws
          .provision({ cluster, count: 2, ...call() })
          .catch((error: unknown) => error);
        expect(NoCapacityError.isInstance(failure)).toBe(true);
        const reasons = (failure as NoCapacityError).attempts.map((attempt) => attempt.reason);
        expect(reasons).toContain("on-demand: $0.526/h is over maxHourlyCost $0.01/h");
        expect(runs(proxy.calls).every((entry) => entry.params.has("InstanceMarketOptions.MarketType"))).toBe(
          true,
        );
        expect((await motoInventory(suite.moto.endpoint)).liveInstances).toEqual([]);
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
      }
    });
  });

  describe("prices", () => {
    it("reads on-demand prices per region from the Price List API, caches them on disk with their date", async () => {
      const pricing = await startAwsDouble(suite.moto.motoEndpoint);
      try {
        pricing.prices.set("us-west-2", { "t3.medium": 0.0418 });
        const settings = { endpoint: suite.moto.endpoint, pricingEndpoint: pricing.endpoint };
        const h100 = await offerOf(
          AWS(settings),
          { accelerator: { name: "H100", count: 1 }, allocation: "on-demand" },
          "p5.4xlarge",
        );
        // A type the built-in table lacks is priced, and so bought on demand.
        expect(h100).toMatchObject({
          onDemandPrice: 6.88,
          pricesAsOf: new Date().toISOString().slice(0, 10),
          specific: { onDemandPriceSource: "pricing-api" },
        });
        // The Price List API's price (after the June 2025 cut, as the built-in table now has it too).
        const eight = await offerOf(
          AWS(settings),
          { accelerator: { name: "H100", count: 8 }, allocation: "on-demand" },
          "p5.48xlarge",
        );
        expect(eight).toMatchObject({
          onDemandPrice: 55.04,
          specific: { onDemandPriceSource: "pricing-api" },
        });
        // Another region has its own prices.
        const west = await offerOf(AWS(settings), { ...cpuQuery, region: "us-west-2" }, "t3.medium");
        expect(west).toMatchObject({ region: "us-west-2", onDemandPrice: 0.0418 });
        // The request asks Linux, shared tenancy, no software, used capacity, in the region, every page
        // (the double serves decoys with other prices for each of these).
        const first = pricing.priceRequests[0] as { Filters: { Field: string; Value: string }[] };
        expect(Object.fromEntries(first.Filters.map((filter) => [filter.Field, filter.Value]))).toEqual({
          regionCode: "us-east-1",
          operatingSystem: "Linux",
          tenancy: "Shared",
          preInstalledSw: "NA",
          capacitystatus: "Used",
        });
        expect(pricing.priceRequests.length).toBeGreaterThan(2); // several pages per region

        // Cached on disk, with the date: a new provider reads the file, not the API.
        const file = priceCacheFile("us-east-1", pricing.endpoint);
        const cached = JSON.parse(await readFile(file, "utf8")) as {
          fetchedAt: string;
          prices: Record<string, number>;
        };
        expect(cached.prices["p5.4xlarge"]).toBe(6.88);
        expect(Date.now() - Date.parse(cached.fetchedAt)).toBeLessThan(600_000);
        const asked = pricing.priceRequests.length;
        await offerOf(AWS(settings), cpuQuery, "t3.medium");
        expect(pricing.priceRequests.length).toBe(asked);
        // Older than 7 days: read again.
        await writeFile(
          file,
          JSON.stringify({ ...cached, fetchedAt: new Date(Date.now() - 8 * 86_400_000).toISOString() }),
        );
        pricing.prices.set("us-east-1", { ...pricing.prices.get("us-east-1"), "t3.medium": 0.05 });
        expect((await offerOf(AWS(settings), cpuQuery, "t3.medium")).onDemandPrice).toBe(0.05);
        expect(pricing.priceRequests.length).toBeGreaterThan(asked);
      } finally {
        await pricing.close();
      }
    });

    it("without the Price List API: the dated table in us-east-1 only; elsewhere no on-demand launch at an unknown price", async () => {
      const pricing = await startAwsDouble(suite.moto.motoEndpoint);
      pricing.denyPricing = true;
      const proxy = await startFaultProxy(suite.moto.endpoint, (action, params) =>
        action === "RunInstances" && params.get("InstanceMarketOptions.MarketType") === "spot"
          ? {
              status: 500,
              code: "InsufficientInstanceCapacity",
              message: "There is no Spot capacity available.",
            }
          : undefined,
      );
      try {
        const aws = AWS({ endpoint: proxy.endpoint, pricingEndpoint: pricing.endpoint });
        const east = await offerOf(aws, cpuQuery, "t3.medium");
        expect(east).toMatchObject({
          onDemandPrice: 0.0416,
          pricesAsOf: ON_DEMAND_PRICES_AS_OF,
          specific: { onDemandPriceSource: "built-in" },
        });
        // us-west-2: nothing on demand, and the reason is carried.
        expect(await aws.offers({ query: { ...cpuQuery, region: "us-west-2" }, ...call() })).toEqual([]);
        const west = await offerOf(
          aws,
          { ...cpuQuery, allocation: "spot-if-available", region: "us-west-2" },
          "t3.medium",
        );
        expect(west.onDemandPrice).toBeNull();
        expect((west.specific as { onDemandPriceMissing: string }).onDemandPriceMissing).toContain(
          "AccessDeniedException",
        );
        // Spot refused: no fallback to on-demand at an unknown price.
        const cluster = await aws.prepare({
          spec: poolSpec({ allocation: "spot-if-available" }),
          offer: west,
          ...call(),
        });
        const failure = await aws
          .provision({ cluster, count: 1, ...call() })
          .catch((error: unknown) => error);
        expect((failure as NoCapacityError).attempts.map((attempt) => attempt.reason)).toContain(
          "on-demand: no known price, never launched",
        );
        expect(runs(proxy.calls).every((entry) => entry.params.has("InstanceMarketOptions.MarketType"))).toBe(
          true,
        );
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
        await pricing.close();
      }
    });
  });

  describe("eventual consistency", () => {
    it("terminate right after a start failing at SSH retries an id EC2 does not know yet; nothing is left", async () => {
      const proxy = await eventuallyConsistent(suite.moto.endpoint, {
        terminateLagMs: 6000,
        describeLagMs: 1500,
      });
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const offer = await offerOf(aws, cpuQuery, "t3.medium");
        const cluster = await aws.prepare({ spec: poolSpec({ allocation: "on-demand" }), offer, ...call() });
        const instances = await aws.provision({ cluster, count: 2, ...call() });
        expect(instances).toHaveLength(2);
        // The pool could not reach them over SSH: it terminates them at once.
        await aws.terminate({ cluster, ids: instances.map((instance) => instance.id), ...call() });
        const terminates = proxy.calls.filter((entry) => entry.action === "TerminateInstances");
        expect(terminates.length).toBeGreaterThan(2); // answered NotFound first, asked again
        expect((await motoInventory(suite.moto.endpoint)).liveInstances).toEqual([]);
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
      }
    });

    it("a pool whose start fails at SSH leaves nothing, though EC2 does not know its instances yet", async () => {
      // Every instance is mapped to a closed port on this machine: SSH fails after sshTimeout.
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
      const port = (closed.address() as { port: number }).port;
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      const proxy = await eventuallyConsistent(suite.moto.endpoint, {
        terminateLagMs: 20_000,
        describeLagMs: 1000,
        // A tag filter does not show them for a minute either: only terminating by id, retried, ends them.
        tagLagMs: 60_000,
      });
      try {
        const failure = await sky
          .compute({
            provider: AWS({ endpoint: proxy.endpoint, sshAddress: () => ({ host: "127.0.0.1", port }) }),
            nodes: 1,
            vcpus: 2,
            memoryGb: 4,
            architecture: "x86_64",
            allocation: "on-demand",
            options: { console: false, sshTimeout: 2, maxProvisionAttempts: 1 },
          })
          .then(
            async (pool) => {
              await pool[Symbol.asyncDispose]();
              return undefined;
            },
            (error: unknown) => error,
          );
        expect(failure).toBeInstanceOf(Error);
        expect(runs(proxy.calls).length).toBeGreaterThan(0);
        // The first TerminateInstances came within the lag and was answered NotFound; asked again.
        const terminates = proxy.calls.filter((entry) => entry.action === "TerminateInstances");
        expect(terminates.length).toBeGreaterThan(1);
        expect(await motoInventory(suite.moto.endpoint)).toMatchObject({
          liveInstances: [],
          securityGroups: [],
          keyPairs: [],
        });
      } finally {
        await proxy.close();
      }
    });

    it("instances the pool gives up right after RunInstances are terminated, though EC2 does not know them yet", async () => {
      let failDescribe = true;
      const proxy = await eventuallyConsistent(
        suite.moto.endpoint,
        { terminateLagMs: 5000, describeLagMs: 30_000 },
        (action) => {
          if (action !== "DescribeInstances" || !failDescribe) return undefined;
          const started = proxy.calls.some((entry) => entry.action === "RunInstances");
          if (!started) return undefined;
          failDescribe = false;
          return {
            status: 400,
            code: "UnauthorizedOperation",
            message: "You are not authorized to perform this operation.",
          };
        },
      );
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const offer = await offerOf(aws, cpuQuery, "t3.medium");
        const cluster = await aws.prepare({ spec: poolSpec({ allocation: "on-demand" }), offer, ...call() });
        // provision hands the instances back as RunInstances answered; the pool's wait for "running"
        // (getInstance) then fails, and the pool terminates what provision returned.
        const launched = await aws.provision({ cluster, count: 2, ...call() });
        expect(launched.map((instance) => instance.status)).toEqual(["pending", "pending"]);
        const failure = await aws
          .getInstance({ cluster, id: launched[0]?.id as string, ...call() })
          .catch((error: unknown) => error);
        expect(ProvisionError.isInstance(failure)).toBe(true);
        await aws.terminate({ cluster, ids: launched.map((instance) => instance.id), ...call() });
        expect(runs(proxy.calls)).toHaveLength(1);
        expect((await motoInventory(suite.moto.endpoint)).liveInstances).toEqual([]);
        // Not visible yet: pending to the provider that launched it, unknown to one that did not.
        const [id] = proxy.launched();
        expect((await aws.getInstance({ cluster, id: id as string, ...call() }))?.status).toBe("pending");
        expect(
          await AWS({ endpoint: proxy.endpoint }).getInstance({ cluster, id: id as string, ...call() }),
        ).toBeNull();
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
      }
    });

    it("teardown right after provision terminates instances a tag filter does not show yet", async () => {
      const proxy = await eventuallyConsistent(suite.moto.endpoint, {
        terminateLagMs: 4000,
        describeLagMs: 1000,
        tagLagMs: 60_000,
      });
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const offer = await offerOf(aws, cpuQuery, "t3.medium");
        const cluster = await aws.prepare({ spec: poolSpec({ allocation: "on-demand" }), offer, ...call() });
        const instances = await aws.provision({ cluster, count: 1, ...call() });
        expect(instances).toHaveLength(1);
        await aws.teardown({ cluster, ...call() });
        expect(await motoInventory(suite.moto.endpoint)).toMatchObject({
          liveInstances: [],
          securityGroups: [],
          keyPairs: [],
        });
      } finally {
        await proxy.close();
      }
    });

    it("retries a security group EC2 does not know yet right after creating it", async () => {
      let authorizeRefusals = 2;
      let runRefusals = 1;
      const proxy = await startFaultProxy(suite.moto.endpoint, (action, params) => {
        if (action === "AuthorizeSecurityGroupIngress" && authorizeRefusals > 0) {
          authorizeRefusals -= 1;
          return {
            status: 400,
            code: "InvalidGroup.NotFound",
            message: `The security group '${params.get("GroupId")}' does not exist`,
          };
        }
        if (action === "RunInstances" && runRefusals > 0) {
          runRefusals -= 1;
          return {
            status: 400,
            code: "InvalidGroup.NotFound",
            message: "The security group does not exist in VPC",
          };
        }
        return undefined;
      });
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const offer = await offerOf(aws, cpuQuery, "t3.medium");
        const cluster = await aws.prepare({ spec: poolSpec({ allocation: "on-demand" }), offer, ...call() });
        expect(proxy.calls.filter((entry) => entry.action === "AuthorizeSecurityGroupIngress")).toHaveLength(
          3,
        );
        const instances = await aws.provision({ cluster, count: 1, ...call() });
        expect(instances).toHaveLength(1);
        expect(runs(proxy.calls)).toHaveLength(2);
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
      }
    });
  });

  describe("root volume", () => {
    it("sizes the root volume from diskGb and the AMI's snapshot, 64 GiB by default; a diskGb below the snapshot is raised to it", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, () => undefined);
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const offer = await offerOf(aws, cpuQuery, "t3.medium");
        // diskGb is a minimum (spec.ts): below the image's snapshot, which EC2 refuses
        // (InvalidBlockDeviceMapping, the double's answer), the snapshot's size is asked instead —
        // a GPU image's ~100 GiB rather than a pool that fails every AWS offer.
        const sizes: string[] = [];
        for (const diskGb of [undefined, 100, 10]) {
          const cluster = await aws.prepare({
            spec: poolSpec({ allocation: "on-demand", ...(diskGb !== undefined ? { diskGb } : {}) }),
            offer,
            ...call(),
          });
          await aws.provision({ cluster, count: 1, ...call() });
          sizes.push(runs(proxy.calls).at(-1)?.params.get("BlockDeviceMapping.1.Ebs.VolumeSize") ?? "none");
          await aws.teardown({ cluster, ...call() });
        }
        expect(sizes).toEqual([String(DEFAULT_ROOT_VOLUME_GB), "100", String(MOTO_SNAPSHOT_GB)]);
      } finally {
        await proxy.close();
      }
    });
  });

  describe("quotas and capacity", () => {
    it("reports a vCPU quota as a quota to raise, after one RunInstances call", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, (action) =>
        action === "RunInstances"
          ? {
              status: 400,
              code: "VcpuLimitExceeded",
              message:
                "You have requested more vCPU capacity than your current vCPU limit of 0 allows for the instance bucket that the specified instance type belongs to.",
            }
          : undefined,
      );
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const offer = await offerOf(aws, cpuQuery, "t3.medium");
        const cluster = await aws.prepare({ spec: poolSpec({ allocation: "on-demand" }), offer, ...call() });
        const failure = await aws
          .provision({ cluster, count: 2, ...call() })
          .catch((error: unknown) => error);
        expect(ProvisionError.isInstance(failure) && !NoCapacityError.isInstance(failure)).toBe(true);
        expect((failure as Error).message).toContain(
          'request a quota increase for "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" (L-1216C47A) in us-east-1',
        );
        expect(runs(proxy.calls)).toHaveLength(1);
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
      }
    });

    it("bounds RunInstances calls for a 2-node pool without capacity, saying what was tried", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, (action, params) =>
        action === "RunInstances"
          ? params.has("InstanceMarketOptions.MarketType")
            ? {
                status: 500,
                code: "InsufficientInstanceCapacity",
                message: "There is no Spot capacity available.",
              }
            : {
                status: 400,
                code: "UnfulfillableCapacity",
                message: "Unable to fulfill capacity due to your request configuration.",
              }
          : undefined,
      );
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const offer = await offerOf(aws, { ...cpuQuery, allocation: "spot-if-available" }, "t3.medium");
        const cluster = await aws.prepare({
          spec: poolSpec({ allocation: "spot-if-available" }),
          offer,
          ...call(),
        });
        const failure = await aws
          .provision({ cluster, count: 2, ...call() })
          .catch((error: unknown) => error);
        expect(NoCapacityError.isInstance(failure)).toBe(true);
        expect(runs(proxy.calls).length).toBeLessThanOrEqual(MAX_LAUNCH_ATTEMPTS);
        const reasons = (failure as NoCapacityError).attempts.map((attempt) => attempt.reason);
        expect(
          reasons.some((reason) => /^spot in subnet-\w+: InsufficientInstanceCapacity/.test(reason)),
        ).toBe(true);
        expect(reasons.some((reason) => /^on-demand in subnet-\w+: UnfulfillableCapacity/.test(reason))).toBe(
          true,
        );
        expect((await motoInventory(suite.moto.endpoint)).liveInstances).toEqual([]);
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
      }
    });
  });

  describe("a whole pool without capacity", () => {
    it("a 2-node pool makes a bounded number of RunInstances calls over its offers and retries, then says what was tried", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, (action) =>
        action === "RunInstances"
          ? {
              status: 500,
              code: "InsufficientInstanceCapacity",
              message: "We currently do not have sufficient capacity.",
            }
          : undefined,
      );
      try {
        const failure = await sky
          .compute({
            provider: AWS({ endpoint: proxy.endpoint }),
            nodes: 2,
            vcpus: 2,
            memoryGb: 4,
            architecture: "x86_64",
            allocation: "spot-if-available",
            options: { console: false, provisionRetryDelay: 0 },
          })
          .then(
            async (pool) => {
              await pool[Symbol.asyncDispose]();
              return undefined;
            },
            (error: unknown) => error,
          );
        expect(NoCapacityError.isInstance(failure)).toBe(true);
        const calls = runs(proxy.calls).length;
        // The pool tries its 3 best offers; each cluster stops after CLUSTER_FAILED_LAUNCH_LIMIT
        // failed launches in a row (it was 218 calls before).
        expect(calls).toBeLessThanOrEqual(3 * CLUSTER_FAILED_LAUNCH_LIMIT);
        expect((failure as Error).message).toMatch(/RunInstances calls in a row for this pool/);
        expect(await motoInventory(suite.moto.endpoint)).toMatchObject({
          liveInstances: [],
          securityGroups: [],
          keyPairs: [],
        });
      } finally {
        await proxy.close();
      }
    });
  });

  describe("network", () => {
    it("asks a public address in the user's subnet, unless associatePublicIp is false", async () => {
      const vpcId = (
        await suite.ec2.send(new DescribeVpcsCommand({ Filters: [{ Name: "is-default", Values: ["true"] }] }))
      ).Vpcs?.[0]?.VpcId;
      const subnet = await suite.ec2.send(
        new CreateSubnetCommand({
          VpcId: vpcId,
          CidrBlock: "172.31.200.0/24",
          AvailabilityZone: "us-east-1a",
        }),
      );
      const subnetId = subnet.Subnet?.SubnetId as string;
      expect(subnet.Subnet?.MapPublicIpOnLaunch).toBe(false);
      const proxy = await startFaultProxy(suite.moto.endpoint, () => undefined);
      try {
        const seen: (string | null)[] = [];
        for (const associatePublicIp of [true, false]) {
          const aws = AWS({ endpoint: proxy.endpoint, subnetId, associatePublicIp });
          const offer = await offerOf(aws, cpuQuery, "t3.medium");
          const cluster = (await aws.prepare({
            spec: poolSpec({ allocation: "on-demand" }),
            offer,
            ...call(),
          })) as Cluster<AwsClusterData>;
          const [launched] = await aws.provision({ cluster, count: 1, ...call() });
          const instance = await whenRunning(aws, cluster, launched?.id ?? "");
          const params = runs(proxy.calls).at(-1)?.params;
          expect(params?.get("NetworkInterface.1.SubnetId")).toBe(subnetId);
          expect(params?.get("NetworkInterface.1.SecurityGroupId.1")).toBe(cluster.specific.securityGroupId);
          expect(params?.get("NetworkInterface.1.AssociatePublicIpAddress")).toBe(String(associatePublicIp));
          seen.push(instance?.publicIp ?? null);
          if (!associatePublicIp) expect(instance?.ssh?.host).toBe(instance?.privateIp);
          await aws.teardown({ cluster, ...call() });
        }
        expect(seen[0]).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
        expect(seen[1]).toBeNull();
      } finally {
        await proxy.close();
      }
    });

    it("opens SSH to this client's address or given CIDRs when asked; 0.0.0.0/0 by default", async () => {
      const checkip = createServer((_request, response) => response.end("203.0.113.7\n"));
      await new Promise<void>((resolve) => checkip.listen(0, "127.0.0.1", resolve));
      const saved = process.env.SKYWARD_AWS_CHECKIP_URL;
      process.env.SKYWARD_AWS_CHECKIP_URL = `http://127.0.0.1:${(checkip.address() as { port: number }).port}/`;
      try {
        const rules: string[][] = [];
        for (const sshIngress of ["client", ["198.51.100.0/24"]] as const) {
          const aws = AWS({ endpoint: suite.moto.endpoint, sshIngress });
          const offer = await offerOf(aws, cpuQuery, "t3.medium");
          const cluster = (await aws.prepare({
            spec: poolSpec(),
            offer,
            ...call(),
          })) as Cluster<AwsClusterData>;
          const [group] =
            (
              await suite.ec2.send(
                new DescribeSecurityGroupsCommand({ GroupIds: [cluster.specific.securityGroupId] }),
              )
            ).SecurityGroups ?? [];
          rules.push(
            group?.IpPermissions?.find((rule) => rule.FromPort === 22)?.IpRanges?.map(
              (range) => range.CidrIp ?? "",
            ) ?? [],
          );
          await aws.teardown({ cluster, ...call() });
        }
        expect(rules).toEqual([["203.0.113.7/32"], ["198.51.100.0/24"]]);
        expect(() => AWS({ sshIngress: ["10.0.0.0/33"] })).toThrow(
          /AWS\.sshIngress(\.0)?: expected "anywhere", "client" or a list of IPv4 CIDRs/,
        );
      } finally {
        if (saved === undefined) delete process.env.SKYWARD_AWS_CHECKIP_URL;
        else process.env.SKYWARD_AWS_CHECKIP_URL = saved;
        checkip.close();
      }
    });

    it("keeps a pool's nodes in one zone, and gives a multi-node GPU pool a cluster placement group", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, () => undefined);
      try {
        const aws = AWS({ endpoint: proxy.endpoint, amiId: await motoUbuntuAmi(suite.ec2) });
        const offer = await offerOf(
          aws,
          { accelerator: { name: "T4", count: 1 }, allocation: "on-demand" },
          "g4dn.xlarge",
        );
        const cluster = (await aws.prepare({
          spec: poolSpec({ allocation: "on-demand", nodes: 2 }),
          offer,
          ...call(),
        })) as Cluster<AwsClusterData>;
        const groupName = `skyward-${cluster.id}`;
        expect(cluster.specific.placementGroup).toBe(groupName);
        expect(suite.moto.double.placementGroups.get(groupName)).toMatchObject({
          strategy: "cluster",
          tags: { "skyward:cluster": cluster.id },
        });
        await aws.provision({ cluster, count: 1, ...call() });
        await aws.provision({ cluster, count: 1, ...call() }); // a second call: same zone
        const launches = runs(proxy.calls);
        expect(launches.map((entry) => entry.params.get("Placement.GroupName"))).toEqual([
          groupName,
          groupName,
        ]);
        expect(new Set(launches.map((entry) => entry.params.get("SubnetId"))).size).toBe(1);
        await aws.teardown({ cluster, ...call() });
        expect(suite.moto.double.placementGroups.size).toBe(0);

        // A CPU pool gets none; one left by a dead pool's prepare goes with cleanup.
        const cpu = await aws.prepare({
          spec: poolSpec({ nodes: 2 }),
          offer: await offerOf(aws, cpuQuery, "t3.medium"),
          ...call(),
        });
        expect((cpu as Cluster<AwsClusterData>).specific.placementGroup).toBeNull();
        const dead = await aws.prepare({ spec: poolSpec({ nodes: 2 }), offer, ...call("dead0003") });
        const cleaned = await aws.cleanup?.({ pools: "all", ...call() });
        expect(cleaned?.removed).toContainEqual({
          poolId: "dead0003",
          kind: "placement group",
          id: `skyward-${dead.id}`,
        });
        expect(suite.moto.double.placementGroups.size).toBe(0);
      } finally {
        await proxy.close();
      }
    });
  });

  describe("images", () => {
    it("refuses GPU families the NVIDIA base image cannot drive, and never falls back to another image", async () => {
      const proxy = await startFaultProxy(suite.moto.endpoint, () => undefined);
      try {
        const aws = AWS({ endpoint: proxy.endpoint });
        const v100 = await offerOf(
          aws,
          { accelerator: { name: "V100", count: 8 }, allocation: "on-demand" },
          "p3dn.24xlarge",
        );
        await expect(aws.prepare({ spec: poolSpec(), offer: v100, ...call() })).rejects.toThrow(
          /p3dn\.24xlarge: P3 \(V100\) instances are not supported by the Deep Learning Base OSS NVIDIA driver image; choose another instance type, or set amiId/,
        );
        const fractional = (
          await aws.offers({
            query: { accelerator: { name: "L4", count: 0.125 }, allocation: "spot" },
            ...call(),
          })
        ).find((offer) => offer.instanceType === "g6f.large") as Offer;
        await expect(aws.prepare({ spec: poolSpec(), offer: fractional, ...call() })).rejects.toThrow(
          /GRID driver/,
        );
        // moto has an old framework DLAMI ("Deep Learning AMI Ubuntu Linux - 2.4_Oct2017") but no Base
        // image: the search names the Base image only, and says to set amiId.
        const t4 = await offerOf(
          aws,
          { accelerator: { name: "T4", count: 1 }, allocation: "on-demand" },
          "g4dn.xlarge",
        );
        await expect(aws.prepare({ spec: poolSpec(), offer: t4, ...call() })).rejects.toThrow(
          /no public "Deep Learning Base OSS Nvidia Driver GPU AMI \(Ubuntu 22\.04\)\*" image matched; set amiId/,
        );
        const searches = proxy.calls.filter(
          (entry) => entry.action === "DescribeImages" && entry.params.get("Filter.1.Name") === "name",
        );
        expect(searches.map((entry) => entry.params.get("Filter.1.Value.1"))).toEqual([
          "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*",
        ]);
        expect(await motoInventory(suite.moto.endpoint)).toMatchObject({ securityGroups: [], keyPairs: [] });
      } finally {
        await proxy.close();
      }
    });
  });

  describe("regions", () => {
    it("skyward instances/down look in every region this machine launched pools in, or in the regions given", async () => {
      suite.moto.double.prices.set("us-west-2", { "t3.medium": 0.0418 });
      const aws = AWS({ endpoint: suite.moto.endpoint });
      const offer = await offerOf(aws, { ...cpuQuery, region: "us-west-2" }, "t3.medium");
      const cluster = await aws.prepare({ spec: poolSpec(), offer, ...call("west0001") });
      const [instance] = await aws.provision({ cluster, count: 1, ...call() });
      const regionsFile = join(suite.home.path, "aws", "regions.json");
      expect(JSON.parse(await readFile(regionsFile, "utf8"))[suite.moto.endpoint]).toContain("us-west-2");

      // A provider configured for us-east-1 finds it, by the record of regions…
      const fresh = AWS({ endpoint: suite.moto.endpoint });
      expect((await fresh.listInstances?.(call()))?.map((found) => found.id)).toEqual([instance?.id]);
      // …and, without the record, when told where to look.
      await rm(regionsFile);
      expect(await AWS({ endpoint: suite.moto.endpoint }).listInstances?.(call())).toEqual([]);
      for (const regions of [["us-west-2"], "all"] as const) {
        const found = await AWS({ endpoint: suite.moto.endpoint, regions }).listInstances?.(call());
        expect(found?.map((entry) => entry.id)).toEqual([instance?.id]);
      }
      const told = AWS({ endpoint: suite.moto.endpoint, regions: ["us-west-2"] });
      const [listed] = (await told.listInstances?.(call())) ?? [];
      await told.terminate({
        cluster: clusterFromInstance("aws", listed as NonNullable<typeof listed>),
        ids: [listed?.id as string],
        ...call(),
      });
      const west = new EC2Client({
        region: "us-west-2",
        endpoint: suite.moto.endpoint,
        credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
      });
      try {
        expect((await motoInstances(west)).map((raw) => raw.State?.Name)).toEqual(["terminated"]);
      } finally {
        west.destroy();
      }
      const cleaned = await told.cleanup?.({ pools: "all", ...call() });
      expect(cleaned?.removed.map((entry) => [entry.poolId, entry.kind])).toEqual([
        ["west0001", "key file"],
        ["west0001", "key pair"],
        ["west0001", "security group"],
      ]);
      expect(await motoInventory(suite.moto.endpoint, "us-west-2")).toMatchObject({
        securityGroups: [],
        keyPairs: [],
      });
    });
  });
});
