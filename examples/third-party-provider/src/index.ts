/**
 * `skyward-provider-acme`: machines from the (fictional) Acme Cloud, reached over SSH. Written as an
 * outside author writes a provider: a plain `ProviderV1` on `@skyward/core/contract`, the shared
 * helpers of `@skyward/provider-utils`, and `@skyward/ssh`'s launcher for the workers.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { Acme } from "skyward-provider-acme";
 *
 * await using pool = await sky.compute({ provider: Acme({ region: "eu-1" }), nodes: 2 });
 * ```
 */
import {
  type Cluster,
  type ClusterSsh,
  ConfigurationError,
  canonicalAcceleratorName,
  type Instance,
  type InstanceStatus,
  type Offer,
  type ProviderV1,
  parseInput,
} from "@skyward/core/contract";
import {
  createClusterId,
  filterOffers,
  httpSettingsShape,
  keysDirectorySchema,
  poolIdFromTags,
  removePrivateKey,
  requireOwnOffer,
  SKYWARD_TAGS,
  skywardKeysDirectory,
  skywardTags,
  sshReachableStatus,
} from "@skyward/provider-utils";
import { ensureSshKeyPair, launchSshWorker } from "@skyward/ssh";
import { z } from "zod";
import { type AcmeMachine, type AcmeMachineType, createAcmeClient } from "./acme-api.js";

export { AcmeApiError } from "./acme-api.js";

/** Settings of {@link Acme}. */
export interface AcmeSettings {
  /** The API's base URL. Default `https://api.acme.example`. */
  apiUrl?: string;
  /** Where machines are created, when an account has several. Default: every region's machine types. */
  region?: string;
  /** The API key. Default: `$ACME_API_KEY`, read on the first request. Never logged. */
  apiKey?: string;
  /** Retries of a request that is safe to repeat. Default 4. */
  maxRetries?: number;
  /** The first retry's delay, milliseconds (doubled each time). Default 1000. */
  retryDelayMs?: number;
  /** Each request's deadline, milliseconds. Default 30000. */
  requestTimeoutMs?: number;
  /** Where the clusters' SSH keys are kept. Default `~/.skyward/keys`. */
  keysDirectory?: string;
}

const settingsSchema = z.strictObject({
  apiUrl: z.url({ error: "expected the API's base URL" }).default("https://api.acme.example"),
  region: z.string().min(1, { message: "expected a region name" }).optional(),
  ...httpSettingsShape,
  keysDirectory: keysDirectorySchema,
});

/** What a cluster of Acme machines keeps. */
export interface AcmeClusterData {
  /** The machine type every machine of the cluster is. */
  readonly type: string;
  /** The public half of the cluster's key pair, authorised on its machines. */
  readonly publicKey: string;
}

const STATES: Record<AcmeMachine["state"], InstanceStatus> = {
  provisioning: "pending",
  running: "running",
  deleting: "stopping",
  deleted: "terminated",
};

function toOffer(type: AcmeMachineType): Offer {
  return {
    id: `acme:${type.region}:${type.id}`,
    provider: "acme",
    instanceType: type.id,
    accelerator: type.gpu
      ? {
          name: canonicalAcceleratorName(type.gpu.model) ?? type.gpu.model,
          count: type.gpu.count,
          memoryGb: type.gpu.memoryGb,
        }
      : null,
    vcpus: type.vcpus,
    memoryGb: type.memoryGb,
    architecture: "x86_64",
    region: type.region,
    spotPrice: null,
    onDemandPrice: type.pricePerHour,
    billingUnit: "second",
    pricesAsOf: new Date().toISOString().slice(0, 10),
    specific: { type: type.id },
  };
}

function toInstance(machine: AcmeMachine, identityFile: string | undefined): Instance {
  const ssh =
    machine.address !== null && identityFile !== undefined
      ? {
          host: machine.address,
          port: machine.sshPort,
          user: machine.sshUser,
          identityFile,
          ...(machine.scratchDir ? { root: `${machine.scratchDir}/skyward` } : {}),
        }
      : null;
  return {
    id: machine.id,
    status: sshReachableStatus(STATES[machine.state], ssh),
    publicIp: machine.address,
    privateIp: machine.privateAddress ?? machine.address,
    ssh,
    spot: false,
    hourlyPrice: machine.pricePerHour,
    offerId: `acme:${machine.labels[SKYWARD_TAGS.region] ?? ""}:${machine.type}`,
    createdAt: Date.parse(machine.createdAt),
    tags: machine.labels,
  };
}

