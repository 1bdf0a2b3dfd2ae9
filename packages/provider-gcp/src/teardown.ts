/**
 * A pool's end: `teardown` deletes its VMs (found by label) and, once they are gone, its firewall
 * rules; `cleanup` (`skyward down`) removes the firewall rules of pools whose VMs have all gone,
 * naming what it left and why.
 */
import type {
  CleanupOptions,
  CleanupResult,
  Cluster,
  ClusterFromTags,
  LeftPoolResource,
  PoolResource,
  RecordedCluster,
} from "@skyward/core/contract";
import { ProvisionError } from "@skyward/core/contract";
import { poolIdFromTags, SKYWARD_TAGS } from "@skyward/provider-utils";
import { clusterZone, type GcpProviderContext } from "./context.js";
import { deleteFirewall, firewallRulesOf, firewallTags } from "./firewalls.js";
import { PROVIDER_NAME, sleep } from "./gcp-api.js";
import type { GcpClusterData } from "./offer-data.js";
import { clusterFilter, deleteVms, listVms } from "./vms.js";

/** The longest teardown waits for VMs to go. */
const TEARDOWN_LIMIT_MS = 15 * 60_000;

export async function teardownCluster(
  { settings, clientsOf }: GcpProviderContext,
  {
    cluster,
    signal: callSignal,
  }: {
    cluster: Cluster<GcpClusterData> | RecordedCluster<GcpClusterData> | ClusterFromTags;
    signal: AbortSignal;
  },
): Promise<void> {
  const signal = AbortSignal.any([callSignal, AbortSignal.timeout(TEARDOWN_LIMIT_MS)]);
  const deadline = Date.now() + TEARDOWN_LIMIT_MS;
  const clients = clientsOf();
  // Found by label, teardown also works for a cluster rebuilt from an instance's tags (`skyward down`).
  let live = await listVms(clients, clusterFilter(cluster.id), signal);
  const byZone = new Map<string, string[]>();
  for (const raw of live) {
    const zone = raw.zone?.split("/").pop() ?? clusterZone(settings, cluster);
    byZone.set(zone, [...(byZone.get(zone) ?? []), raw.name ?? ""]);
  }
  for (const [zone, names] of byZone) await deleteVms(clients, zone, names, signal);
  let interval = 500;
  while (live.length > 0) {
    live = await listVms(clients, clusterFilter(cluster.id), signal);
    if (live.length === 0) break;
    if (Date.now() >= deadline)
      throw new ProvisionError({
        provider: PROVIDER_NAME,
        message: `instances of cluster ${cluster.id} are still not deleted after ${TEARDOWN_LIMIT_MS / 60_000} min; its firewall rules are left`,
        isRetryable: true,
      });
    await sleep(interval, signal);
    interval = Math.min(interval * 2, 10_000);
  }
  const names = new Set([
    `${cluster.id}-ssh`,
    `${cluster.id}-internal`,
    ...(cluster.specific?.firewallRules ?? []),
  ]);
  for (const name of names) await deleteFirewall(clients, name, signal);
}

export async function cleanupPools(
  { clientsOf }: GcpProviderContext,
  options: CleanupOptions,
): Promise<CleanupResult> {
  const { signal } = options;
  const waitSeconds = Math.max(0, options.waitSeconds ?? 0);
  const deadline = Date.now() + waitSeconds * 1000;
  const clients = clientsOf();
  const wanted = options.pools === "all" ? undefined : new Set(options.pools);
  // Only what Skyward made carries its tags in the description.
  const clusters = new Map<string, { poolId: string; rules: string[] }>();
  for (const rule of await firewallRulesOf(clients, signal)) {
    const tags = firewallTags(rule);
    const clusterId = tags?.[SKYWARD_TAGS.cluster];
    if (!tags || !clusterId || !rule.name) continue;
    const poolId = poolIdFromTags(tags);
    if (wanted && !wanted.has(poolId) && !wanted.has(clusterId)) continue;
    const entry = clusters.get(clusterId) ?? { poolId, rules: [] };
    entry.rules.push(rule.name);
    clusters.set(clusterId, entry);
  }
  const removed: PoolResource[] = [];
  const left: LeftPoolResource[] = [];
  const kind = "firewall rule";
  await Promise.all(
    [...clusters.entries()].map(async ([clusterId, { poolId, rules }]) => {
      const leave = (reason: string) => {
        for (const id of rules) left.push({ poolId, kind, id, reason });
      };
      let interval = 1000;
      for (;;) {
        const live = await listVms(clients, clusterFilter(clusterId), signal);
        const inUse = live.filter((raw) => raw.status !== "STOPPING");
        if (inUse.length > 0) {
          const listed = inUse.map((raw) => `${raw.name} (${raw.status})`);
          return leave(
            `pool ${poolId} still has ${inUse.length === 1 ? "an instance" : `${inUse.length} instances`}: ${listed.join(", ")}; terminate ${inUse.length === 1 ? "it" : "them"} first (skyward down --pool ${poolId})`,
          );
        }
        if (live.length === 0) break;
        if (Date.now() >= deadline) {
          return leave(
            `instances ${live.map((raw) => raw.name).join(", ")} still stopping after ${waitSeconds} s; run skyward down --pool ${poolId} again once they have gone`,
          );
        }
        await sleep(Math.min(interval, Math.max(0, deadline - Date.now())), signal);
        interval = Math.min(interval * 2, 10_000);
      }
      for (const id of rules) {
        try {
          if (await deleteFirewall(clients, id, signal)) removed.push({ poolId, kind, id });
        } catch (error) {
          signal.throwIfAborted();
          left.push({ poolId, kind, id, reason: (error as Error).message });
        }
      }
    }),
  );
  const order = (a: PoolResource, b: PoolResource) =>
    a.poolId.localeCompare(b.poolId) || a.kind.localeCompare(b.kind) || a.id.localeCompare(b.id);
  return { removed: removed.sort(order), left: left.sort(order) };
}
