/**
 * The Hyperstack provider: GPU (and CPU-only) virtual machines of Hyperstack's Infrahub API, an adapter
 * on `@skyward/provider-utils`'s machine-provider base (which owns the market loop and price cap,
 * idempotent creates, deletes until gone and lists that fail loudly). Each cluster gets its own
 * environment holding its key pair and VMs (`hyperstack-environments.ts`); VMs get a floating IP with
 * port 22 open and are reached over SSH as `ubuntu` with sudo. Skyward's tags ride on the VMs' labels
 * (`skyward:cluster=…`). One VM is created a request (`count: 1`): Hyperstack bills per VM, so creating
 * them one by one costs nothing but requests, and each gets its own unique name to be found by.
 */
import type { Instance } from "@skyward/core/contract";
import {
  type ApiBootScriptOptions,
  describeMachine,
  hourlyPriceFromTags,
  type MachineAdapter,
  machineProviderFactories,
  nextNumberedPage,
  renderApiBootScript,
  SELF_DESTRUCT_COMMAND,
  SKYWARD_TAGS,
  selfDestructCommand,
  skywardTags,
  standInSeam,
  statusTable,
  tagsFromWords,
  tagsToWords,
} from "@skyward/provider-utils";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";
import { z } from "zod";
import {
  createVmsAnswerSchema,
  HyperstackApiError,
  hyperstackApi,
  PAGE_SIZE,
  pageOf,
  type Vm,
  vmAnswerSchema,
  vmsAnswerSchema,
} from "./hyperstack-api.js";
import { type HyperstackClusterData, hyperstackEnvironments } from "./hyperstack-environments.js";
import { hyperstackOffers, NAME } from "./hyperstack-offers.js";
import { type HyperstackSettings, type ParsedSettings, settingsSchema } from "./hyperstack-settings.js";

export type { HyperstackClusterData } from "./hyperstack-environments.js";
export { acceleratorOfGpu, type HyperstackOfferData } from "./hyperstack-offers.js";
export type {
  HyperstackSettings,
  HyperstackSshMapping,
  HyperstackVmAddresses,
} from "./hyperstack-settings.js";

/** VM statuses (Instance_Fields `status`) as Skyward's: gone or never running again, being deleted, else on its way. */
const vmStatus = statusTable({
  terminated: ["DELETED", "ERROR", "SHUTOFF", "HIBERNATED", "HIBERNATING", "SHELVED"],
  stopping: ["DELETING"],
  running: ["ACTIVE"],
});

/**
 * Whether the floating IP's port randomization is still being set up (`port_randomization_status`,
 * Instance_Fields): until it settles, which port 22 maps to is not known.
 */
const PORTS_SETTLING = /pend|progress|creat|updat|process|attach/i;

function statusOf(vm: Vm) {
  const status = vmStatus(vm.status);
  if (status !== "running") return status;
  if (vm.port_randomization_status && PORTS_SETTLING.test(vm.port_randomization_status)) return "pending";
  return vm.floating_ip ? "running" : "pending";
}

/** How the VM's self-destruct calls the API: by id, or by name from a search of the VMs (see `renderApiBootScript`). */
const SELF_DESTRUCT_API = {
  header: "api_key",
  idPattern: "[0-9]+",
  listPath: "/core/virtual-machines?pageSize=100&search={name}",
  listItems: ["instances"],
  deletePath: "/core/virtual-machines/{id}",
};

/** The `user_data` of a Hyperstack VM (a shell script cloud-init runs as root): it arms the VM's self-destruct and boot watchdog. */
export function renderUserData(options: ApiBootScriptOptions): string {
  return renderApiBootScript(SELF_DESTRUCT_API, { keyFile: "/etc/skyward/hyperstack-api-key", ...options });
}

/** The private network a fixed IP is in, as a /24: peers of a cluster share their environment's network. */
function peerNetwork(fixedIp: string): string | undefined {
  const parts = fixedIp.split(".");
  return parts.length === 4 ? `${parts.slice(0, 3).join(".")}.0/24` : undefined;
}

