/**
 * `skyward-provider-acme`: machines from the (fictional) Acme Cloud, reached over SSH. Written as an
 * outside author writes a provider: an adapter of Acme's API handed to `defineMachineProvider` from
 * `@skyward/provider-utils`, which owns the rest — the market loop and price cap, idempotent creates,
 * deletes until gone, lists that fail loudly, the SSH key pair and the workers.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { Acme } from "skyward-provider-acme";
 *
 * await using pool = await sky.compute({ provider: Acme({ region: "eu-1" }), nodes: 2 });
 * ```
 */
import {
  ConfigurationError,
  canonicalAcceleratorName,
  type Instance,
  type InstanceStatus,
  type Offer,
  type ProviderV1,
} from "@skyward/core/contract";
import {
  defineMachineProvider,
  type MachineClusterData,
  SKYWARD_TAGS,
  sshReachableStatus,
} from "@skyward/provider-utils";
import { type AcmeMachine, type AcmeMachineType, acmeApi, createAcmeClient } from "./acme-api.js";
import { type AcmeSettings, parseAcmeSettings } from "./acme-settings.js";

export type { AcmeSettings };

const STATES: Record<AcmeMachine["state"], InstanceStatus> = {
  provisioning: "pending",
  running: "running",
  deleting: "stopping",
  deleted: "terminated",
};

function toOffer(type: AcmeMachineType, asOf: string): Offer {
  const gpu = type.gpu;
  return {
    id: `acme:${type.region}:${type.id}`,
    provider: "acme",
    instanceType: type.id,
    accelerator: gpu
      ? { name: canonicalAcceleratorName(gpu.model) ?? gpu.model, count: gpu.count, memoryGb: gpu.memoryGb }
      : null,
    vcpus: type.vcpus,
    memoryGb: type.memoryGb,
    architecture: "x86_64",
    region: type.region,
    spotPrice: null,
    onDemandPrice: type.pricePerHour,
    billingUnit: "second",
    pricesAsOf: asOf,
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
    offerId: machine.labels[SKYWARD_TAGS.offer] ?? "",
    createdAt: Date.parse(machine.createdAt),
    tags: machine.labels,
  };
}

function build(settings: ReturnType<typeof parseAcmeSettings>): ProviderV1<MachineClusterData> {
  const api = createAcmeClient(settings.apiUrl, settings);
  return defineMachineProvider<AcmeMachine>({
    name: "acme",
    label: "Acme",
    capabilities: { spot: false },
    ...(settings.region ? { cacheKey: settings.region } : {}),
    clusterIdPrefix: "acme",
    sshUser: "root",
    keyName: "acme_ed25519",
    keysDirectory: settings.keysDirectory,
    idempotencyToken: true,
    bootWatchdog: {
      none: "Acme runs no command of ours at boot; its agent deletes a machine on request only",
    },
    deleteRetryDelayMs: 500,
    checkCredentials: () => void acmeApi.resolveApiKey(settings.apiKey),

    async offers(query, signal) {
      const region = query.region ?? settings.region;
      const asOf = new Date().toISOString().slice(0, 10);
      return (await api.machineTypes(signal))
        .filter((type) => region === undefined || type.region === region)
        .map((type) => toOffer(type, asOf));
    },
    create: ({ cluster, name, tags, idempotencyKey, signal }) =>
      api.createMachine(
        {
          name,
          type: cluster.offer.instanceType,
          labels: { ...tags, [SKYWARD_TAGS.region]: cluster.region },
          sshPublicKey: cluster.specific.publicKey,
          idempotencyKey,
        },
        signal,
      ),
    get: (id, signal) => api.machine(id, signal),
    async listPage(cursor, signal) {
      const page = await api.machinesPage(SKYWARD_TAGS.cluster, cursor, signal);
      return { machines: page.machines, next: page.nextPage ?? undefined };
    },
    delete: { batch: (ids, signal) => api.deleteMachines(ids, signal) },
    isBeingDeleted: (machine) => machine.state === "deleting" || machine.state === "deleted",
    idOf: (machine) => machine.id,
    tags: {
      name: (cluster, index) => `${cluster.id}-${index}`,
      nameOf: (machine) => machine.name,
      read: (machine) => (machine.labels[SKYWARD_TAGS.cluster] ? machine.labels : {}),
    },
    describe: (machine, { identityFile }) => toInstance(machine, identityFile),
    // Acme's machine agent deletes the machine it runs on (see the README's API reference).
    selfDestruct: () => "acme-agent delete-self",
  });
}

/**
 * Acme Cloud as a provider: on-demand machines from its REST API, one node each, reached over SSH.
 *
 * @throws {ConfigurationError} naming the setting when one is not usable.
 */
export function Acme(settings: AcmeSettings = {}): ProviderV1<MachineClusterData> {
  return build(parseAcmeSettings(settings, "Acme"));
}

/** Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`package = "skyward-provider-acme"`). */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<MachineClusterData> {
  if (typeof settings !== "object" || settings === null)
    throw new ConfigurationError({ issues: [{ path: "", message: "expected a table of settings" }] });
  return build(parseAcmeSettings(settings, ""));
}