function build(settings: z.output<typeof settingsSchema>): ProviderV1<AcmeClusterData> {
  const api = createAcmeClient(settings.apiUrl, settings);
  const keysDirectory = settings.keysDirectory ?? skywardKeysDirectory();
  const identityFiles = new Map<string, string>();
  const keyName = (cluster: Pick<Cluster, "id">) => `acme-${cluster.id}`;

  const provider: ProviderV1<AcmeClusterData> = {
    specificationVersion: "v1",
    name: "acme",
    capabilities: { spot: false, volumes: false, images: false },
    ...(settings.region ? { cacheKey: settings.region } : {}),

    async offers({ query, signal }) {
      const region = query.region ?? settings.region;
      const types = await api.machineTypes(signal);
      return filterOffers(
        types.filter((type) => region === undefined || type.region === region).map(toOffer),
        query,
      );
    },

    async prepare({ spec, offer, poolId }) {
      requireOwnOffer(offer, "acme", "Acme");
      const id = createClusterId("acme");
      const keys = await ensureSshKeyPair(keysDirectory, keyName({ id }));
      identityFiles.set(id, keys.identityFile);
      const ssh: ClusterSsh = { user: "root", identityFile: keys.identityFile, sudo: false };
      return {
        id,
        provider: "acme",
        poolId: poolId ?? "",
        region: offer.region,
        spec,
        offer,
        ssh,
        specific: { type: offer.instanceType, publicKey: keys.publicKey },
      };
    },

    async provision({ cluster, count, signal }) {
      const machines = await api.createMachines(
        {
          type: cluster.specific.type,
          count,
          labels: skywardTags({
            cluster: cluster.id,
            pool: cluster.poolId,
            region: cluster.region,
            hourlyPrice: cluster.offer.onDemandPrice,
          }),
          sshPublicKey: cluster.specific.publicKey,
        },
        signal,
      );
      return machines.map((machine) => toInstance(machine, cluster.ssh?.identityFile));
    },

    async getInstance({ cluster, id, signal }) {
      const machine = await api.machine(id, signal);
      if (machine === null || machine.state === "deleted") return null;
      return toInstance(machine, cluster.ssh?.identityFile ?? identityFiles.get(cluster.id));
    },

    launchWorker: launchSshWorker,

    async terminate({ ids, signal }) {
      for (const id of ids) await api.deleteMachine(id, signal);
    },

    async teardown({ cluster, signal }) {
      const left = await api.machinesLabelled(SKYWARD_TAGS.cluster, signal);
      for (const machine of left) {
        if (machine.labels[SKYWARD_TAGS.cluster] === cluster.id && machine.state !== "deleted")
          await api.deleteMachine(machine.id, signal);
      }
      const identityFile = cluster.ssh?.identityFile ?? identityFiles.get(cluster.id);
      if (identityFile) await removePrivateKey(identityFile);
      identityFiles.delete(cluster.id);
    },

    // Acme's machine agent deletes the machine it runs on (see the README's API reference).
    selfDestruct: () => "acme-agent delete-self",

    async listInstances({ signal }) {
      const machines = await api.machinesLabelled(SKYWARD_TAGS.cluster, signal);
      return machines
        .filter((machine) => machine.state !== "deleted" && poolIdFromTags(machine.labels) !== "")
        .map((machine) => toInstance(machine, undefined));
    },
  };
  return provider;
}

/**
 * Acme Cloud as a provider: on-demand machines from its REST API, one node each, reached over SSH
 * with a key pair made per cluster.
 *
 * @throws {ConfigurationError} naming the setting when one is not usable.
 */
export function Acme(settings: AcmeSettings = {}): ProviderV1<AcmeClusterData> {
  return build(parseInput(settingsSchema, settings, "Acme"));
}

/** Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`package = "skyward-provider-acme"`). */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<AcmeClusterData> {
  if (typeof settings !== "object" || settings === null)
    throw new ConfigurationError({ issues: [{ path: "", message: "expected a table of settings" }] });
  return build(parseInput(settingsSchema, settings, ""));
}
