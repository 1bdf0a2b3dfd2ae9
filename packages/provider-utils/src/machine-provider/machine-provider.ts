/**
 * The machine-provider base: the whole `ProviderV1` contract for a machine-renting HTTP API, from a
 * {@link MachineAdapter}. The base owns the SSH key pair, the market loop and its price cap,
 * idempotent creates, teardown that deletes until gone, lists that fail loudly and the worker over
 * SSH; the adapter owns its API's requests and shapes.
 *
 * @example
 * ```ts
 * import { defineMachineProvider, type MachineAdapter } from "@skyward/provider-utils";
 *
 * declare const adapter: MachineAdapter<{ id: string }>;
 * const provider = defineMachineProvider(adapter);
 * ```
 */
import type { Cluster, Instance, ProviderV1 } from "@skyward/core/contract";
import {
  ensureSshKeyPair,
  findSshIdentityFile,
  launchSshWorker,
  reconnectThroughGetInstance,
} from "@skyward/ssh";
import { skywardKeysDirectory } from "../keys.js";
import { filterOffers, requireOwnOffer } from "../offers/offer-filter.js";
import { createClusterId, SKYWARD_TAGS } from "../tags.js";
import { refuseVolumesWithoutFuse } from "../volumes.js";
import type { MachineAdapter, MachineClusterData } from "./adapter.js";
import { machineErrorKind } from "./errors.js";
import {
  CreateBudget,
  deleteUntilGone,
  listAllMachines,
  provisionAcrossMarkets,
} from "./machine-operations.js";

/** The provider for `adapter`'s API; see the module comment. */
export function defineMachineProvider<Machine, ClusterData extends MachineClusterData = MachineClusterData>(
  adapter: MachineAdapter<Machine, ClusterData>,
): ProviderV1<ClusterData> {
  const keysDirectory = () => adapter.keysDirectory ?? skywardKeysDirectory();
  const budget = new CreateBudget();
  const cleanup = adapter.cleanup?.bind(adapter);
  const isOurs = (machine: Machine) => adapter.tags.read(machine)[SKYWARD_TAGS.cluster] !== undefined;

  async function getMachine(id: string, signal: AbortSignal): Promise<Machine | null> {
    if (!(adapter.isMachineId?.(id) ?? true)) return null;
    try {
      return await adapter.get(id, signal);
    } catch (error) {
      if (machineErrorKind(error) === "gone") return null;
      throw error;
    }
  }

  return {
    specificationVersion: "v1",
    name: adapter.name,
    capabilities: adapter.capabilities,
    ...(adapter.cacheKey !== undefined ? { cacheKey: adapter.cacheKey } : {}),

    async offers({ query, signal }) {
      return filterOffers(await adapter.offers(query, signal), query);
    },

    async prepare({ spec, offer, poolId, signal }) {
      requireOwnOffer(offer, adapter.name, adapter.label);
      adapter.checkCredentials();
      const keys = await ensureSshKeyPair(keysDirectory(), adapter.keyName);
      const clusterId = createClusterId(adapter.clusterIdPrefix);
      const pair = { publicKey: keys.publicKey, identityFile: keys.identityFile };
      const machines = adapter.containersWithoutFuse;
      if (machines) refuseVolumesWithoutFuse(spec.volumes, { provider: adapter.label, machines });
      const specific = adapter.prepare
        ? await adapter.prepare({ spec, offer, poolId: poolId ?? "", clusterId, keys: pair, signal })
        : (pair as ClusterData);
      // A new cluster: no machine of it has a name yet, none to look up before its first create.
      budget.start(clusterId);
      return Object.freeze({
        id: clusterId,
        provider: adapter.name,
        poolId: poolId ?? "",
        region: offer.region,
        spec,
        offer,
        ssh: Object.freeze({
          user: adapter.sshUser,
          identityFile: keys.identityFile,
          sudo: adapter.sshUser !== "root",
        }),
        specific: Object.freeze(specific),
      });
    },

    provision({ cluster, count, signal }) {
      return provisionAcrossMarkets(adapter, { cluster, count, signal, budget });
    },

    async getInstance({ cluster, id, signal }) {
      const machine = await getMachine(id, signal);
      if (machine === null) return null;
      // A cluster rebuilt from an instance's tags (`skyward down`) has no specific data.
      const identityFile =
        cluster.specific?.identityFile ??
        cluster.ssh?.identityFile ??
        (await findSshIdentityFile(keysDirectory(), adapter.keyName));
      return adapter.describe(machine, { identityFile, cluster });
    },

    launchWorker: launchSshWorker,

    reconnectWorker(options) {
      // A detached pool's node: found again by its id, with the key file its cluster data records.
      return reconnectThroughGetInstance(options, (lookup) => this.getInstance(lookup));
    },

    async terminate({ ids, signal }) {
      await deleteUntilGone(adapter, ids, signal);
    },

    async teardown({ cluster, signal }) {
      const left = (await listAllMachines(adapter, signal)).filter(
        (machine) =>
          adapter.tags.read(machine)[SKYWARD_TAGS.cluster] === cluster.id &&
          !(adapter.isBeingDeleted?.(machine) ?? false),
      );
      await deleteUntilGone(adapter, left.map(adapter.idOf), signal);
      await adapter.teardown?.(cluster, signal);
      budget.forget(cluster.id);
    },

    selfDestruct({ cluster, instance }) {
      return adapter.selfDestruct(instance, cluster as Cluster<ClusterData>);
    },

    ...(cleanup ? { cleanup } : {}),

    async listInstances({ signal }): Promise<Instance[]> {
      // Listing only reads: the key pair is made by `prepare`, when a machine is about to be created.
      const identityFile = await findSshIdentityFile(keysDirectory(), adapter.keyName);
      return (await listAllMachines(adapter, signal))
        .filter(isOurs)
        .map((machine) => adapter.describe(machine, { identityFile }));
    },
  };
}
