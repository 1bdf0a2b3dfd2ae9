/**
 * The AWS provider: EC2 instances, spot or on-demand, in the default VPC (or a given subnet), with a
 * security group and a key pair made for each pool and removed with it. Everything it creates is
 * tagged `skyward:pool`, `skyward:cluster`, `skyward:owner` (user@host), `skyward:region` and `Name`,
 * so `listInstances` (and the CLI) find it again.
 */
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import {
  type _InstanceType,
  AuthorizeSecurityGroupIngressCommand,
  CreateKeyPairCommand,
  CreatePlacementGroupCommand,
  CreateSecurityGroupCommand,
  DeleteKeyPairCommand,
  DeletePlacementGroupCommand,
  DeleteSecurityGroupCommand,
  DescribeInstancesCommand,
  DescribeKeyPairsCommand,
  DescribePlacementGroupsCommand,
  DescribeRegionsCommand,
  DescribeSecurityGroupsCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  type Instance as Ec2Instance,
  type Filter,
  RunInstancesCommand,
  type Subnet,
  type Tag,
  TerminateInstancesCommand,
} from "@aws-sdk/client-ec2";
import {
  ConfigurationError,
  ConnectionError,
  isVolumeStorageClient,
  NoCapacityError,
  ProvisionError,
  type Volume,
} from "@skyward/core";
import type {
  Cluster,
  ClusterFromTags,
  Instance,
  InstanceStatus,
  LeftPoolResource,
  Offer,
  PoolResource,
  ProviderV1,
  RecordedCluster,
} from "@skyward/core/contract";
import {
  createClusterId,
  fitsAllocationAndBudget,
  hourlyPriceFromTags,
  type Market,
  marketsFor,
  ownerTag,
  poolIdFromTags,
  privateKeyPath,
  removePrivateKey,
  requireOwnOffer,
  SKYWARD_TAGS,
  skywardTags,
  sshReachableStatus,
  writePrivateKey,
} from "@skyward/provider-utils";
import { launchSshWorker, reconnectSshWorker } from "@skyward/ssh";
import { launchAcrossMarkets, MAX_LAUNCH_ATTEMPTS } from "./allocation.js";
import {
  type AwsClients,
  accountKeyOf,
  awsCall,
  awsErrorCode,
  createClientFactory,
  credentialSource,
  isCapacityError,
  isTransientError,
  PROVIDER_NAME,
  sleep,
  translateAwsError,
} from "./aws-api.js";
import { bootWatchdogSeconds, renderBootWatchdog } from "./boot-watchdog.js";
import { describeInstanceTypes, type InstanceType } from "./instance-types.js";
import { resolveMachineImage } from "./machine-images.js";
import { type AwsOfferData, buildOffer, fetchSpotPrices, instanceTypeMatches } from "./offers.js";
import { PRICING_ENDPOINT, type RegionPrices, regionPrices } from "./pricing.js";
import { clientAddress, rememberedRegions, rememberRegion } from "./regions.js";
import {
  type AwsInstanceAddresses,
  type AwsSettings,
  type ResolvedAwsSettings,
  resolveAwsSettings,
  type SshAddressMapping,
} from "./settings.js";

/** The tag keys Skyward puts on what it creates at AWS: Skyward's own (`SKYWARD_TAGS` of `@skyward/provider-utils`) and `Name`. */
export const AWS_TAGS = Object.freeze({ ...SKYWARD_TAGS, name: "Name" } as const);

/** What the AWS provider keeps per cluster ({@link Cluster.specific}). Holds no secret. */
export interface AwsClusterData {
  /** The region everything is in. */
  readonly region: string;
  /** The VPC the instances run in. */
  readonly vpcId: string;
  /** The subnets instances are launched into, preferred (cheapest spot zone) first. */
  readonly subnetIds: readonly string[];
  /** The security group of the instances (one made for the pool is tagged with the cluster, and removed with it). */
  readonly securityGroupId: string;
  /** The key pair the instances accept. */
  readonly keyName: string;
  /** True when the provider created the key pair (and so removes it, and its file, in teardown). */
  readonly ownsKeyPair: boolean;
  /** The private key's 0600 file on this machine. */
  readonly keyFile: string;
  /** The AMI the instances boot. */
  readonly imageId: string;
  /** Where the AMI came from. */
  readonly imageSource: "setting" | "ssm" | "describe-images";
  /** The AMI's root device, for sizing the root volume; undefined when unknown. */
  readonly rootDeviceName: string | undefined;
  /** The tags on everything of this cluster. */
  readonly tags: Readonly<Record<string, string>>;
  /** The zone of each subnet in {@link AwsClusterData.subnetIds}. */
  readonly subnetZones: Readonly<Record<string, string>>;
  /** The root volume's size, GiB: max(`diskGb` or {@link DEFAULT_ROOT_VOLUME_GB}, the AMI's root snapshot). */
  readonly rootVolumeGb: number | undefined;
  /** The cluster placement group of a multi-node accelerator pool (made for it, removed with it), or null. */
  readonly placementGroup: string | null;
}

/**
 * A volume without keys (no `storage`, or endpoint settings without `accessKeyEnv`/`secretKeyEnv`) is
 * mounted with the instance's role (s3fs `iam_role=auto`, credentials from the instance metadata
 * service), and an instance has a role only when it is launched with an instance profile: without
 * `instanceProfile` such a volume cannot mount, so it is refused before anything starts. (A
 * `@skyward/storage` client's keys are resolved only when each node starts.)
 *
 * @throws {ConfigurationError} naming each such volume's `storage`.
 */
export function refuseRoleVolumesWithoutProfile(
  volumes: readonly Volume[],
  instanceProfile: string | undefined,
): void {
  if (instanceProfile !== undefined) return;
  const issues = volumes.flatMap((volume, index) => {
    const storage = volume.storage;
    if (isVolumeStorageClient(storage)) return [];
    if (storage && (storage.accessKeyEnv !== undefined || storage.secretKeyEnv !== undefined)) return [];
    return [
      {
        path: `volumes[${index}].storage`,
        message: `${volume.bucket} would be mounted with the instance's role, and the AWS provider sets no instanceProfile: set AWS({ instanceProfile }) to a profile whose role may read the bucket, or give storage: { endpoint, accessKeyEnv, secretKeyEnv }`,
      },
    ];
  });
  if (issues.length > 0) throw new ConfigurationError({ issues });
}

