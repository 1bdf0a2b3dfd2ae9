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
  environmentsAnswerSchema,
  HyperstackApiError,
  imagesAnswerSchema,
  keypairsAnswerSchema,
  readAllPages,
  vmsAnswerSchema,
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
  const listEnvironments = (signal: AbortSignal) =>
    readAllPages(
      client,
      "/core/environments",
      environmentsAnswerSchema,
      (answer) => answer.environments,
      signal,
    );
  const vmsIn = (environment: string, signal: AbortSignal) =>
    readAllPages(client, "/core/virtual-machines", vmsAnswerSchema, (answer) => answer.instances, signal, {
      environment,
      exact_environment_match: "true",
    });

  /** Deletes an environment's key pairs (of every page of the account's), then the environment; what it removed. */
  async function deleteEnvironment(environment: Environment, signal: AbortSignal) {
    const removed: { kind: string; id: string }[] = [];
    const keypairs = await readAllPages(
      client,
      "/core/keypairs",
      keypairsAnswerSchema,
      (a) => a.keypairs,
      signal,
    );
    for (const { id, name, environment: owner } of keypairs) {
      const ownerName = typeof owner === "string" ? owner : (owner as { name?: unknown } | null)?.name;
      if (ownerName !== environment.name) continue;
      if (await removeUnlessGone(client, `/core/keypair/${id}`, `deleting key pair ${name}`, signal))
        removed.push({ kind: "key pair", id: name });
    }
    const path = `/core/environments/${environment.id}`;
    if (await removeUnlessGone(client, path, `deleting environment ${environment.name}`, signal))
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
    throw new HyperstackApiError({
      message: `Hyperstack lists no Ubuntu image in ${region}; set image to one of its images`,
    });
  }

  return {
    /** Makes the cluster's environment and key pair, and picks its image; nothing is left when it fails. */
    async prepare({
      clusterId,
      keys,
      signal,
      poolId,
      offer,
    }: MachinePrepareContext): Promise<HyperstackClusterData> {
      const { region, flavorName } = offer.specific as unknown as HyperstackOfferData;
      const environmentName = `${clusterId}--${poolId.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 24)}`;
      const { environment } = await client.call(
        "other",
        "POST",
        "/core/environments",
        createEnvironmentAnswerSchema,
        `creating environment ${environmentName}`,
        signal,
        { data: { name: environmentName, region } },
      );
      try {
        const data = { name: clusterId, environment_name: environmentName, public_key: keys.publicKey };
        await client.call(
          "other",
          "POST",
          "/core/keypairs",
          z.unknown(),
          `importing key pair ${clusterId}`,
          signal,
          {
            data,
          },
        );
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
      const environment = (await listEnvironments(signal)).find((entry) =>
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
      for (const environment of await listEnvironments(signal)) {
        const match = ENVIRONMENT_NAME.exec(environment.name);
        const poolId = match?.[2] || match?.[1];
        if (!poolId || (pools !== "all" && !pools.includes(poolId))) continue;
        const live = (await vmsIn(environment.name, signal)).filter(
          (vm) => vm.status.toUpperCase() !== "DELETING",
        );
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
