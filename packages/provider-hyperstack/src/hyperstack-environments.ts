/** What a Hyperstack cluster makes beside its VMs, its environment and key pair: made by `prepare`, removed by `teardown` and `cleanup`. */
import { setTimeout as sleep } from "node:timers/promises";
import type { CleanupOptions, CleanupResult, LeftPoolResource, PoolResource } from "@skyward/core/contract";
import {
  deletedUnlessGone,
  type MachineClusterData,
  type MachinePrepareContext,
  poolNamePart,
} from "@skyward/provider-utils";
import { HyperstackApiError, type HyperstackCalls } from "./hyperstack-api.js";
import type { HyperstackOfferData } from "./hyperstack-offers.js";
import type { ParsedSettings } from "./hyperstack-settings.js";

/** `<cluster id>--<pool id>`: the environment of a cluster. */
const ENVIRONMENT_NAME = /^(skyward-[0-9a-f]{8})--(.*)$/;

/** What a Hyperstack cluster keeps in `Cluster.specific`: its environment, the key pair in it (named like the cluster), its flavor and image. */
export interface HyperstackClusterData extends MachineClusterData {
  readonly environmentName: string;
  readonly environmentId: number;
  readonly keyName: string;
  readonly flavorName: string;
  readonly imageName: string;
}

export function hyperstackEnvironments(calls: HyperstackCalls, settings: ParsedSettings) {
  const vmsIn = (environment: string, signal: AbortSignal) =>
    calls.vms.all({ query: { environment, exact_environment_match: "true" } }, signal);

  /** Deletes an environment's key pairs (of every page of the account's), then the environment; what it removed. */
  async function deleteEnvironment(environment: { id: number; name: string }, signal: AbortSignal) {
    const removed: { kind: string; id: string }[] = [];
    for (const { id, name, environment: owner } of await calls.keypairs.all({}, signal)) {
      const ownerName = typeof owner === "string" ? owner : (owner as { name?: unknown } | null)?.name;
      if (ownerName !== environment.name) continue;
      const purpose = `deleting key pair ${name}`;
      if (await deletedUnlessGone(calls.dropKeypair({ id, purpose }, signal)))
        removed.push({ kind: "key pair", id: name });
    }
    const purpose = `deleting environment ${environment.name}`;
    if (await deletedUnlessGone(calls.dropEnvironment({ id: environment.id, purpose }, signal)))
      removed.push({ kind: "environment", id: environment.name });
    return removed;
  }

  /** Waits until the environment holds no VM (deleted ones take a moment), up to `deadline`; those left. */
  async function waitForNoVms(environment: string, deadline: number, signal: AbortSignal) {
    for (;;) {
      const left = await vmsIn(environment, signal);
      if (left.length === 0 || Date.now() >= deadline) return left;
      await sleep(Math.min(2000, Math.max(50, settings.retryDelayMs)), undefined, { signal });
    }
  }

  /** The newest Ubuntu image of the region, one with CUDA if there is one. */
  async function newestImage(region: string, signal: AbortSignal): Promise<string> {
    const ubuntu = (await calls.images({ query: { region } }, signal)).images
      .flatMap((group) => group.images)
      .filter((image) => (image.region_name || region) === region && /ubuntu/i.test(image.name))
      .sort((a, b) => b.created_at.localeCompare(a.created_at));
    const chosen = ubuntu.find((image) => /cuda/i.test(image.name)) ?? ubuntu[0];
    if (chosen) return chosen.name;
    const message = `Hyperstack lists no Ubuntu image in ${region}; set image to one of its images`;
    throw new HyperstackApiError({ message });
  }

  return {
    /** Makes the cluster's environment and key pair, and picks its image; nothing is left when it fails. */
    async prepare(context: MachinePrepareContext): Promise<HyperstackClusterData> {
      const { clusterId: keyName, keys, signal } = context;
      const { region, flavorName } = context.offer.specific as unknown as HyperstackOfferData;
      const environmentName = `${keyName}--${poolNamePart(context.poolId)}`;
      const [body, purpose] = [{ name: environmentName, region }, `creating environment ${environmentName}`];
      const { environment } = await calls.newEnvironment({ body, purpose }, signal);
      try {
        const body = { name: keyName, environment_name: environmentName, public_key: keys.publicKey };
        await calls.importKeypair({ body, purpose: `importing key pair ${keyName}` }, signal);
        const imageName = settings.image ?? (await newestImage(region, signal));
        return { environmentName, environmentId: environment.id, keyName, flavorName, imageName, ...keys };
      } catch (error) {
        await deleteEnvironment(environment, AbortSignal.timeout(60_000)).catch(() => undefined);
        throw error;
      }
    },

    /** Removes the cluster's environment once its VMs (deleted by the base) are gone. */
    async teardown(cluster: { id: string; specific?: Partial<HyperstackClusterData> }, signal: AbortSignal) {
      const name = cluster.specific?.environmentName;
      const environment = (await calls.environments.all({}, signal)).find((entry) =>
        name ? entry.name === name : entry.name.startsWith(`${cluster.id}--`),
      );
      if (!environment) return;
      await waitForNoVms(environment.name, Date.now() + 120_000, signal);
      await deleteEnvironment(environment, signal);
    },

    /** `skyward cleanup`: the environments (and their key pairs) of the pools asked, once no VM holds them. */
    async cleanup({ pools, waitSeconds, signal }: CleanupOptions): Promise<CleanupResult> {
      const deadline = Date.now() + Math.max(0, waitSeconds ?? 0) * 1000;
      const removed: PoolResource[] = [];
      const left: LeftPoolResource[] = [];
      for (const environment of await calls.environments.all({}, signal)) {
        const match = ENVIRONMENT_NAME.exec(environment.name);
        const poolId = match?.[2] || match?.[1];
        if (!poolId || (pools !== "all" && !pools.includes(poolId))) continue;
        const live = (await vmsIn(environment.name, signal)).filter((vm) => !/^DELETING$/i.test(vm.status));
        const holding = live.length > 0 ? live : await waitForNoVms(environment.name, deadline, signal);
        if (holding[0]) {
          const reason = `virtual machine ${holding[0].id} ${live.length > 0 ? "still uses it" : "is still being deleted"}`;
          left.push({ poolId, kind: "environment", id: environment.name, reason });
          continue;
        }
        for (const resource of await deleteEnvironment(environment, signal))
          removed.push({ poolId, ...resource });
      }
      return { removed, left };
    },
  };
}