/**
 * The root volume of a node when the spec gives no `diskGb` (Ubuntu's image has 8 GiB, which a
 * PyTorch install fills); the AMI's snapshot when that is larger (the Deep Learning images').
 */
export const DEFAULT_ROOT_VOLUME_GB = 64;

/**
 * How long after `RunInstances` an instance id AWS answers `InvalidInstanceID.NotFound` for is
 * taken for one not visible yet, rather than gone: EC2's API is eventually consistent
 * (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html).
 */
const EVENTUAL_CONSISTENCY_MS = 5 * 60_000;

/** The longest terminate keeps retrying an id AWS does not know yet (bounded backoff). */
const NOT_FOUND_RETRY_MS = 90_000;

/**
 * The most `RunInstances` calls in a row that find no capacity for one cluster, over all its
 * `provision` calls (the pool asks again after "no capacity"): then `provision` fails for good and
 * the pool tries its next offer.
 */
export const CLUSTER_FAILED_LAUNCH_LIMIT = 16;

/** Instance states that still hold resources (everything but `terminated`). */
const LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"];

/** Pool ids tagged as they are (AWS tag values allow these characters); others are replaced by the cluster id. */
const POOL_TAG_VALUE = /^[A-Za-z0-9 _.:/=+@-]{1,128}$/;

/** The longest teardown waits for instances to end and the security group to become free. */
const TEARDOWN_LIMIT_MS = 15 * 60_000;

function toAwsTags(tags: Readonly<Record<string, string>>): Tag[] {
  return Object.entries(tags).map(([Key, Value]) => ({ Key, Value }));
}

function fromAwsTags(tags: readonly Tag[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const tag of tags ?? []) if (tag.Key !== undefined) out[tag.Key] = tag.Value ?? "";
  return out;
}

function statusOf(raw: Ec2Instance): InstanceStatus {
  switch (raw.State?.Name) {
    case "running":
      return "running";
    case "pending":
      return "pending";
    case "terminated":
      return "terminated";
    default:
      return "stopping";
  }
}

/** Orders subnets: the offer's cheapest spot zone first, then by spot price, then the rest. */
function orderSubnets(subnets: readonly Subnet[], offer: Offer): string[] {
  const data = offer.specific as Partial<AwsOfferData>;
  const prices = data.spotPriceByZone ?? {};
  const rank = (subnet: Subnet) => {
    const zone = subnet.AvailabilityZone ?? "";
    if (zone === data.availabilityZone) return -1;
    return prices[zone] ?? Number.POSITIVE_INFINITY;
  };
  return [...subnets]
    .filter((subnet) => subnet.SubnetId)
    .sort((a, b) => rank(a) - rank(b) || (a.AvailabilityZone ?? "").localeCompare(b.AvailabilityZone ?? ""))
    .map((subnet) => subnet.SubnetId as string);
}

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
 * `root`, `onDemandPrices`, `pricingEndpoint`.
 */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<AwsClusterData> {
  return createFromResolved(resolveAwsSettings(settings, ""));
}

