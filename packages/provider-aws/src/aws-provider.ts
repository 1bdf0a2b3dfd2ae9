/**
 * The AWS provider: EC2 instances, spot or on-demand, in the default VPC (or a given subnet), with a
 * security group and a key pair made for each pool and removed with it. Everything it creates is
 * tagged `skyward:pool`, `skyward:cluster`, `skyward:owner` (user@host), `skyward:region` and `Name`,
 * so `listInstances` (and the CLI) find it again. This file puts the provider together; each concern
 * has its own module (settings, pricing, offers, images, networking, key pairs, placement groups,
 * preparing, provisioning, instances, clean-up).
 */
import { existsSync } from "node:fs";
import { DescribeRegionsCommand, type Instance as Ec2Instance } from "@aws-sdk/client-ec2";
import { ConnectionError, ProvisionError } from "@skyward/core";
import type {
  Cluster,
  ClusterFromTags,
  Instance,
  PoolResource,
  ProviderV1,
  RecordedCluster,
} from "@skyward/core/contract";
import { IncompleteListingError } from "@skyward/core/contract";
import {
  fitsAllocationAndBudget,
  hourlyPriceFromTags,
  privateKeyPath,
  rememberedStandIns,
  requireOwnOffer,
  sshReachableStatus,
} from "@skyward/provider-utils";
import { launchSshWorker, reconnectSshWorker } from "@skyward/ssh";
import {
  type AwsClients,
  accountKeyOf,
  awsCall,
  createClientFactory,
  credentialSource,
  PROVIDER_NAME,
} from "./aws-api.js";
import { cleanupRegion, teardownCluster } from "./cleanup.js";
import { describeInstanceTypes, type InstanceType } from "./instance-types.js";
import {
  AWS_TAGS,
  describeInstances,
  fromAwsTags,
  LaunchLedger,
  LIVE_STATES,
  statusOf,
  terminateIds,
} from "./instances.js";
import { buildOffer, fetchSpotPrices, instanceTypeMatches } from "./offers.js";
import { type AwsClusterData, prepareCluster } from "./prepare.js";
import { defaultPricingEndpoint, type RegionPrices, regionPrices } from "./pricing.js";
import { provisionInstances } from "./provisioning.js";
import { rememberedRegions } from "./regions.js";
import {
  type AwsSettings,
  checkPoolRegion,
  type ResolvedAwsSettings,
  resolveAwsSettings,
} from "./settings.js";

export { AWS_TAGS } from "./instances.js";
export { type AwsClusterData, DEFAULT_ROOT_VOLUME_GB, refuseRoleVolumesWithoutProfile } from "./prepare.js";
export { CLUSTER_FAILED_LAUNCH_LIMIT } from "./provisioning.js";

/**
 * The AWS provider: `AWS()` uses the defaults (us-east-1, the standard credential chain). Settings are
 * validated at once (a `ConfigurationError` names the field); credentials are looked up lazily, on
 * the first call that needs them.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { AWS } from "@skyward/provider-aws";
 *
 * await using pool = await sky.compute({ provider: AWS({ region: "us-west-2" }), accelerator: sky.accelerators.L4() });
 * ```
 */
export function AWS(settings: AwsSettings = {}): ProviderV1<AwsClusterData> {
  return createFromResolved(resolveAwsSettings(settings, "AWS"));
}

/**
 * Creates the provider from a `skyward.toml` table (`[providers.x]` with `type = "aws"`), its keys
 * already in camelCase: `region`, `regions`, `endpoint`, `profile`, `instanceProfile`, `subnetId`,
 * `associatePublicIp`, `sshIngress`, `securityGroupId`, `keyName`, `identityFile`, `amiId`, `sshUser`,
 * `root`, `onDemandPrices`, `pricingEndpoint`, `tags`, `spotMaxPrice`.
 */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<AwsClusterData> {
  return createFromResolved(resolveAwsSettings(settings, ""));
}