/** The ingress rule of a security group: TCP port 22, or any protocol from a network. */
const ingress = (rule: Record<string, unknown>) => ({ direction: "ingress", ethertype: "IPv4", ...rule });

function adapterFor(settings: ParsedSettings): MachineAdapter<Vm, HyperstackClusterData> {
  const client = hyperstackApi.jsonClient(settings);
  const environments = hyperstackEnvironments(client, settings);
  const standIns = standInSeam(settings.sshAddress, (instance: Instance) =>
    instance.publicIp
      ? { id: instance.id, floatingIp: instance.publicIp, fixedIp: instance.privateIp }
      : undefined,
  );

  /** Opens the VM's private network to it once it has its address there (peers talk on it), once. */
  async function openPeerNetwork(vm: Vm, signal: AbortSignal) {
    const network =
      vm.status.toUpperCase() === "ACTIVE" && vm.fixed_ip ? peerNetwork(vm.fixed_ip) : undefined;
    if (!network || vm.security_rules.some((rule) => rule.remote_ip_prefix === network)) return;
    const path = `/core/virtual-machines/${vm.id}/sg-rules`;
    const purpose = `opening the private network to virtual machine ${vm.id}`;
    const data = ingress({ protocol: "any", remote_ip_prefix: network });
    await client.call("other", "POST", path, z.unknown(), purpose, signal, { data, idempotent: true });
  }

  return {
    name: NAME,
    label: "Hyperstack",
    // Prices are a catalogue, but stock moves: the core caches offers for an hour at most.
    capabilities: Object.freeze({ spot: true, offerCache: "marketplace" }),
    // Every setting the offers depend on (the API asked, the regions allowed), so that a provider set
    // otherwise is never handed offers the core cached for another. Not the image, user or key.
    cacheKey: JSON.stringify([settings.apiUrl, settings.regions ? [...settings.regions].sort() : null]),
    sshUser: settings.sshUser,
    keyName: "hyperstack_ed25519",
    keysDirectory: settings.keysDirectory,
    // Hyperstack's create takes no idempotency token: a create whose answer was lost is looked for by name.
    idempotencyToken: false,
    bootWatchdog: "boot-command",
    deleteRetryDelayMs: Math.max(1, settings.retryDelayMs) * 5,

    checkCredentials: () => void hyperstackApi.resolveApiKey(settings.apiKey),
    offers: (query, signal) => hyperstackOffers(client, settings, query, signal),
    prepare: environments.prepare,

    async create({ cluster, name, tags, hourlyPrice, watchdogSeconds, signal }) {
      const data = {
        name,
        environment_name: cluster.specific.environmentName,
        image_name: cluster.specific.imageName,
        flavor_name: cluster.specific.flavorName,
        key_name: cluster.specific.keyName,
        count: 1,
        assign_floating_ip: true,
        // Port 22 stays port 22 on the floating IP (the VM's answer is checked: see `get`).
        enable_port_randomization: false,
        create_bootable_volume: false,
        labels: tagsToWords({ ...tags, ...skywardTags({ cluster: cluster.id, hourlyPrice }) }),
        security_rules: [
          ingress({ protocol: "tcp", remote_ip_prefix: "0.0.0.0/0", port_range_min: 22, port_range_max: 22 }),
        ],
        user_data: renderUserData({
          apiUrl: settings.apiUrl,
          apiKey: hyperstackApi.resolveApiKey(settings.apiKey),
          vmName: name,
          root: DEFAULT_NODE_ROOT,
          watchdogSeconds,
        }),
      };
      const purpose = `creating virtual machine ${name}`;
      const path = "/core/virtual-machines";
      const answer = await client.call("create", "POST", path, createVmsAnswerSchema, purpose, signal, {
        data,
      });
      const [vm] = answer.instances;
      if (!vm)
        throw new HyperstackApiError({
          kind: "unknown-answer",
          message: `Hyperstack created no VM for ${name}`,
        });
      return vm;
    },

    async get(id, signal) {
      const purpose = `looking up virtual machine ${id}`;
      const vm = (await client.read("get", `/core/virtual-machines/${id}`, vmAnswerSchema, purpose, signal))
        .instance;
      if (!vm) return null;
      if (vm.port_randomization === true && vm.status.toUpperCase() === "ACTIVE") {
        // Asked for off, yet on: port 22 of the floating IP is not the VM's SSH, and the API says not which is.
        throw new HyperstackApiError({
          message: `Hyperstack gave virtual machine ${id} random public ports (port_randomization_status ${JSON.stringify(vm.port_randomization_status ?? null)}) though enable_port_randomization was false: SSH is not on port 22 of ${vm.floating_ip}`,
        });
      }
      await openPeerNetwork(vm, signal);
      return vm;
    },

    async listPage(cursor, signal) {
      const page = cursor === undefined ? 1 : Number(cursor);
      const params = { page: String(page), pageSize: String(PAGE_SIZE), search: "skyward-" };
      const purpose = "listing virtual machines";
      const answer = await client.read(
        "list",
        "/core/virtual-machines",
        vmsAnswerSchema,
        purpose,
        signal,
        params,
      );
      const next = nextNumberedPage(page, PAGE_SIZE, pageOf(answer, answer.instances));
      return { machines: answer.instances, ...(next === undefined ? {} : { next: String(next) }) };
    },

    delete: {
      async one(id, signal) {
        await client.remove(
          "delete",
          `/core/virtual-machines/${id}`,
          `deleting virtual machine ${id}`,
          signal,
        );
        standIns.forget(id);
      },
    },

    isMachineId: (id) => /^\d+$/.test(id),
    isBeingDeleted: (vm) => vm.status.toUpperCase() === "DELETING",
    idOf: (vm) => String(vm.id),
    tags: {
      name: (cluster, index) => `${cluster.id}-${index}`,
      nameOf: (vm) => vm.name || undefined,
      read: (vm) => tagsFromWords(vm.labels),
    },

    describe(vm, { identityFile }) {
      const tags = tagsFromWords(vm.labels);
      if (vm.environment?.name) tags["hyperstack:environment"] = vm.environment.name;
      const floatingIp = vm.floating_ip || null;
      const fixedIp = vm.fixed_ip || null;
      const id = String(vm.id);
      const standIn = standIns.of(id, floatingIp ? { id, floatingIp, fixedIp } : undefined);
      return describeMachine({
        id,
        status: statusOf(vm),
        address: floatingIp ? { host: floatingIp, port: 22, user: settings.sshUser } : null,
        identityFile,
        standIn,
        privateIp: standIn?.privateIp ?? fixedIp,
        spot: tags[SKYWARD_TAGS.spot] === "1",
        hourlyPrice: hourlyPriceFromTags(tags),
        tags,
        createdAt: vm.created_at,
      });
    },

    // Installed by the VM's user data, with the key it saved there: it deletes the VM through the API,
    // which is what ends the bill.
    selfDestruct: (instance) =>
      standIns.selfDestruct(
        instance,
        selfDestructCommand(SELF_DESTRUCT_COMMAND, instance.id, settings.sshUser),
      ),

    teardown: environments.teardown,
    cleanup: environments.cleanup,
  };
}

const factories = machineProviderFactories<HyperstackSettings>()("Hyperstack", settingsSchema, adapterFor);

/**
 * The Hyperstack provider: `Hyperstack()` with default settings, or `Hyperstack({ region: "CANADA-1" })`.
 * Throws {@link ConfigurationError} for bad settings; the API key is looked up on the first API call.
 */
export const Hyperstack = factories.provider;

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "hyperstack"`), its
 * keys already camelCased by the core: `ssh_user = "ubuntu"` arrives as `sshUser`.
 */
export const createProviderFromConfig = factories.fromConfig;
