/**
 * Removing what a pool made at AWS: `teardown` of a cluster (its instances, then its security group,
 * key pair and placement group), and `cleanup` of the pools whose client is gone (`skyward down`),
 * found by their tags. Each step runs on its own: a step that fails — an IAM policy without
 * `ec2:DescribePlacementGroups`, a group still in use — leaves only its own resources, named with
 * why, and the others are still removed.
 */

import { existsSync } from "node:fs";
import {
  DescribeKeyPairsCommand,
  DescribeSecurityGroupsCommand,
  type KeyPairInfo,
  type PlacementGroup,
  type SecurityGroup,
} from "@aws-sdk/client-ec2";
import { ProvisionError } from "@skyward/core";
import type { Cluster, LeftPoolResource, PoolResource } from "@skyward/core/contract";
import { poolIdFromTags, privateKeyPath, removePrivateKey } from "@skyward/provider-utils";
import { type AwsClients, awsCall, PROVIDER_NAME, sleep } from "./aws-api.js";
import {
  AWS_TAGS,
  describeInstances,
  fromAwsTags,
  type LaunchLedger,
  liveFilterOf,
  lostLaunches,
  terminateIds,
} from "./instances.js";
import { deleteKeyPair } from "./key-pairs.js";
import { deleteSecurityGroup } from "./networking.js";
import { deletePlacementGroup, taggedPlacementGroups } from "./placement-groups.js";

/** The longest teardown waits for instances to end and the security group to become free. */
export const TEARDOWN_LIMIT_MS = 15 * 60_000;

/** The kinds of what a pool shares at AWS, as `cleanup` names them. */
type SharedKind = "security group" | "key pair" | "placement group";

/** What a pool shares at AWS, found by its tags (only what Skyward made carries a cluster tag). */
interface Shared {
  readonly kind: SharedKind;
  readonly id: string;
  readonly tags: Record<string, string>;
}

/**
 * The security groups, key pairs and placement groups tagged with `clusterId` (every cluster's when
 * undefined), each kind listed on its own: a kind that cannot be listed is named in `unlisted`, with
 * why, and the others are still found.
 */
async function findShared(
  clients: AwsClients,
  clusterId: string | undefined,
  signal: AbortSignal,
): Promise<{ found: Shared[]; unlisted: { kind: SharedKind; reason: string }[] }> {
  const filters =
    clusterId !== undefined
      ? [{ Name: `tag:${AWS_TAGS.cluster}`, Values: [clusterId] }]
      : [{ Name: "tag-key", Values: [AWS_TAGS.cluster] }];
  const listers: [SharedKind, () => Promise<Shared[]>][] = [
    [
      "security group",
      async () =>
        (
          (
            await awsCall("DescribeSecurityGroups", signal, () =>
              clients.ec2.send(new DescribeSecurityGroupsCommand({ Filters: filters }), {
                abortSignal: signal,
              }),
            )
          ).SecurityGroups ?? []
        ).flatMap((group: SecurityGroup) =>
          group.GroupId ? [{ kind: "security group", id: group.GroupId, tags: fromAwsTags(group.Tags) }] : [],
        ),
    ],
    [
      "key pair",
      async () =>
        (
          (
            await awsCall("DescribeKeyPairs", signal, () =>
              clients.ec2.send(new DescribeKeyPairsCommand({ Filters: filters }), { abortSignal: signal }),
            )
          ).KeyPairs ?? []
        ).flatMap((key: KeyPairInfo) =>
          key.KeyName ? [{ kind: "key pair", id: key.KeyName, tags: fromAwsTags(key.Tags) }] : [],
        ),
    ],
    [
      "placement group",
      async () =>
        (await taggedPlacementGroups(clients, clusterId, signal)).flatMap((group: PlacementGroup) =>
          group.GroupName
            ? [{ kind: "placement group", id: group.GroupName, tags: fromAwsTags(group.Tags) }]
            : [],
        ),
    ],
  ];
  const settled = await Promise.allSettled(listers.map(([, list]) => list()));
  signal.throwIfAborted();
  const found: Shared[] = [];
  const unlisted: { kind: SharedKind; reason: string }[] = [];
  settled.forEach((outcome, index) => {
    const kind = listers[index]?.[0] as SharedKind;
    if (outcome.status === "fulfilled") found.push(...outcome.value);
    else unlisted.push({ kind, reason: (outcome.reason as Error).message });
  });
  return { found, unlisted };
}