function createFromResolved(settings: ResolvedAwsSettings): ProviderV1<AwsClusterData> {
  const clientsFor = createClientFactory(settings);
  const credentials = credentialSource(settings);
  const pricingEndpoint = settings.pricingEndpoint ?? defaultPricingEndpoint(settings.endpoint);
  const pricesByRegion = new Map<string, Promise<RegionPrices | { error: string }>>();
  /** Instances this provider launched, with when: AWS may not know them yet (eventual consistency). */
  const ledger = new LaunchLedger();
  /** Failed `RunInstances` calls in a row (no capacity) per cluster. */
  const failedLaunches = new Map<string, number>();
  const pricesOf = (region: string, signal: AbortSignal) => {
    let known = pricesByRegion.get(region);
    if (!known) {
      known = regionPrices({ region, endpoint: pricingEndpoint, credentials, signal }).catch(
        (error: unknown) => ({ error: `Price List API: ${(error as Error).message}` }),
      );
      pricesByRegion.set(region, known);
      // A failure is kept for a minute only: the next offers call asks again.
      void known.then((value) => {
        if ("error" in value) setTimeout(() => pricesByRegion.delete(region), 60_000).unref();
      });
    }
    return known;
  };
  /**
   * The regions `listInstances` and `cleanup` look in; with `regions: "all"` and `DescribeRegions`
   * refused (a policy without `ec2:DescribeRegions`), the region and the remembered ones, with why the
   * others were not searched: one refused call must not hide the instances Skyward knows where to find.
   */
  const searchRegions = async (signal: AbortSignal): Promise<{ regions: string[]; unsearched?: string }> => {
    const remembered = async () => [
      ...new Set([
        settings.region,
        ...(settings.regions === "all" ? [] : settings.regions),
        ...(await rememberedRegions(settings.endpoint)),
      ]),
    ];
    if (settings.regions !== "all") return { regions: await remembered() };
    try {
      const found = await awsCall("DescribeRegions", signal, () =>
        clientsFor(settings.region).ec2.send(new DescribeRegionsCommand({}), { abortSignal: signal }),
      );
      const names = (found.Regions ?? [])
        .map((region) => region.RegionName)
        .filter((name): name is string => !!name);
      return { regions: [...new Set([settings.region, ...names])] };
    } catch (error) {
      signal.throwIfAborted();
      const regions = await remembered();
      const why = `regions "all": could not list the account's regions (${(error as Error).message}), so only ${regions.join(", ")} ${regions.length === 1 ? "was" : "were"} searched; allow ec2:DescribeRegions or give regions as a list`;
      return { regions, unsearched: why };
    }
  };
  const instanceTypes = new Map<string, Promise<InstanceType[]>>();
  /** The offer cache's key, made on its first read. */
  let cacheKey: string | undefined;

  const typesOf = (clients: AwsClients, signal: AbortSignal): Promise<InstanceType[]> => {
    let known = instanceTypes.get(clients.region);
    if (!known) {
      // Cached for the provider's life: instance types do not change while a program runs.
      known = describeInstanceTypes(clients.ec2, signal);
      instanceTypes.set(clients.region, known);
      known.catch(() => instanceTypes.delete(clients.region));
    }
    return known;
  };

  const mappingOf = rememberedStandIns(settings.sshAddress);

  /** An EC2 instance as a Skyward instance; SSH coordinates once it runs. */
  const toInstance = (
    raw: Ec2Instance,
    key: { privateKey?: string; identityFile?: string },
    fallbackOfferId: string,
  ): Instance => {
    const id = raw.InstanceId ?? "";
    const tags = fromAwsTags(raw.Tags);
    const publicIp = raw.PublicIpAddress ?? null;
    const status = statusOf(raw);
    const mapping =
      status === "running" ? mappingOf({ id, publicIp, privateIp: raw.PrivateIpAddress ?? null }) : undefined;
    const privateIp = mapping?.privateIp ?? raw.PrivateIpAddress ?? null;
    const host = mapping?.host ?? publicIp ?? raw.PrivateIpAddress ?? null;
    const privateKey = mapping?.privateKey ?? key.privateKey;
    const ssh =
      status === "running" && host !== null
        ? Object.freeze({
            host,
            port: mapping?.port ?? 22,
            user: mapping?.user ?? settings.sshUser,
            ...(privateKey !== undefined ? { privateKey } : {}),
            ...(mapping?.privateKey === undefined && key.identityFile !== undefined
              ? { identityFile: key.identityFile }
              : {}),
            ...(mapping?.hostKeyFingerprint !== undefined
              ? { hostKeyFingerprint: mapping.hostKeyFingerprint }
              : {}),
            root: mapping?.root ?? settings.root,
          })
        : null;
    return Object.freeze({
      id,
      status: sshReachableStatus(status, ssh),
      publicIp,
      privateIp,
      ssh,
      spot: raw.InstanceLifecycle === "spot",
      hourlyPrice: hourlyPriceFromTags(tags),
      offerId: tags[AWS_TAGS.offer] ?? fallbackOfferId,
      createdAt: raw.LaunchTime?.getTime() ?? Date.now(),
      tags: Object.freeze(tags),
    });
  };

  const clusterKey = (cluster: Cluster<AwsClusterData> | RecordedCluster<AwsClusterData>) => ({
    ...(cluster.ssh?.privateKey !== undefined ? { privateKey: cluster.ssh.privateKey } : {}),
    ...(cluster.specific?.keyFile !== undefined ? { identityFile: cluster.specific.keyFile } : {}),
  });

  /**
   * The cluster's region. `terminate`, `getInstance` and `teardown` also take a cluster rebuilt from an
   * instance's tags (the CLI's `skyward down`), which has no `specific`.
   */
  const regionOf = (
    cluster: Cluster<AwsClusterData> | RecordedCluster<AwsClusterData> | ClusterFromTags,
  ): string => cluster.specific?.region ?? (cluster.region || settings.region);

  return {
    specificationVersion: "v1",
    name: PROVIDER_NAME,
    // Instance types change rarely: a catalogue, whose offers the core may cache for a day.
    capabilities: Object.freeze({ spot: true, offerCache: "catalogue" }),
    // Every setting the offers depend on, prices included: a provider with other `onDemandPrices`,
    // another Price List endpoint, another EC2 endpoint (also one the SDK takes from the environment) or
    // another account (zone names and the types offered in them are the account's) must not be handed
    // offers the core cached for another. Read when the core first asks, as the credential chain is.
    // Not the subnet, security group, key pair, AMI, login or instance profile: they shape the instance.
    get cacheKey() {
      cacheKey ??= JSON.stringify([
        settings.region,
        settings.endpoint ?? process.env.AWS_ENDPOINT_URL_EC2 ?? process.env.AWS_ENDPOINT_URL ?? null,
        accountKeyOf(settings),
        pricingEndpoint,
        Object.entries(settings.onDemandPrices).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
      ]);
      return cacheKey;
    },

    async offers({ query, signal }) {
      checkPoolRegion(query.region);
      const clients = clientsFor(query.region ?? settings.region);
      const candidates = (await typesOf(clients, signal)).filter((type) => instanceTypeMatches(type, query));
      if (candidates.length === 0) return [];
      const spotPrices =
        query.allocation === "on-demand"
          ? new Map()
          : await fetchSpotPrices(
              clients.ec2,
              candidates.filter((type) => type.spot).map((type) => type.instanceType),
              signal,
            );
      // On-demand prices of the region, from the Price List API (cached on disk): asked unless spot only.
      const regional = query.allocation === "spot" ? undefined : await pricesOf(clients.region, signal);
      const now = new Date();
      return candidates
        .map((type) =>
          buildOffer(
            type,
            {
              region: clients.region,
              spotByZone: spotPrices.get(type.instanceType) ?? new Map(),
              onDemandOverrides: settings.onDemandPrices,
              ...(regional !== undefined ? { regional } : {}),
              now,
            },
            query.architecture,
          ),
        )
        .filter((offer) => fitsAllocationAndBudget(offer, query));
    },

    async prepare({ spec, offer, signal, poolId }) {
      requireOwnOffer(offer, PROVIDER_NAME, "AWS");
      return prepareCluster(settings, clientsFor(offer.region), { spec, offer, poolId, signal });
    },

    async provision({ cluster, count, signal }) {
      // Handed back as EC2 answered (pending): the pool polls getInstance until each runs.
      const launched = await provisionInstances(
        { settings, ledger, failedLaunches },
        clientsFor(cluster.specific.region),
        cluster,
        count,
        signal,
      );
      const key = clusterKey(cluster);
      return launched.map((raw) => toInstance(raw, key, cluster.offer.id));
    },

    async getInstance({ cluster, id, signal }) {
      if (!/^i-[0-9a-f]{8,17}$/.test(id)) return null;
      const clients = clientsFor(regionOf(cluster));
      const [raw] = await describeInstances(clients, [{ Name: "instance-id", Values: [id] }], signal);
      if (raw) return toInstance(raw, clusterKey(cluster), cluster.offer?.id ?? "");
      // Launched moments ago and not visible yet (eventual consistency): pending, not gone.
      return ledger.isRecent(id)
        ? toInstance(
            { InstanceId: id, State: { Name: "pending" } },
            clusterKey(cluster),
            cluster.offer?.id ?? "",
          )
        : null;
    },

    launchWorker: launchSshWorker,

    async reconnectWorker(options) {
      // A detached pool's node, found again by its id: its SSH key is read again from the cluster's
      // key file (the state file records its path, not the key).
      const { cluster, instance, nodeId, signal } = options;
      const clients = clientsFor(regionOf(cluster));
      const [raw] = await describeInstances(
        clients,
        [{ Name: "instance-id", Values: [instance.id] }],
        signal,
      );
      const found = raw ? toInstance(raw, clusterKey(cluster), cluster.offer?.id ?? "") : null;
      if (found?.status !== "running") {
        throw new ConnectionError({
          host: instance.id,
          node: nodeId,
          message: `instance ${instance.id} of the detached pool is ${found ? found.status : "gone"}`,
        });
      }
      return reconnectSshWorker({ ...options, instance: found });
    },

    async terminate({ cluster, ids, signal }) {
      await terminateIds(clientsFor(regionOf(cluster)), ids, ledger, signal);
    },

    async teardown({ cluster, signal }) {
      await teardownCluster(clientsFor(regionOf(cluster)), cluster, ledger, signal);
    },

    selfDestruct({ instance }) {
      if (settings.sshAddress) {
        // A stand-in host of a test is not the instance: it must never be shut down.
        const mapping = mappingOf({
          id: instance.id,
          publicIp: instance.publicIp,
          privateIp: instance.privateIp,
        });
        return mapping?.selfDestruct ?? "true";
      }
      // The instance was launched with InstanceInitiatedShutdownBehavior=terminate: shutting down ends it.
      return settings.sshUser === "root" ? "shutdown -h now" : "sudo shutdown -h now";
    },

    interruptionNotice({ instance }) {
      // Only spot instances get notices (a two-minute instance-action, or an earlier rebalance).
      if (!instance.spot) return null;
      if (settings.sshAddress) {
        const mapping = mappingOf({
          id: instance.id,
          publicIp: instance.publicIp,
          privateIp: instance.privateIp,
        });
        return mapping?.imdsEndpoint
          ? { kind: "aws-imds", endpoint: mapping.imdsEndpoint, intervalSeconds: 1 }
          : null;
      }
      return { kind: "aws-imds", endpoint: "http://169.254.169.254" };
    },

    async cleanup(options) {
      const { signal } = options;
      const waitSeconds = Math.max(0, options.waitSeconds ?? 0);
      const deadline = Date.now() + waitSeconds * 1000;
      const { regions, unsearched } = await searchRegions(signal);
      const results = await Promise.all(
        regions.map((region) =>
          cleanupRegion(clientsFor(region), options.pools, waitSeconds, deadline, signal),
        ),
      );
      const order = (a: PoolResource, b: PoolResource) =>
        a.poolId.localeCompare(b.poolId) || a.kind.localeCompare(b.kind) || a.id.localeCompare(b.id);
      const removed = results.flatMap((result) => result.removed).sort(order);
      const left = results.flatMap((result) => result.left).sort(order);
      if (unsearched === undefined) return { removed, left };
      // Cleaned where it could look; the rest is an error the user acts on, what was done told in it.
      const told = (resources: readonly PoolResource[]) =>
        resources.map((resource) => `${resource.kind} ${resource.id}`).join(", ") || "nothing";
      throw new ProvisionError({
        provider: PROVIDER_NAME,
        message: `${unsearched}. There it removed ${told(removed)} and left ${told(left)}`,
        isRetryable: false,
      });
    },

    async listInstances({ signal }) {
      const { regions, unsearched } = await searchRegions(signal);
      // Each region on its own: one that refuses (not enabled, denied by a policy) must not hide the
      // instances of the others from `skyward down`.
      const settled = await Promise.allSettled(
        regions.map((region) =>
          describeInstances(
            clientsFor(region),
            [
              { Name: "tag-key", Values: [AWS_TAGS.cluster] },
              { Name: "instance-state-name", Values: LIVE_STATES },
            ],
            signal,
          ),
        ),
      );
      signal.throwIfAborted();
      const found = settled.flatMap((outcome) => (outcome.status === "fulfilled" ? outcome.value : []));
      const instances = found.map((raw) => {
        const keyFile = raw.KeyName ? privateKeyPath(raw.KeyName) : undefined;
        return toInstance(
          raw,
          keyFile !== undefined && existsSync(keyFile) ? { identityFile: keyFile } : {},
          "",
        );
      });
      const missed = settled.flatMap((outcome, index) =>
        outcome.status === "rejected" ? [`${regions[index]}: ${(outcome.reason as Error).message}`] : [],
      );
      if (missed.length === 0 && unsearched === undefined) return instances;
      const first = settled.find((outcome) => outcome.status === "rejected");
      const unlisted =
        missed.length === 0
          ? []
          : [
              `could not list the instances of ${missed.length === 1 ? "a region" : `${missed.length} regions`} (${missed.join("; ")}); those found in the other ${regions.length - missed.length} are listed`,
            ];
      throw new IncompleteListingError({
        provider: PROVIDER_NAME,
        found: instances,
        message: [...(unsearched !== undefined ? [unsearched] : []), ...unlisted].join("; "),
        cause: first?.status === "rejected" ? first.reason : undefined,
      });
    },
  };
}
