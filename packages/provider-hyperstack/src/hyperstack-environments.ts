/**
 * What a Hyperstack cluster makes beside its VMs: an environment (in the offer's region, named
 * `<cluster id>--<pool id>`) holding the cluster's key pair and its VMs. `prepare` makes them, the
 * cluster's `teardown` and `skyward cleanup` remove them once no VM holds the environment.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { CleanupOptions, CleanupResult, LeftPoolResource, PoolResource } from "@skyward/core/contract";
import {
  type MachineClusterData,
  type MachineJsonClient,
  type MachinePrepareContext,
  removeUnlessGone,
} from "@skyward/provider-utils";
import { z } from "zod";
import {
  createEnvironmentAnswerSchema,
  HyperstackApiError,
  hyperstackLists,
  imagesAnswerSchema,
} from "./hyperstack-api.js";
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

type Environment = { readonly id: number; readonly name: string };

/** The environments calls of one provider. */
export function hyperstackEnvironments(client: MachineJsonClient, settings: ParsedSettings) {
  const lists = hyperstackLists(client);
  const vmsIn = (environment: string, signal: AbortSignal) =>
    lists.vms(signal, { environment, exact_environment_match: "true" });

  /** Deletes an environment's key pairs (of every page of the account's), then the environment; what it removed. */
  async function deleteEnvironment(environment: Environment, signal: AbortSignal) {
    const removed: { kind: string; id: string }[] = [];
    for (const { id, name, environment: owner } of await lists.keypairs(signal)) {
      const ownerName = typeof owner === "string" ? owner : (owner as { name?: unknown } | null)?.name;
      if (ownerName !== environment.name) continue;
      if (await removeUnlessGone(client, `/core/keypair/${id}`, `deleting key pair ${name}`, signal))
        removed.push({ kind: "key pair", id: name });
    }
    const [path, purpose] = [
      `/core/environments/${environment.id}`,
      `deleting environment ${environment.name}`,
    ];
    if (await removeUnlessGone(client, path, purpose, signal))
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
    const answer = await client.read("other", "/core/images", imagesAnswerSchema, "listing images", signal, {
      region,
    });
    const ubuntu = answer.images
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
      const { clusterId, keys, signal } = context;
      const { region, flavorName } = context.offer.specific as unknown as HyperstackOfferData;
      const environmentName = `${clusterId}--${context.poolId.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 24)}`;
      const [schema, purpose] = [createEnvironmentAnswerSchema, `creating environment ${environmentName}`];
      const data = { name: environmentName, region };
      const { environment } = await client.call(
        "other",
        "POST",
        "/core/environments",
        schema,
        purpose,
        signal,
        { data },
      );
      try {
        const keypair = { name: clusterId, environment_name: environmentName, public_key: keys.publicKey };
        const purpose = `importing key pair ${clusterId}`;
        await client.call("other", "POST", "/core/keypairs", z.unknown(), purpose, signal, { data: keypair });
        const imageName = settings.image ?? (await newestImage(region, signal));
        return {
          environmentName,
          environmentId: environment.id,
          keyName: clusterId,
          flavorName,
          imageName,
          ...keys,
        };
      } catch (error) {
        await deleteEnvironment(environment, AbortSignal.timeout(60_000)).catch(() => undefined);
        throw error;
      }
    },

    /** Removes the cluster's environment once its VMs (deleted by the base) are gone. */
    async teardown(cluster: { id: string; specific?: Partial<HyperstackClusterData> }, signal: AbortSignal) {
      const name = cluster.specific?.environmentName;
      const environment = (await lists.environments(signal)).find((entry) =>
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
      for (const environment of await lists.environments(signal)) {
        const match = ENVIRONMENT_NAME.exec(environment.name);
        const poolId = match?.[2] || match?.[1];
        if (!poolId || (pools !== "all" && !pools.includes(poolId))) continue;
        const live = (await vmsIn(environment.name, signal)).filter(
          (vm) => vm.status.toUpperCase() !== "DELETING",
        );
        const holding = live.length > 0 ? live : await waitForNoVms(environment.name, deadline, signal);
        if (holding[0]) {
          const why = live.length > 0 ? "still uses it" : "is still being deleted";
          left.push({
            poolId,
            kind: "environment",
            id: environment.name,
            reason: `virtual machine ${holding[0].id} ${why}`,
          });
          continue;
        }
        for (const resource of await deleteEnvironment(environment, signal))
          removed.push({ poolId, ...resource });
      }
      return { removed, left };
    },
  };
}
