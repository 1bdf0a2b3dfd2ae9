/**
 * `provision`: VMs of a prepared cluster created on the markets its allocation asks, each insert's
 * operation waited on (Compute Engine's answer that the VM exists), then handed back as one `get`
 * sees them — still PROVISIONING or STAGING, as a rule: the pool polls `getInstance` until they run,
 * and deletes them when they do not.
 */
import { randomUUID } from "node:crypto";
import type { Cluster, Instance } from "@skyward/core/contract";
import { NoCapacityError } from "@skyward/core/contract";
import { launchableMarkets, type Market, machineErrorKind } from "@skyward/provider-utils";
import type { GcpProviderContext } from "./context.js";
import { gcpCall, PROVIDER_NAME, sleep, waitForOperation } from "./gcp-api.js";
import {
  exceededQuota,
  gcpError,
  isAlreadyExists,
  kindOfOperationError,
  quotaError,
  translateGcpError,
} from "./gcp-errors.js";
import type { GcpClusterData } from "./offer-data.js";
import { bootWatchdogSeconds, renderStartupScript } from "./startup-script.js";
import { instanceResource } from "./vm-resource.js";
import { deleteVms, getVm, type RawInstance, vmName } from "./vms.js";

/** Tries of one insert whose answer was lost or failed on Google's side (the same `requestId` each time). */
const INSERT_ATTEMPTS = 3;
/** What a market says when it makes no VM: the next market may still have room. */
const TO_NEXT_MARKET = new Set(["capacity", "quota", "price"]);

export async function provisionVms(
  { settings, clientsOf, view }: GcpProviderContext,
  { cluster, count, signal }: { cluster: Cluster<GcpClusterData>; count: number; signal: AbortSignal },
): Promise<Instance[]> {
  const { spec, offer, specific } = cluster;
  const clients = clientsOf();
  const zone = specific.zone;
  const startupScript = renderStartupScript({ root: settings.root, seconds: bootWatchdogSeconds(spec) });
  const created: string[] = [];

  /**
   * One VM. Its name is known before the insert is sent, so that an insert whose answer is lost is
   * still deleted by the clean-up; it is sent again with the same `requestId`, which Compute Engine
   * answers with the first request's operation instead of a second VM
   * (https://cloud.google.com/compute/docs/reference/rest/v1/instances/insert, `requestId`); a VM
   * of that name already there (409) is the first insert's.
   */
  const insert = async (market: Market): Promise<string> => {
    const name = vmName(cluster.id);
    const resource = instanceResource(settings, cluster, market, name, startupScript);
    const requestId = randomUUID();
    created.push(name);
    for (let attempt = 1; ; attempt += 1) {
      let operation: Parameters<typeof waitForOperation>[1];
      try {
        const [answer] = await gcpCall(`creating instance ${name}`, signal, () =>
          clients.instances.insert({ project: clients.project, zone, instanceResource: resource, requestId }),
        );
        operation = answer.latestResponse;
      } catch (error) {
        if (attempt > 1 && isAlreadyExists(error)) return name;
        const failure = translateGcpError(error, `creating instance ${name}`, signal, clients.project);
        if (attempt < INSERT_ATTEMPTS && machineErrorKind(failure) === "unavailable") {
          await sleep(500 * 2 ** attempt, signal);
          continue;
        }
        throw failure;
      }
      const outcome = await waitForOperation(clients, operation, { zone }, signal);
      const failure = outcome.errors[0];
      if (failure)
        throw gcpError(
          kindOfOperationError(failure.code),
          `creating instance ${name}: ${failure.code}: ${failure.message}`,
        );
      return name;
    }
  };

  const cleanUp = () => deleteVms(clients, zone, created, AbortSignal.timeout(60_000)).catch(() => undefined);
  // The base's rule: each market at its own price in the offer, within maxHourlyCost, never at an unknown price.
  const { launchable, refused } = launchableMarkets(cluster, true);
  const reasons: string[] = [...refused];
  const quotaReasons: string[] = [];
  const ready: string[] = [];
  try {
    for (const { market } of launchable) {
      const missing = count - ready.length;
      if (missing <= 0) break;
      // Every insert is let finish, so that a failed one leaves no other VM half made and unknown.
      const outcomes = await Promise.allSettled(Array.from({ length: missing }, () => insert(market)));
      let fatal: unknown;
      for (const outcome of outcomes) {
        if (outcome.status === "fulfilled") {
          ready.push(outcome.value);
          continue;
        }
        const kind = machineErrorKind(outcome.reason);
        if (kind === undefined || !TO_NEXT_MARKET.has(kind)) {
          fatal ??= outcome.reason;
          continue;
        }
        const message = (outcome.reason as Error).message;
        reasons.push(`${market}: ${message}`);
        if (kind === "quota")
          quotaReasons.push(`${market}: ${exceededQuota(outcome.reason)?.message ?? message}`);
      }
      if (fatal !== undefined) throw fatal;
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
  // One look at each VM for its state and addresses; the pool waits for RUNNING through getInstance.
  let seen: RawInstance[];
  try {
    seen = (await Promise.all(ready.map((name) => getVm(clients, zone, name, signal)))).filter(
      (raw): raw is RawInstance => raw !== null,
    );
  } catch (error) {
    await cleanUp();
    throw error;
  }
  return seen.map((raw) => view.toInstance(raw, specific.identityFile, offer.id));
}