function createFromResolved(settings: ResolvedAwsSettings): ProviderV1<AwsClusterData> {
  const clientsFor = createClientFactory(settings);
  const credentials = credentialSource(settings);
  const pricingEndpoint = settings.pricingEndpoint ?? settings.endpoint ?? PRICING_ENDPOINT;
  const pricesByRegion = new Map<string, Promise<RegionPrices | { error: string }>>();
  /** Instances this provider launched, with when: AWS may not know them yet (eventual consistency). */
  const launchedAt = new Map<string, { at: number; clusterId: string }>();
  /** Failed `RunInstances` calls in a row (no capacity) per cluster. */
  const failedLaunches = new Map<string, number>();
  const recentlyLaunched = (id: string) => {
    const launched = launchedAt.get(id);
    return launched !== undefined && Date.now() - launched.at < EVENTUAL_CONSISTENCY_MS;
  };
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
  /** The regions `listInstances` and `cleanup` look in. */
  const searchRegions = async (signal: AbortSignal): Promise<string[]> => {
    if (settings.regions === "all") {
      const found = await awsCall("DescribeRegions", signal, () =>
        clientsFor(settings.region).ec2.send(new DescribeRegionsCommand({}), { abortSignal: signal }),
      );
      const names = (found.Regions ?? [])
        .map((region) => region.RegionName)
        .filter((name): name is string => !!name);
      return [...new Set([settings.region, ...names])];
    }
    return [
      ...new Set([settings.region, ...settings.regions, ...(await rememberedRegions(settings.endpoint))]),
    ];
  };
  const instanceTypes = new Map<string, Promise<InstanceType[]>>();
  /** The offer cache's key, made on its first read. */
  let cacheKey: string | undefined;
  const mappings = new Map<string, SshAddressMapping>();

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

  const mappingOf = (addresses: AwsInstanceAddresses): SshAddressMapping | undefined => {
    if (!settings.sshAddress) return undefined;
    let mapping = mappings.get(addresses.id);
    if (!mapping) {
      mapping = settings.sshAddress(addresses);
      mappings.set(addresses.id, mapping);
    }
    return mapping;
  };

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

  /** Instances matching `filters`, every page. Filters never fail on unknown ids, unlike `InstanceIds`. */
  const describeInstances = async (
    clients: AwsClients,
    filters: Filter[],
    signal: AbortSignal,
  ): Promise<Ec2Instance[]> => {
    const found: Ec2Instance[] = [];
    let nextToken: string | undefined;
    do {
      const page = await awsCall("DescribeInstances", signal, () =>
        clients.ec2.send(
          new DescribeInstancesCommand({ Filters: filters, MaxResults: 1000, NextToken: nextToken }),
          {
            abortSignal: signal,
          },
        ),
      );
      for (const reservation of page.Reservations ?? []) found.push(...(reservation.Instances ?? []));
      nextToken = page.NextToken || undefined;
    } while (nextToken);
    return found;
  };

  /**
   * Terminates `ids`. An unknown id is skipped as gone — unless this provider launched it within
   * {@link EVENTUAL_CONSISTENCY_MS}: AWS may answer `InvalidInstanceID.NotFound` for an instance that
   * runs but is not visible yet, so it is asked again with bounded backoff ({@link NOT_FOUND_RETRY_MS}).
   */
  const terminateIds = async (
    clients: AwsClients,
    ids: readonly string[],
    signal: AbortSignal,
  ): Promise<void> => {
    const valid = [...new Set(ids)].filter((id) => /^i-[0-9a-f]{8,17}$/.test(id));
    const notFound = (code: string | undefined) =>
      code === "InvalidInstanceID.NotFound" || code === "InvalidInstanceID.Malformed";
    const terminateOne = async (id: string) => {
      const deadline = Date.now() + NOT_FOUND_RETRY_MS;
      let interval = 1000;
      for (;;) {
        try {
          await clients.ec2.send(new TerminateInstancesCommand({ InstanceIds: [id] }), {
            abortSignal: signal,
          });
          return;
        } catch (single) {
          signal.throwIfAborted();
          const code = awsErrorCode(single);
          if (!notFound(code)) throw translateAwsError(single, "TerminateInstances", signal);
          if (code === "InvalidInstanceID.Malformed" || !recentlyLaunched(id)) return;
          if (Date.now() >= deadline)
            throw new ProvisionError({
              provider: PROVIDER_NAME,
              message: `instance ${id}, launched moments ago, is still unknown to TerminateInstances after ${NOT_FOUND_RETRY_MS / 1000} s; check it in the EC2 console (aws ec2 describe-instances --instance-ids ${id})`,
              isRetryable: true,
            });
          await sleep(Math.min(interval, Math.max(0, deadline - Date.now())), signal);
          interval = Math.min(interval * 2, 10_000);
        }
      }
    };
    for (let start = 0; start < valid.length; start += 500) {
      const batch = valid.slice(start, start + 500);
      try {
        await clients.ec2.send(new TerminateInstancesCommand({ InstanceIds: batch }), {
          abortSignal: signal,
        });
      } catch (error) {
        signal.throwIfAborted();
        if (!notFound(awsErrorCode(error))) throw translateAwsError(error, "TerminateInstances", signal);
        // One unknown id fails the whole call: terminate the rest one by one.
        for (const id of batch) await terminateOne(id);
      }
    }
  };

  /** Polls until none of `ids` is pending (or the deadline passes); returns what it saw last. */
  const waitWhilePending = async (
    clients: AwsClients,
    ids: readonly string[],
    deadline: number,
    signal: AbortSignal,
  ): Promise<Ec2Instance[]> => {
    let interval = 1000;
    for (;;) {
      const described = await describeInstances(clients, [{ Name: "instance-id", Values: [...ids] }], signal);
      const seen = new Set(described.map((raw) => raw.InstanceId));
      const waiting =
        ids.some((id) => !seen.has(id)) || described.some((raw) => raw.State?.Name === "pending");
      if (!waiting || Date.now() >= deadline) return described;
      await sleep(Math.min(interval, Math.max(0, deadline - Date.now())), signal);
      interval = Math.min(interval * 2, 5000);
    }
  };

  const createSecurityGroup = async (
    clients: AwsClients,
    clusterId: string,
    vpcId: string,
    tags: Readonly<Record<string, string>>,
    signal: AbortSignal,
  ): Promise<string> => {
    const created = await awsCall("CreateSecurityGroup", signal, () =>
      clients.ec2.send(
        new CreateSecurityGroupCommand({
          GroupName: `skyward-${clusterId}`,
          Description: `Skyward pool ${clusterId}: SSH (port 22), all traffic within the group`,
          VpcId: vpcId,
          TagSpecifications: [{ ResourceType: "security-group", Tags: toAwsTags(tags) }],
        }),
        { abortSignal: signal },
      ),
    );
    const groupId = created.GroupId;
    if (!groupId)
      throw new ProvisionError({
        provider: PROVIDER_NAME,
        message: "CreateSecurityGroup returned no group id",
      });
    return groupId;
  };

  /**
   * Opens SSH (to {@link AwsSettings.sshIngress}) and all traffic within the group. A group just made
   * may be unknown for a moment (`InvalidGroup.NotFound`, eventual consistency:
   * https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html): asked again, bounded.
   */
  const openSecurityGroup = async (clients: AwsClients, groupId: string, signal: AbortSignal) => {
    const cidrs =
      settings.sshIngress === "anywhere"
        ? ["0.0.0.0/0"]
        : settings.sshIngress === "client"
          ? [`${await clientAddress(signal)}/32`]
          : [...settings.sshIngress];
    const deadline = Date.now() + 60_000;
    let interval = 500;
    for (;;) {
      try {
        await clients.ec2.send(
          new AuthorizeSecurityGroupIngressCommand({
            GroupId: groupId,
            IpPermissions: [
              {
                IpProtocol: "tcp",
                FromPort: 22,
                ToPort: 22,
                IpRanges: cidrs.map((CidrIp) => ({ CidrIp, Description: "SSH (Skyward)" })),
              },
              // Nodes talk to each other freely (head services, NCCL/gloo) on their private addresses.
              { IpProtocol: "-1", UserIdGroupPairs: [{ GroupId: groupId, Description: "within the pool" }] },
            ],
          }),
          { abortSignal: signal },
        );
        return;
      } catch (error) {
        signal.throwIfAborted();
        const code = awsErrorCode(error);
        if (
          (code !== "InvalidGroup.NotFound" && code !== "InvalidGroupId.NotFound") ||
          Date.now() >= deadline
        )
          throw translateAwsError(error, "AuthorizeSecurityGroupIngress", signal);
        await sleep(interval, signal);
        interval = Math.min(interval * 2, 5000);
      }
    }
  };

  const deleteSecurityGroup = async (
    clients: AwsClients,
    groupId: string,
    deadline: number,
    signal: AbortSignal,
  ) => {
    for (;;) {
      try {
        await clients.ec2.send(new DeleteSecurityGroupCommand({ GroupId: groupId }), { abortSignal: signal });
        return;
      } catch (error) {
        signal.throwIfAborted();
        const code = awsErrorCode(error);
        if (code === "InvalidGroup.NotFound" || code === "InvalidGroupId.NotFound") return;
        // Network interfaces of terminated instances let go of the group a little later.
        if (code !== "DependencyViolation" || Date.now() >= deadline)
          throw translateAwsError(error, `DeleteSecurityGroup ${groupId}`, signal);
        await sleep(5000, signal);
      }
    }
  };

  /**
   * Deletes a security group, retrying while it is still in use until `deadline`; resolves with why it
   * is left (still in use, or another API error), or undefined once it is gone.
   */
  const tryDeleteSecurityGroup = async (
    clients: AwsClients,
    groupId: string,
    deadline: number,
    signal: AbortSignal,
  ): Promise<string | undefined> => {
    for (;;) {
      try {
        await clients.ec2.send(new DeleteSecurityGroupCommand({ GroupId: groupId }), { abortSignal: signal });
        return undefined;
      } catch (error) {
        signal.throwIfAborted();
        const code = awsErrorCode(error);
        if (code === "InvalidGroup.NotFound" || code === "InvalidGroupId.NotFound") return undefined;
        if (code !== "DependencyViolation")
          return (translateAwsError(error, `DeleteSecurityGroup ${groupId}`, signal) as Error).message;
        if (Date.now() >= deadline)
          return "still in use (DependencyViolation): the network interfaces of ended instances are let go a little later, or something outside Skyward uses the group; run skyward down again shortly";
        await sleep(Math.min(5000, Math.max(0, deadline - Date.now())), signal);
      }
    }
  };

  /** Deletes a placement group; one already gone is fine. */
  const deletePlacementGroup = async (clients: AwsClients, groupName: string, signal: AbortSignal) => {
    try {
      await clients.ec2.send(new DeletePlacementGroupCommand({ GroupName: groupName }), {
        abortSignal: signal,
      });
    } catch (error) {
      signal.throwIfAborted();
      const code = awsErrorCode(error);
      if (code !== "InvalidPlacementGroup.Unknown" && code !== "InvalidPlacementGroup.NotFound")
        throw translateAwsError(error, `DeletePlacementGroup ${groupName}`, signal);
    }
  };

  /** The placement groups tagged with a cluster tag (all of them when `clusterId` is undefined). */
  const taggedPlacementGroups = async (
    clients: AwsClients,
    clusterId: string | undefined,
    signal: AbortSignal,
  ) => {
    const found = await awsCall("DescribePlacementGroups", signal, () =>
      clients.ec2.send(
        new DescribePlacementGroupsCommand({
          Filters:
            clusterId !== undefined
              ? [{ Name: `tag:${AWS_TAGS.cluster}`, Values: [clusterId] }]
              : [{ Name: "tag-key", Values: [AWS_TAGS.cluster] }],
        }),
        { abortSignal: signal },
      ),
    );
    return found.PlacementGroups ?? [];
  };

  const deleteKeyPair = async (clients: AwsClients, keyName: string, signal: AbortSignal) => {
    try {
      await clients.ec2.send(new DeleteKeyPairCommand({ KeyName: keyName }), { abortSignal: signal });
    } catch (error) {
      signal.throwIfAborted();
      if (awsErrorCode(error) !== "InvalidKeyPair.NotFound")
        throw translateAwsError(error, "DeleteKeyPair", signal);
    }
  };

  /** The default VPC's subnets (or the configured subnet), preferred zone first. */
  const findNetwork = async (
    clients: AwsClients,
    offer: Offer,
    signal: AbortSignal,
  ): Promise<{ vpcId: string; subnetIds: string[]; subnetZones: Record<string, string> }> => {
    if (settings.subnetId !== undefined) {
      const subnetId = settings.subnetId;
      const result = await awsCall("DescribeSubnets", signal, () =>
        clients.ec2.send(new DescribeSubnetsCommand({ SubnetIds: [subnetId] }), { abortSignal: signal }),
      );
      const vpcId = result.Subnets?.[0]?.VpcId;
      const zone = result.Subnets?.[0]?.AvailabilityZone ?? "";
      if (!vpcId)
        throw new ProvisionError({
          provider: PROVIDER_NAME,
          message: `subnet ${subnetId} not found in ${clients.region}`,
        });
      return { vpcId, subnetIds: [subnetId], subnetZones: { [subnetId]: zone } };
    }
    const vpcs = await awsCall("DescribeVpcs", signal, () =>
      clients.ec2.send(new DescribeVpcsCommand({ Filters: [{ Name: "is-default", Values: ["true"] }] }), {
        abortSignal: signal,
      }),
    );
    const vpcId = vpcs.Vpcs?.[0]?.VpcId;
    if (!vpcId) {
      throw new ProvisionError({
        provider: PROVIDER_NAME,
        message: `no default VPC in ${clients.region}: create one (aws ec2 create-default-vpc) or set subnetId`,
      });
    }
    const subnets = await awsCall("DescribeSubnets", signal, () =>
      clients.ec2.send(new DescribeSubnetsCommand({ Filters: [{ Name: "vpc-id", Values: [vpcId] }] }), {
        abortSignal: signal,
      }),
    );
    const all = subnets.Subnets ?? [];
    const defaults = all.filter((subnet) => subnet.DefaultForAz);
    const subnetIds = orderSubnets(defaults.length > 0 ? defaults : all, offer);
    if (subnetIds.length === 0)
      throw new ProvisionError({
        provider: PROVIDER_NAME,
        message: `the default VPC ${vpcId} has no subnets; set subnetId`,
      });
    const subnetZones = Object.fromEntries(
      all
        .filter((subnet) => subnet.SubnetId)
        .map((subnet) => [subnet.SubnetId as string, subnet.AvailabilityZone ?? ""]),
    );
    return { vpcId, subnetIds, subnetZones };
  };

  /** `cleanup` in one region: see the provider's `cleanup`. */
  const cleanupRegion = async (
    clients: AwsClients,
    pools: readonly string[] | "all",
    waitSeconds: number,
    deadline: number,
    signal: AbortSignal,
  ): Promise<{ removed: PoolResource[]; left: LeftPoolResource[] }> => {
    const wanted = pools === "all" ? undefined : new Set(pools);
    // Only what Skyward made carries a cluster tag: groups and key pairs given in the settings do not.
    const tagged = [{ Name: "tag-key", Values: [AWS_TAGS.cluster] }];
    const [groups, keys, placements] = await Promise.all([
      awsCall("DescribeSecurityGroups", signal, () =>
        clients.ec2.send(new DescribeSecurityGroupsCommand({ Filters: tagged }), { abortSignal: signal }),
      ),
      awsCall("DescribeKeyPairs", signal, () =>
        clients.ec2.send(new DescribeKeyPairsCommand({ Filters: tagged }), { abortSignal: signal }),
      ),
      taggedPlacementGroups(clients, undefined, signal),
    ]);
    interface Found {
      readonly kind: "security group" | "key pair" | "placement group";
      readonly id: string;
      readonly clusterId: string;
      readonly poolId: string;
    }
    const clusters = new Map<string, Found[]>();
    const collect = (kind: Found["kind"], id: string | undefined, rawTags: readonly Tag[] | undefined) => {
      const tags = fromAwsTags(rawTags);
      const clusterId = tags[AWS_TAGS.cluster];
      if (!id || !clusterId) return;
      const poolId = poolIdFromTags(tags);
      if (wanted && !wanted.has(poolId) && !wanted.has(clusterId)) return;
      clusters.set(clusterId, [...(clusters.get(clusterId) ?? []), { kind, id, clusterId, poolId }]);
    };
    for (const group of groups.SecurityGroups ?? []) collect("security group", group.GroupId, group.Tags);
    for (const key of keys.KeyPairs ?? []) collect("key pair", key.KeyName, key.Tags);
    for (const group of placements) collect("placement group", group.GroupName, group.Tags);

    const removed: PoolResource[] = [];
    const left: LeftPoolResource[] = [];
    const leave = (resources: readonly Found[], reason: string) => {
      for (const { kind, id, poolId } of resources) left.push({ poolId, kind, id, reason });
    };
    await Promise.all(
      [...clusters.entries()].map(async ([clusterId, resources]) => {
        const poolId = resources[0]?.poolId ?? clusterId;
        const liveFilter = [
          { Name: `tag:${AWS_TAGS.cluster}`, Values: [clusterId] },
          { Name: "instance-state-name", Values: LIVE_STATES },
        ];
        // Instances still in use keep their pool's resources; those shutting down are waited for.
        let interval = 1000;
        for (;;) {
          const live = await describeInstances(clients, liveFilter, signal);
          const inUse = live.filter((raw) => raw.State?.Name !== "shutting-down");
          if (inUse.length > 0) {
            const listed = inUse.map((raw) => `${raw.InstanceId} (${raw.State?.Name ?? "unknown"})`);
            return leave(
              resources,
              `pool ${poolId} still has ${inUse.length === 1 ? "an instance" : `${inUse.length} instances`}: ${listed.join(", ")}; terminate ${inUse.length === 1 ? "it" : "them"} first (skyward down --pool ${poolId})`,
            );
          }
          if (live.length === 0) break;
          if (Date.now() >= deadline) {
            const ids = live.map((raw) => raw.InstanceId).join(", ");
            return leave(
              resources,
              `${live.length === 1 ? "instance" : "instances"} ${ids} still shutting down after ${waitSeconds} s; run skyward down --pool ${poolId} again once ${live.length === 1 ? "it has" : "they have"} ended`,
            );
          }
          await sleep(Math.min(interval, Math.max(0, deadline - Date.now())), signal);
          interval = Math.min(interval * 2, 10_000);
        }
        for (const resource of resources.filter((entry) => entry.kind === "security group")) {
          const reason = await tryDeleteSecurityGroup(clients, resource.id, deadline, signal);
          if (reason === undefined) removed.push({ poolId, kind: resource.kind, id: resource.id });
          else leave([resource], reason);
        }
        for (const resource of resources.filter((entry) => entry.kind === "placement group")) {
          try {
            await deletePlacementGroup(clients, resource.id, signal);
            removed.push({ poolId, kind: resource.kind, id: resource.id });
          } catch (error) {
            signal.throwIfAborted();
            leave([resource], (error as Error).message);
          }
        }
        for (const resource of resources.filter((entry) => entry.kind === "key pair")) {
          try {
            await deleteKeyPair(clients, resource.id, signal);
          } catch (error) {
            signal.throwIfAborted();
            leave([resource], (error as Error).message);
            continue;
          }
          removed.push({ poolId, kind: resource.kind, id: resource.id });
          const keyFile = privateKeyPath(resource.id);
          if (existsSync(keyFile)) {
            await removePrivateKey(keyFile);
            removed.push({ poolId, kind: "key file", id: keyFile });
          }
        }
      }),
    );
    return { removed, left };
  };

  return {
    specificationVersion: "v1",
    name: PROVIDER_NAME,
    // Instance types change rarely: a catalogue, whose offers the core may cache for a day.
    capabilities: Object.freeze({ spot: true, volumes: false, images: true, offerCache: "catalogue" }),
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

    async prepare({ spec, offer, signal, poolId: requestedPoolId }) {
      requireOwnOffer(offer, PROVIDER_NAME, "AWS");
      refuseRoleVolumesWithoutProfile(spec.volumes, settings.instanceProfile);
      const clients = clientsFor(offer.region);
      // Each prepare (a pool may try several offers) makes its own cluster; the pool's id, when the pool
      // passes it, is tagged too, so `skyward instances` shows the id the pool's events and logs carry.
      const id = createClusterId("sky");
      const poolId =
        requestedPoolId !== undefined && POOL_TAG_VALUE.test(requestedPoolId) ? requestedPoolId : id;
      const tags = Object.freeze({
        ...skywardTags({ cluster: id, pool: poolId, owner: ownerTag(), region: clients.region }),
        [AWS_TAGS.name]: `skyward-${id}`,
      });
      let createdGroup: string | undefined;
      let createdKey: { keyName: string; keyFile: string } | undefined;
      let createdPlacement: string | undefined;
      try {
        // The image first: an unsupported type or a disk smaller than the image fails before anything is made.
        const image = await resolveMachineImage(clients, offer, settings.amiId, signal);
        const snapshotGb = image.rootSnapshotGb;
        if (spec.diskGb !== undefined && snapshotGb !== undefined && Math.ceil(spec.diskGb) < snapshotGb)
          throw new ConfigurationError({
            issues: [
              {
                path: "diskGb",
                message: `expected at least ${snapshotGb} GB: the root snapshot of ${image.imageId} (${offer.instanceType} in ${clients.region}) is ${snapshotGb} GiB, and EC2 refuses a smaller root volume (InvalidBlockDeviceMapping)`,
              },
            ],
          });
        const rootVolumeGb =
          image.rootDeviceName === undefined
            ? undefined
            : Math.max(
                spec.diskGb !== undefined ? Math.ceil(spec.diskGb) : DEFAULT_ROOT_VOLUME_GB,
                snapshotGb ?? 0,
              );
        await rememberRegion(settings.endpoint, clients.region).catch(() => undefined);
        const network = await findNetwork(clients, offer, signal);
        let securityGroupId = settings.securityGroupId;
        if (securityGroupId === undefined) {
          createdGroup = await createSecurityGroup(clients, id, network.vpcId, tags, signal);
          securityGroupId = createdGroup;
          await openSecurityGroup(clients, createdGroup, signal);
        }
        let key: { keyName: string; keyFile: string; privateKey: string };
        if (settings.keyName !== undefined && settings.identityFile !== undefined) {
          key = {
            keyName: settings.keyName,
            keyFile: settings.identityFile,
            privateKey: await readFile(settings.identityFile, "utf8").catch((error: unknown) => {
              throw new ProvisionError({
                provider: PROVIDER_NAME,
                message: `cannot read identityFile ${settings.identityFile}: ${(error as Error).message}`,
                cause: error,
              });
            }),
          };
        } else {
          const keyName = `skyward-${id}`;
          const created = await awsCall("CreateKeyPair", signal, () =>
            clients.ec2.send(
              new CreateKeyPairCommand({
                KeyName: keyName,
                KeyType: "ed25519",
                TagSpecifications: [{ ResourceType: "key-pair", Tags: toAwsTags(tags) }],
              }),
              { abortSignal: signal },
            ),
          );
          const privateKey = created.KeyMaterial;
          createdKey = { keyName, keyFile: privateKeyPath(keyName) };
          if (!privateKey)
            throw new ProvisionError({
              provider: PROVIDER_NAME,
              message: "CreateKeyPair returned no private key",
            });
          await writePrivateKey(keyName, privateKey);
          key = { ...createdKey, privateKey };
        }
        // A multi-node accelerator pool gets a cluster placement group: one zone, close together (NCCL).
        if (spec.nodes.max > 1 && offer.accelerator !== null) {
          const groupName = `skyward-${id}`;
          await awsCall("CreatePlacementGroup", signal, () =>
            clients.ec2.send(
              new CreatePlacementGroupCommand({
                GroupName: groupName,
                Strategy: "cluster",
                TagSpecifications: [{ ResourceType: "placement-group", Tags: toAwsTags(tags) }],
              }),
              { abortSignal: signal },
            ),
          );
          createdPlacement = groupName;
        }
        return Object.freeze({
          id,
          provider: PROVIDER_NAME,
          poolId,
          region: clients.region,
          spec,
          offer,
          ssh: Object.freeze({
            user: settings.sshUser,
            port: 22,
            privateKey: key.privateKey,
            identityFile: key.keyFile,
            sudo: settings.sshUser !== "root",
          }),
          specific: Object.freeze({
            region: clients.region,
            vpcId: network.vpcId,
            subnetIds: Object.freeze(network.subnetIds),
            securityGroupId,
            keyName: key.keyName,
            ownsKeyPair: createdKey !== undefined,
            keyFile: key.keyFile,
            imageId: image.imageId,
            imageSource: image.source,
            rootDeviceName: image.rootDeviceName,
            tags,
            subnetZones: Object.freeze(network.subnetZones),
            rootVolumeGb,
            placementGroup: createdPlacement ?? null,
          }),
        });
      } catch (error) {
        // Leave nothing behind: what this attempt created goes (with a fresh deadline, the signal may be spent).
        const cleanup = AbortSignal.timeout(60_000);
        if (createdKey) {
          await deleteKeyPair(clients, createdKey.keyName, cleanup).catch(() => undefined);
          await removePrivateKey(createdKey.keyFile).catch(() => undefined);
        }
        if (createdGroup) await deleteSecurityGroup(clients, createdGroup, 0, cleanup).catch(() => undefined);
        if (createdPlacement)
          await deletePlacementGroup(clients, createdPlacement, cleanup).catch(() => undefined);
        throw translateAwsError(error, "preparing the pool", signal);
      }
    },

    async provision({ cluster, count, signal }) {
      const { spec, offer, specific } = cluster;
      const clients = clientsFor(specific.region);
      const userData = Buffer.from(
        renderBootWatchdog({ root: settings.root, seconds: bootWatchdogSeconds(spec) }),
      ).toString("base64");
      const created: string[] = [];
      const zoneOf = (subnetId: string) => specific.subnetZones?.[subnetId] ?? "";
      const priceOf = (market: Market, subnetId: string): number | null => {
        if (market === "on-demand") return offer.onDemandPrice;
        const byZone = (offer.specific as Partial<AwsOfferData>).spotPriceByZone ?? {};
        return byZone[zoneOf(subnetId)] ?? offer.spotPrice;
      };
      const launchOnce = async (request: { market: Market; subnetId: string; count: number }) => {
        const price = priceOf(request.market, request.subnetId);
        const tags = toAwsTags({
          ...specific.tags,
          [AWS_TAGS.offer]: offer.id,
          ...(price !== null ? { [AWS_TAGS.hourlyPrice]: String(price) } : {}),
        });
        // With a subnet of the user's, the network interface asks for a public address (a subnet
        // made by hand seldom maps one on launch), unless associatePublicIp is false.
        const network =
          settings.subnetId !== undefined
            ? {
                NetworkInterfaces: [
                  {
                    DeviceIndex: 0,
                    SubnetId: request.subnetId,
                    Groups: [specific.securityGroupId],
                    AssociatePublicIpAddress: settings.associatePublicIp,
                    DeleteOnTermination: true,
                  },
                ],
              }
            : { SubnetId: request.subnetId, SecurityGroupIds: [specific.securityGroupId] };
        const result = await clients.ec2Launch.send(
          new RunInstancesCommand({
            ImageId: specific.imageId,
            InstanceType: offer.instanceType as _InstanceType,
            // All or none in this zone: the pool's nodes share one.
            MinCount: request.count,
            MaxCount: request.count,
            KeyName: specific.keyName,
            ...network,
            ...(specific.placementGroup ? { Placement: { GroupName: specific.placementGroup } } : {}),
            InstanceInitiatedShutdownBehavior: "terminate",
            UserData: userData,
            ClientToken: randomUUID(),
            MetadataOptions: { HttpTokens: "required", HttpEndpoint: "enabled" },
            ...(settings.instanceProfile !== undefined
              ? {
                  IamInstanceProfile: settings.instanceProfile.startsWith("arn:")
                    ? { Arn: settings.instanceProfile }
                    : { Name: settings.instanceProfile },
                }
              : {}),
            ...(request.market === "spot"
              ? {
                  InstanceMarketOptions: {
                    MarketType: "spot",
                    SpotOptions: { SpotInstanceType: "one-time", InstanceInterruptionBehavior: "terminate" },
                  },
                }
              : {}),
            ...(specific.rootVolumeGb !== undefined && specific.rootDeviceName !== undefined
              ? {
                  BlockDeviceMappings: [
                    {
                      DeviceName: specific.rootDeviceName,
                      Ebs: {
                        VolumeSize: specific.rootVolumeGb,
                        VolumeType: "gp3",
                        DeleteOnTermination: true,
                      },
                    },
                  ],
                }
              : {}),
            TagSpecifications: [
              { ResourceType: "instance", Tags: tags },
              { ResourceType: "volume", Tags: tags },
            ],
          }),
          { abortSignal: signal },
        );
        const ids = (result.Instances ?? []).map((raw) => raw.InstanceId).filter((id): id is string => !!id);
        const at = Date.now();
        for (const id of ids) launchedAt.set(id, { at, clusterId: cluster.id });
        created.push(...ids);
        return ids;
      };
      /**
       * One launch, asked again (3 times at most, with backoff) on throttling, AWS's transient errors and
       * a security group or placement group not visible yet (eventual consistency); a lack of capacity
       * or a quota is the caller's to handle, never repeated here.
       */
      const launch = async (request: { market: Market; subnetId: string; count: number }) => {
        for (let attempt = 1; ; attempt += 1) {
          try {
            const ids = await launchOnce(request);
            failedLaunches.delete(cluster.id);
            return ids;
          } catch (error) {
            signal.throwIfAborted();
            if (isCapacityError(error))
              failedLaunches.set(cluster.id, (failedLaunches.get(cluster.id) ?? 0) + 1);
            const code = awsErrorCode(error);
            const notVisibleYet =
              code === "InvalidGroup.NotFound" ||
              code === "InvalidGroupId.NotFound" ||
              code === "InvalidPlacementGroup.Unknown";
            if (attempt >= 3 || !(notVisibleYet || isTransientError(error))) throw error;
            await sleep(1000 * 2 ** (attempt - 1), signal);
          }
        }
      };
      const cleanUp = () =>
        terminateIds(clients, created, AbortSignal.timeout(NOT_FOUND_RETRY_MS + 30_000)).catch(
          () => undefined,
        );
      // The pool asks `provision` again after "no capacity" (up to its maxProvisionAttempts): the
      // cluster's failed launches in a row are bounded too, then the pool moves on to its next offer.
      const failedSoFar = failedLaunches.get(cluster.id) ?? 0;
      if (failedSoFar >= CLUSTER_FAILED_LAUNCH_LIMIT)
        throw new ProvisionError({
          provider: PROVIDER_NAME,
          message: `no capacity for ${offer.instanceType} in ${clients.region} after ${failedSoFar} RunInstances calls in a row for this pool (at most ${CLUSTER_FAILED_LAUNCH_LIMIT}); try another instance type or region, or later`,
          isRetryable: false,
        });
      try {
        // The nodes share a zone: a later call (nodes replaced, or missing after a short answer) goes
        // where the cluster's instances already run.
        const running = await describeInstances(
          clients,
          [
            { Name: `tag:${AWS_TAGS.cluster}`, Values: [cluster.id] },
            { Name: "instance-state-name", Values: ["pending", "running"] },
          ],
          signal,
        );
        const inUse = running.map((raw) => raw.SubnetId).find((id) => id && specific.subnetIds.includes(id));
        await launchAcrossMarkets({
          count,
          markets: marketsFor(spec.allocation, {
            spotPrice: offer.spotPrice,
            // A market without a known price is listed, and refused by the launch loop with its reason.
            onDemandPrice: offer.onDemandPrice ?? Number.POSITIVE_INFINITY,
          }),
          subnetIds: inUse !== undefined ? [inUse] : specific.subnetIds,
          instanceType: offer.instanceType,
          region: clients.region,
          priceOf,
          ...(spec.maxHourlyCost !== undefined ? { maxHourlyCost: spec.maxHourlyCost } : {}),
          maxAttempts: Math.min(MAX_LAUNCH_ATTEMPTS, CLUSTER_FAILED_LAUNCH_LIMIT - failedSoFar),
          launch,
        });
      } catch (error) {
        await cleanUp();
        throw translateAwsError(error, `RunInstances (${offer.instanceType})`, signal);
      }
      // The pool connects right away, so instances are handed back running, with their addresses.
      let described: Ec2Instance[];
      try {
        described = await waitWhilePending(
          clients,
          created,
          Date.now() + spec.provisionTimeout * 1000,
          signal,
        );
      } catch (error) {
        await cleanUp();
        throw error;
      }
      const running = described.filter((raw) => raw.State?.Name === "running");
      const notRunning = created.filter((id) => !running.some((raw) => raw.InstanceId === id));
      if (notRunning.length > 0)
        await terminateIds(clients, notRunning, AbortSignal.timeout(NOT_FOUND_RETRY_MS + 30_000)).catch(
          () => undefined,
        );
      if (running.length === 0) {
        const reasons = described.map(
          (raw) =>
            `${raw.InstanceId}: ${raw.State?.Name ?? "unknown"}${raw.StateReason?.Message ? ` (${raw.StateReason.Message})` : ""}`,
        );
        throw new NoCapacityError({
          attempts: [
            {
              provider: PROVIDER_NAME,
              offer: offer.instanceType,
              reason: `no instance reached "running" within ${spec.provisionTimeout} s${reasons.length > 0 ? `: ${reasons.join("; ")}` : ""}`,
            },
          ],
        });
      }
      const key = clusterKey(cluster);
      return running.map((raw) => toInstance(raw, key, offer.id));
    },

    async getInstance({ cluster, id, signal }) {
      if (!/^i-[0-9a-f]{8,17}$/.test(id)) return null;
      const clients = clientsFor(regionOf(cluster));
      const [raw] = await describeInstances(clients, [{ Name: "instance-id", Values: [id] }], signal);
      if (raw) return toInstance(raw, clusterKey(cluster), cluster.offer?.id ?? "");
      // Launched moments ago and not visible yet (eventual consistency): pending, not gone.
      return recentlyLaunched(id)
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
      await terminateIds(clientsFor(regionOf(cluster)), ids, signal);
    },

    async teardown({ cluster, signal: callSignal }) {
      const signal = AbortSignal.any([callSignal, AbortSignal.timeout(TEARDOWN_LIMIT_MS)]);
      const deadline = Date.now() + TEARDOWN_LIMIT_MS;
      const clients = clientsFor(regionOf(cluster));
      const liveFilter = [
        { Name: `tag:${AWS_TAGS.cluster}`, Values: [cluster.id] },
        { Name: "instance-state-name", Values: LIVE_STATES },
      ];
      const live = await describeInstances(clients, liveFilter, signal);
      // Instances launched moments ago may not match a filter yet (eventual consistency): this
      // provider's own launches for the cluster are terminated by id as well.
      const recent = [...launchedAt.entries()]
        .filter(([id, launched]) => launched.clusterId === cluster.id && recentlyLaunched(id))
        .map(([id]) => id);
      await terminateIds(
        clients,
        [
          ...live.filter((raw) => raw.State?.Name !== "shutting-down").map((raw) => raw.InstanceId ?? ""),
          ...recent,
        ],
        signal,
      );
      // The group and key are shared by the cluster's instances: they go once no instance is left.
      let interval = 1000;
      while ((await describeInstances(clients, liveFilter, signal)).length > 0) {
        if (Date.now() >= deadline) {
          throw new ProvisionError({
            provider: PROVIDER_NAME,
            message: `instances of cluster ${cluster.id} are still not terminated after ${TEARDOWN_LIMIT_MS / 60_000} min; its security group and key pair are left (tagged ${AWS_TAGS.cluster}=${cluster.id})`,
            isRetryable: true,
          });
        }
        await sleep(interval, signal);
        interval = Math.min(interval * 2, 10_000);
      }
      // What this provider created carries the cluster's tag; a security group or key pair given in the
      // settings does not, and stays. Found by tag, teardown also works for a cluster rebuilt from an
      // instance's tags (`skyward down`).
      const tagFilter = [{ Name: `tag:${AWS_TAGS.cluster}`, Values: [cluster.id] }];
      const groups = await awsCall("DescribeSecurityGroups", signal, () =>
        clients.ec2.send(new DescribeSecurityGroupsCommand({ Filters: tagFilter }), { abortSignal: signal }),
      );
      for (const group of groups.SecurityGroups ?? [])
        if (group.GroupId) await deleteSecurityGroup(clients, group.GroupId, deadline, signal);
      const keys = await awsCall("DescribeKeyPairs", signal, () =>
        clients.ec2.send(new DescribeKeyPairsCommand({ Filters: tagFilter }), { abortSignal: signal }),
      );
      for (const key of keys.KeyPairs ?? []) {
        if (!key.KeyName) continue;
        await deleteKeyPair(clients, key.KeyName, signal);
        await removePrivateKey(privateKeyPath(key.KeyName));
      }
      if (cluster.specific?.ownsKeyPair) await removePrivateKey(cluster.specific.keyFile);
      for (const group of await taggedPlacementGroups(clients, cluster.id, signal))
        if (group.GroupName) await deletePlacementGroup(clients, group.GroupName, signal);
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
      const results = await Promise.all(
        (await searchRegions(signal)).map((region) =>
          cleanupRegion(clientsFor(region), options.pools, waitSeconds, deadline, signal),
        ),
      );
      const order = (a: PoolResource, b: PoolResource) =>
        a.poolId.localeCompare(b.poolId) || a.kind.localeCompare(b.kind) || a.id.localeCompare(b.id);
      return {
        removed: results.flatMap((result) => result.removed).sort(order),
        left: results.flatMap((result) => result.left).sort(order),
      };
    },

    async listInstances({ signal }) {
      const found = (
        await Promise.all(
          (
            await searchRegions(signal)
          ).map((region) =>
            describeInstances(
              clientsFor(region),
              [
                { Name: "tag-key", Values: [AWS_TAGS.cluster] },
                { Name: "instance-state-name", Values: LIVE_STATES },
              ],
              signal,
            ),
          ),
        )
      ).flat();
      return found.map((raw) => {
        const keyFile = raw.KeyName ? privateKeyPath(raw.KeyName) : undefined;
        return toInstance(
          raw,
          keyFile !== undefined && existsSync(keyFile) ? { identityFile: keyFile } : {},
          "",
        );
      });
    },
  };
}
