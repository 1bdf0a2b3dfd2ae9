/**
 * `provision`: VMs of a prepared cluster created on the markets its allocation asks, then handed back
 * once they run; whatever did not come up is deleted.
 */

import type { Cluster, Instance } from "@skyward/core/contract";
import { NoCapacityError, ProvisionError } from "@skyward/core/contract";
import { type Market, marketsFor } from "@skyward/provider-utils";
import type { GcpProviderContext } from "./context.js";
import {
  exceededQuota,
  gcpCall,
  PROVIDER_NAME,
  quotaError,
  translateGcpError,
  waitForOperation,
} from "./gcp-api.js";
import type { GcpClusterData } from "./offer-data.js";
import { bootWatchdogSeconds, renderStartupScript } from "./startup-script.js";
import { instanceResource } from "./vm-resource.js";
import { deleteVms, type RawInstance, vmName, waitWhilePending } from "./vms.js";

/** Operation error codes that mean "no capacity here now" (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability). */
const CAPACITY_CODES = /ZONE_RESOURCE_POOL_EXHAUSTED|RESOURCE_POOL_EXHAUSTED|STOCKOUT|UNAVAILABLE/;

export async function provisionVms(
  { settings, clientsOf, view }: GcpProviderContext,
  { cluster, count, signal }: { cluster: Cluster<GcpClusterData>; count: number; signal: AbortSignal },
): Promise<Instance[]> {
  const { spec, offer, specific } = cluster;
  const clients = clientsOf();
  const zone = specific.zone;
  const startupScript = renderStartupScript({ root: settings.root, seconds: bootWatchdogSeconds(spec) });
  const created: string[] = [];
  const reasons: string[] = [];

  const quotaReasons: string[] = [];
  const insert = async (market: Market): Promise<string | { noCapacity: string }> => {
    const name = vmName(cluster.id);
    const resource = instanceResource(settings, cluster, market, name, startupScript);
    let operation: Parameters<typeof waitForOperation>[1];
    try {
      const [answer] = await gcpCall(`creating instance ${name}`, signal, () =>
        clients.instances.insert({ project: clients.project, zone, instanceResource: resource }),
      );
      operation = answer.latestResponse;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      // A quota is per market (spot has its own): the next market may still have room.
      const quota = exceededQuota(error);
      if (quota !== undefined) {
        quotaReasons.push(`${market}: ${quota.message}`);
        return { noCapacity: `quota: ${quota.message}` };
      }
      if (CAPACITY_CODES.test(message)) return { noCapacity: message };
      throw translateGcpError(error, `creating instance ${name}`, signal, clients.project);
    }
    created.push(name);
    const outcome = await waitForOperation(clients, operation, { zone }, signal);
    const failure = outcome.errors[0];
    if (failure) {
      const text = `${failure.code}: ${failure.message}`;
      if (failure.code === "QUOTA_EXCEEDED") {
        quotaReasons.push(`${market}: ${failure.message}`);
        return { noCapacity: `quota: ${failure.message}` };
      }
      if (CAPACITY_CODES.test(failure.code)) return { noCapacity: text };
      throw new ProvisionError({
        provider: PROVIDER_NAME,
        message: `creating instance ${name}: ${text}`,
      });
    }
    return name;
  };

  const cleanUp = () => deleteVms(clients, zone, created, AbortSignal.timeout(60_000)).catch(() => undefined);
  const ready: string[] = [];
  try {
    // Spot and on-demand in the allocation's order; a market without capacity gives way to the next.
    const markets = marketsFor(spec.allocation, offer);
    for (const market of markets) {
      const missing = count - ready.length;
      if (missing <= 0) break;
      // Every insert is let finish, so that a failed one leaves no other VM half made and unknown.
      const outcomes = await Promise.allSettled(Array.from({ length: missing }, () => insert(market)));
      const failed = outcomes.find((outcome) => outcome.status === "rejected");
      if (failed) throw failed.reason;
      for (const outcome of outcomes) {
        if (outcome.status !== "fulfilled") continue;
        if (typeof outcome.value === "string") ready.push(outcome.value);
        else reasons.push(`${market}: ${outcome.value.noCapacity}`);
      }
    }
  } catch (error) {
    await cleanUp();
    throw error;
  }
  if (ready.length === 0) {
    await cleanUp();
    // Every market met a quota: no capacity would come later, only a quota increase.
    if (quotaReasons.length > 0 && quotaReasons.length === reasons.length)
      throw quotaError(clients.project, `${offer.instanceType} in ${zone}: ${quotaReasons.join("; ")}`);
    throw new NoCapacityError({
      attempts: (reasons.length > 0 ? reasons : ["no market to try"]).map((reason) => ({
        provider: PROVIDER_NAME,
        offer: offer.instanceType,
        reason,
      })),
    });
  }
  // The pool connects right away, so VMs are handed back running, with their addresses.
  let seen: RawInstance[];
  try {
    seen = await waitWhilePending(clients, zone, ready, Date.now() + spec.provisionTimeout * 1000, signal);
  } catch (error) {
    await cleanUp();
    throw error;
  }
  const running = seen.filter((raw) => raw.status === "RUNNING");
  const notRunning = created.filter((name) => !running.some((raw) => raw.name === name));
  if (notRunning.length > 0)
    await deleteVms(clients, zone, notRunning, AbortSignal.timeout(60_000)).catch(() => undefined);
  if (running.length === 0) {
    throw new NoCapacityError({
      attempts: [
        {
          provider: PROVIDER_NAME,
          offer: offer.instanceType,
          reason: `no instance reached RUNNING within ${spec.provisionTimeout} s: ${seen.map((raw) => `${raw.name}: ${raw.status}`).join("; ") || "none found"}`,
        },
      ],
    });
  }
  return running.map((raw) => view.toInstance(raw, specific.identityFile, offer.id));
}
