/**
 * `provision`: VMs of a prepared cluster created on the markets its allocation asks, through the
 * machine-provider base's market loop (`launchAcrossMarkets` of `@skyward/provider-utils`), each insert's
 * operation waited on (Compute Engine's answer that the VM exists), then handed back as one `get`
 * sees them — still PROVISIONING or STAGING, as a rule: the pool polls `getInstance` until they run,
 * and deletes them when they do not.
 */
import { randomUUID } from "node:crypto";
import type { Cluster, Instance } from "@skyward/core/contract";
import {
  isMarketRefusal,
  launchAcrossMarkets,
  launchableMarketsByZone,
  type Market,
  machineErrorKind,
} from "@skyward/provider-utils";
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

/** The longest a failed provision's clean-up waits for the insert requests still running to be answered. */
const LOST_INSERT_WAIT_MS = 60_000;

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
   * Every insert request sent, settled or not: Google's client takes no signal, so a request the
   * provision stopped waiting for (its signal aborted) goes on, and Compute Engine makes its VM.
   */
  const sent: Promise<unknown>[] = [];

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
        const [answer] = await gcpCall(`creating instance ${name}`, signal, () => {
          const request = clients.instances.insert({
            project: clients.project,
            zone,
            instanceResource: resource,
            requestId,
          });
          sent.push(request.catch(() => undefined));
          return request;
        });
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

  const cleanUp = async () => {
    // A VM is deleted once its insert has been answered: deleted before Compute Engine has made it
    // (404, taken for gone), it would be made afterwards and bill, unknown to anyone.
    const cleanupSignal = AbortSignal.timeout(LOST_INSERT_WAIT_MS + 60_000);
    await Promise.race([
      Promise.allSettled(sent),
      sleep(LOST_INSERT_WAIT_MS, cleanupSignal).catch(() => undefined),
    ]);
    await deleteVms(clients, zone, created, cleanupSignal).catch(() => undefined);
  };
  let ready: string[];
  try {
    const launched = await launchAcrossMarkets<string>({
      provider: PROVIDER_NAME,
      offer: offer.instanceType,
      count,
      // The base's rule: each market at its own price in the offer, within maxHourlyCost, never at an
      // unknown price. One place a market: the cluster's zone was chosen at prepare.
      places: launchableMarketsByZone(cluster, [""], () => ({})),
      signal,
      // One insert a VM, all at once; every insert is let finish, so that a failed one leaves no other
      // VM half made and unknown.
      async launch({ market, count: missing }) {
        const outcomes = await Promise.allSettled(Array.from({ length: missing }, () => insert(market)));
        const items: string[] = [];
        const refusals: unknown[] = [];
        for (const outcome of outcomes) {
          if (outcome.status === "fulfilled") items.push(outcome.value);
          else if (isMarketRefusal(machineErrorKind(outcome.reason))) refusals.push(outcome.reason);
          else throw outcome.reason;
        }
        // A quota only when every refused insert met one: else the market had no capacity as well.
        const refused = refusals.find((reason) => machineErrorKind(reason) !== "quota") ?? refusals[0];
        return refused !== undefined ? { items, refused } : { items };
      },
      // Every market met a quota: no capacity would come later, only a quota increase.
      quotaFailure: (refusals) =>
        quotaError(
          clients.project,
          `${offer.instanceType} in ${zone}: ${refusals
            .map(
              ({ error, request }) =>
                `${request.market}: ${exceededQuota(error)?.message ?? (error as Error).message}`,
            )
            .join("; ")}`,
        ),
      onFailure: "throw",
    });
    ready = launched.flatMap((launch) => launch.items);
  } catch (error) {
    await cleanUp();
    throw error;
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