/**
 * Removes one shared resource; resolves with why it is left, or undefined once it is gone. A key
 * pair's private key file goes with it (`onKeyFile` hears of each removed file).
 */
async function removeShared(
  clients: AwsClients,
  resource: Pick<Shared, "kind" | "id">,
  deadline: number,
  signal: AbortSignal,
  onKeyFile: (path: string) => void = () => undefined,
): Promise<string | undefined> {
  try {
    if (resource.kind === "security group")
      return await deleteSecurityGroup(clients, resource.id, deadline, signal);
    if (resource.kind === "placement group") await deletePlacementGroup(clients, resource.id, signal);
    else {
      await deleteKeyPair(clients, resource.id, signal);
      const keyFile = privateKeyPath(resource.id);
      if (existsSync(keyFile)) {
        await removePrivateKey(keyFile);
        onKeyFile(keyFile);
      }
    }
    return undefined;
  } catch (error) {
    signal.throwIfAborted();
    return (error as Error).message;
  }
}

/** Security groups last but one: placement groups and key pairs do not wait on network interfaces. */
const REMOVAL_ORDER: readonly SharedKind[] = ["placement group", "key pair", "security group"];
const byRemovalOrder = (a: { kind: SharedKind }, b: { kind: SharedKind }) =>
  REMOVAL_ORDER.indexOf(a.kind) - REMOVAL_ORDER.indexOf(b.kind);

/**
 * `teardown`: terminates the cluster's instances (also those launched moments ago that a tag filter
 * does not show yet), waits for them to end, then removes what it shared, each on its own. Throws,
 * after trying every step, a `ProvisionError` naming each resource left and why.
 */
export async function teardownCluster(
  clients: AwsClients,
  cluster: Cluster<{ ownsKeyPair: boolean; keyFile: string }>,
  ledger: LaunchLedger,
  callSignal: AbortSignal,
): Promise<void> {
  const signal = AbortSignal.any([callSignal, AbortSignal.timeout(TEARDOWN_LIMIT_MS)]);
  const deadline = Date.now() + TEARDOWN_LIMIT_MS;
  const liveFilter = liveFilterOf(cluster.id);
  const live = await describeInstances(clients, liveFilter, signal);
  await terminateIds(
    clients,
    [
      ...live.filter((raw) => raw.State?.Name !== "shutting-down").map((raw) => raw.InstanceId ?? ""),
      ...ledger.recentOf(cluster.id),
    ],
    ledger,
    signal,
  );
  // A launch whose answer never came (the provision stopped mid-call) may have started instances that
  // neither its token nor its tags show yet: looked for a while, and ended once they show.
  await terminateIds(clients, await lostLaunches(clients, cluster.id, ledger, signal), ledger, signal);
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
  const { found, unlisted } = await findShared(clients, cluster.id, signal);
  const left: string[] = unlisted.map(({ kind, reason }) => `${kind}s not listed: ${reason}`);
  for (const resource of found.sort(byRemovalOrder)) {
    const reason = await removeShared(clients, resource, deadline, signal);
    if (reason !== undefined) left.push(`${resource.kind} ${resource.id}: ${reason}`);
  }
  if (cluster.specific?.ownsKeyPair) await removePrivateKey(cluster.specific.keyFile);
  if (left.length > 0)
    throw new ProvisionError({
      provider: PROVIDER_NAME,
      message: `teardown of cluster ${cluster.id} in ${clients.region} left (tagged ${AWS_TAGS.cluster}=${cluster.id}; skyward down --pool ${cluster.poolId ?? cluster.id} removes them once the cause is fixed): ${left.join("; ")}`,
      isRetryable: true,
    });
}

