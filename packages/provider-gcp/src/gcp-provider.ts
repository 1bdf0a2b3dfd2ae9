import type { Instance, ProviderV1 } from "@skyward/core/contract";
import { skywardKeysDirectory } from "@skyward/provider-utils";
import { findSshIdentityFile, launchSshWorker, reconnectThroughGetInstance } from "@skyward/ssh";
import { clusterZone, type GcpProviderContext } from "./context.js";
import { createClientFactory, PROVIDER_NAME, projectOf } from "./gcp-api.js";
import { createInstanceView } from "./instance-view.js";
import type { GcpClusterData } from "./offer-data.js";
import { createOfferCatalogue } from "./offers.js";
import { prepareCluster } from "./prepare.js";
import { provisionVms } from "./provisioning.js";
import { type GcpSettings, type ResolvedGcpSettings, resolveGcpSettings } from "./settings.js";
import { selfDeleteCommand } from "./startup-script.js";
import { cleanupPools, teardownCluster } from "./teardown.js";
import { deleteVms, GCP_LABELS, getVm, listVms } from "./vms.js";

export type { GcpClusterData, GcpOfferData } from "./offer-data.js";
export { DEFAULT_ARM_IMAGE, DEFAULT_CPU_IMAGE, DEFAULT_GPU_IMAGE } from "./prepare.js";
export { GCP_LABELS, labelValue, TAGS_METADATA_KEY } from "./vms.js";

/**
 * The GCP provider: `GCP()` uses the defaults (zone `us-central1-a`, Application Default
 * Credentials, the project from the environment). Settings are validated at once (a
 * `ConfigurationError` names the field); credentials and the project are looked up on the first
 * call that needs them.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { GCP } from "@skyward/provider-gcp";
 *
 * await using pool = await sky.compute({ provider: GCP({ zone: "us-central1-a" }), accelerator: sky.accelerators.L4() });
 * ```
 */
export function GCP(settings: GcpSettings = {}): ProviderV1<GcpClusterData> {
  return build(resolveGcpSettings(settings, "GCP"));
}

/**
 * Creates the provider from a `skyward.toml` table (`[providers.x]` with `type = "gcp"`), its keys
 * already in camelCase: `project`, `zone`, `credentialsFile`, `accessToken`, `apiEndpoint`,
 * `billingEndpoint`, `iamEndpoint`, `resourceManagerEndpoint`, `network`, `subnetwork`, `image`,
 * `sshUser`, `root`, `diskGb`, `diskType`, `maxRunDuration`, `serviceAccount`, `keysDirectory`.
 */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<GcpClusterData> {
  return build(resolveGcpSettings(settings, ""));
}

function build(settings: ResolvedGcpSettings): ProviderV1<GcpClusterData> {
  const clientsOf = createClientFactory(settings);
  const view = createInstanceView(settings);
  /** A test's stand-in host for `instance` (the `sshAddress` seam), when there is one. */
  const standInOf = (instance: Instance) =>
    view.mappingOf({ id: instance.id, publicIp: instance.publicIp, privateIp: instance.privateIp });
  const context: GcpProviderContext = {
    settings,
    clientsOf,
    keysDirectory: () => settings.keysDirectory ?? skywardKeysDirectory(),
    view,
  };
  const catalogue = createOfferCatalogue(settings, clientsOf);
  /** The project of the offer cache's key, found on the first read of the key. */
  let keyProject: string | undefined;

  return {
    specificationVersion: "v1",
    name: PROVIDER_NAME,
    // The Catalog's list prices change seldom: the core may cache offers for a day.
    capabilities: Object.freeze({ spot: true, offerCache: "catalogue" }),
    // Every setting the offers depend on: the zone, the two APIs asked, and the project whose zones and
    // machine types are listed, also when it comes from the environment or the credentials file (read
    // when the core first asks, as the clients are made on first use; not a secret). Not the network,
    // image, disk, login or service account: they shape the VM, not the offers.
    get cacheKey() {
      keyProject ??= projectOf(settings);
      return JSON.stringify([
        settings.zone,
        keyProject ?? null,
        settings.apiEndpoint ?? null,
        settings.billingEndpoint ?? null,
      ]);
    },

    offers: ({ query, signal }) => catalogue.offers(query, signal),

    prepare: (options) => prepareCluster(context, options),

    provision: (options) => provisionVms(context, options),

    async getInstance({ cluster, id, signal }) {
      if (!/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(id)) return null;
      const raw = await getVm(clientsOf(), clusterZone(settings, cluster), id, signal);
      return raw ? view.toInstance(raw, cluster.specific?.identityFile, cluster.offer?.id ?? "") : null;
    },

    launchWorker: launchSshWorker,

    reconnectWorker(options) {
      // A detached pool's node: found again by its id, with the key file its cluster data records.
      return reconnectThroughGetInstance(options, (lookup) => this.getInstance(lookup));
    },

    async terminate({ cluster, ids, signal }) {
      await deleteVms(clientsOf(), clusterZone(settings, cluster), ids, signal);
    },

    teardown: (options) => teardownCluster(context, options),

    selfDestruct({ instance }) {
      if (settings.sshAddress) {
        // A stand-in host of a test is not the VM: it must never be shut down.
        return standInOf(instance)?.selfDestruct ?? "true";
      }
      return selfDeleteCommand({ sudo: settings.sshUser !== "root" });
    },

    interruptionNotice({ instance }) {
      // A Spot VM's preemption gives about 30 s; a GPU VM (it cannot move live) may be stopped for
      // host maintenance, an hour's notice: both end the node, so every VM reads them.
      if (settings.sshAddress) {
        const endpoint = standInOf(instance)?.metadataEndpoint;
        return endpoint ? { kind: "gcp-metadata", endpoint, intervalSeconds: 1 } : null;
      }
      return { kind: "gcp-metadata", endpoint: "http://metadata.google.internal" };
    },

    cleanup: (options) => cleanupPools(context, options),

    async listInstances({ signal }) {
      // Listing only reads: the key pair is made by `prepare`, when a machine is about to be created.
      const identityFile = await findSshIdentityFile(context.keysDirectory(), "gcp_ed25519");
      const found = await listVms(clientsOf(), `labels.${GCP_LABELS.cluster}:*`, signal);
      return found.map((raw) => view.toInstance(raw, identityFile, ""));
    },
  };
}