/**
 * `cleanup` in one region: the shared resources of the pools asked for (`"all"`: every pool Skyward
 * made) whose instances are gone, waiting up to `deadline` for those still shutting down. What could
 * not be listed or removed is in `left`, with why; a kind of resource that could not even be listed
 * is named by its kind, with the region as its id.
 */
export async function cleanupRegion(
  clients: AwsClients,
  pools: readonly string[] | "all",
  waitSeconds: number,
  deadline: number,
  signal: AbortSignal,
): Promise<{ removed: PoolResource[]; left: LeftPoolResource[] }> {
  const wanted = pools === "all" ? undefined : new Set(pools);
  const { found, unlisted } = await findShared(clients, undefined, signal);
  const removed: PoolResource[] = [];
  const left: LeftPoolResource[] = [];
  for (const { kind, reason } of unlisted)
    for (const poolId of pools === "all" ? ["all"] : pools)
      left.push({
        poolId,
        kind: `${kind}s`,
        id: clients.region,
        reason: `not listed, so not removed: ${reason}; remove them by hand (tag ${AWS_TAGS.cluster}) or grant the action and run skyward down again`,
      });

  const clusters = new Map<string, (Shared & { poolId: string })[]>();
  for (const resource of found) {
    const clusterId = resource.tags[AWS_TAGS.cluster];
    if (!clusterId) continue;
    const poolId = poolIdFromTags(resource.tags);
    if (wanted && !wanted.has(poolId) && !wanted.has(clusterId)) continue;
    clusters.set(clusterId, [...(clusters.get(clusterId) ?? []), { ...resource, poolId }]);
  }
  const leave = (resources: readonly { kind: string; id: string; poolId: string }[], reason: string) => {
    for (const { kind, id, poolId } of resources) left.push({ poolId, kind, id, reason });
  };
  await Promise.all(
    [...clusters.entries()].map(async ([clusterId, resources]) => {
      const poolId = resources[0]?.poolId ?? clusterId;
      try {
        const why = await waitForInstancesToEnd(clients, clusterId, poolId, waitSeconds, deadline, signal);
        if (why !== undefined) return leave(resources, why);
      } catch (error) {
        signal.throwIfAborted();
        return leave(resources, `its instances could not be listed: ${(error as Error).message}`);
      }
      for (const resource of resources.sort(byRemovalOrder)) {
        const reason = await removeShared(clients, resource, deadline, signal, (keyFile) =>
          removed.push({ poolId, kind: "key file", id: keyFile }),
        );
        if (reason === undefined) removed.push({ poolId, kind: resource.kind, id: resource.id });
        else leave([resource], reason);
      }
    }),
  );
  return { removed, left };
}

/**
 * Waits (up to `deadline`) for a cluster's instances shutting down to end; resolves with why its
 * resources must stay (an instance still in use, or one still ending), or undefined when none is left.
 */
async function waitForInstancesToEnd(
  clients: AwsClients,
  clusterId: string,
  poolId: string,
  waitSeconds: number,
  deadline: number,
  signal: AbortSignal,
): Promise<string | undefined> {
  let interval = 1000;
  for (;;) {
    const live = await describeInstances(clients, liveFilterOf(clusterId), signal);
    const inUse = live.filter((raw) => raw.State?.Name !== "shutting-down");
    if (inUse.length > 0) {
      const listed = inUse.map((raw) => `${raw.InstanceId} (${raw.State?.Name ?? "unknown"})`);
      return `pool ${poolId} still has ${inUse.length === 1 ? "an instance" : `${inUse.length} instances`}: ${listed.join(", ")}; terminate ${inUse.length === 1 ? "it" : "them"} first (skyward down --pool ${poolId})`;
    }
    if (live.length === 0) return undefined;
    if (Date.now() >= deadline) {
      const ids = live.map((raw) => raw.InstanceId).join(", ");
      return `${live.length === 1 ? "instance" : "instances"} ${ids} still shutting down after ${waitSeconds} s; run skyward down --pool ${poolId} again once ${live.length === 1 ? "it has" : "they have"} ended`;
    }
    await sleep(Math.min(interval, Math.max(0, deadline - Date.now())), signal);
    interval = Math.min(interval * 2, 10_000);
  }
}
