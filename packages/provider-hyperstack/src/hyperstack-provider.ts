/**
 * The Hyperstack provider: GPU (and CPU-only) virtual machines of Hyperstack's Infrahub API, an adapter
 * on `@skyward/provider-utils`'s machine-provider base (which owns the market loop and price cap,
 * idempotent creates, deletes until gone and lists that fail loudly). Each cluster gets its own
 * environment holding its key pair and VMs (`hyperstack-environments.ts`); VMs get a floating IP with
 * port 22 open and are reached over SSH as `ubuntu` with sudo. Skyward's tags ride on the VMs' labels
 * (`skyward:cluster=…`). One VM is created a request (`count: 1`): Hyperstack bills per VM, so creating
 * them one by one costs nothing but requests, and each gets its own unique name to be found by.
 */
import type { Instance, InstanceStatus, ProviderV1 } from "@skyward/core/contract";
import { shellQuote } from "@skyward/core/contract";
import {
  defineMachineProvider,
  hourlyPriceFromTags,
  instanceSsh,
  type MachineAdapter,
  pacedClient,
  SKYWARD_TAGS,
  skywardTags,
  sshReachableStatus,
} from "@skyward/provider-utils";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";
import {
  createVmsAnswerSchema,
  HYPERSTACK_RATE_LIMITS,
  HyperstackApiError,
  hyperstackApi,
  nextPage,
  PAGE_SIZE,
  parseAnswer,
  type Vm,
  vmAnswerSchema,
  vmsAnswerSchema,
} from "./hyperstack-api.js";
import { type HyperstackClusterData, hyperstackEnvironments } from "./hyperstack-environments.js";
import { hyperstackOffers, NAME } from "./hyperstack-offers.js";
import { type HyperstackSettings, type ParsedSettings, parseSettings } from "./hyperstack-settings.js";
import { renderUserData, SELF_DESTRUCT_COMMAND } from "./user-data.js";

export type { HyperstackClusterData } from "./hyperstack-environments.js";
export { acceleratorOfGpu, type HyperstackOfferData } from "./hyperstack-offers.js";
export type {
  HyperstackSettings,
  HyperstackSshMapping,
  HyperstackVmAddresses,
} from "./hyperstack-settings.js";

/** VM statuses of a VM that is gone or will never run again. */
const ENDED = new Set(["DELETED", "ERROR", "SHUTOFF", "HIBERNATED", "HIBERNATING", "SHELVED"]);

/** Skyward's tags as VM labels (`skyward:cluster=skyward-1a2b3c4d`), and back. */
export function tagsToLabels(tags: Readonly<Record<string, string>>): string[] {
  return Object.entries(tags).map(([key, value]) => `${key}=${value}`);
}

function tagsFromLabels(labels: readonly string[]): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const label of labels) {
    const at = label.indexOf("=");
    if (at > 0 && label.startsWith("skyward:")) tags[label.slice(0, at)] = label.slice(at + 1);
  }
  return tags;
}

/**
 * Whether the floating IP's port randomization is still being set up (`port_randomization_status`,
 * Instance_Fields): until it settles, which port 22 maps to is not known.
 */
const PORTS_SETTLING = /pend|progress|creat|updat|process|attach/i;

function statusOf(vm: Vm): InstanceStatus {
  const status = vm.status.toUpperCase();
  if (ENDED.has(status)) return "terminated";
  if (status === "DELETING") return "stopping";
  if (vm.port_randomization_status && PORTS_SETTLING.test(vm.port_randomization_status)) return "pending";
  return status === "ACTIVE" && vm.floating_ip ? "running" : "pending";
}

/** The private network a fixed IP is in, as a /24: peers of a cluster share their environment's network. */
function peerNetwork(fixedIp: string): string | undefined {
  const parts = fixedIp.split(".");
  return parts.length === 4 ? `${parts.slice(0, 3).join(".")}.0/24` : undefined;
}

function adapterFor(settings: ParsedSettings): MachineAdapter<Vm, HyperstackClusterData> {
  const http = pacedClient(hyperstackApi.createClient(settings), HYPERSTACK_RATE_LIMITS);
  const api = settings.apiUrl;
  const environments = hyperstackEnvironments(http, settings);

  /** Opens the VM's private network to it once it has its address there (peers talk on it), once. */
  async function openPeerNetwork(vm: Vm, signal: AbortSignal) {
    const network =
      vm.status.toUpperCase() === "ACTIVE" && vm.fixed_ip ? peerNetwork(vm.fixed_ip) : undefined;
    if (!network || vm.security_rules.some((rule) => rule.remote_ip_prefix === network)) return;
    await http.send("other", {
      method: "POST",
      url: `${api}/core/virtual-machines/${vm.id}/sg-rules`,
      data: { direction: "ingress", ethertype: "IPv4", protocol: "any", remote_ip_prefix: network },
      idempotent: true,
      purpose: `opening the private network to virtual machine ${vm.id}`,
      signal,
    });
  }

  return {
    name: NAME,
    label: "Hyperstack",
    // Prices are a catalogue, but stock moves: the core caches offers for an hour at most.
    capabilities: Object.freeze({ spot: true, offerCache: "marketplace" }),
    // Every setting the offers depend on (the API asked, the regions allowed), so that a provider set
    // otherwise is never handed offers the core cached for another. Not the image, user or key.
    cacheKey: JSON.stringify([api, settings.regions ? [...settings.regions].sort() : null]),
    sshUser: settings.sshUser,
    keyName: "hyperstack_ed25519",
    keysDirectory: settings.keysDirectory,
    // Hyperstack's create takes no idempotency token: a create whose answer was lost is looked for by name.
    idempotencyToken: false,
    bootWatchdog: "boot-command",
    deleteRetryDelayMs: Math.max(1, settings.retryDelayMs) * 5,

    checkCredentials: () => void hyperstackApi.resolveApiKey(settings.apiKey),
    offers: (query, signal) => hyperstackOffers(http, settings, query, signal),
    prepare: environments.prepare,

    async create({ cluster, name, tags, hourlyPrice, watchdogSeconds, signal }) {
      const { data } = await http.send("create", {
        method: "POST",
        url: `${api}/core/virtual-machines`,
        data: {
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
          labels: tagsToLabels({ ...tags, ...skywardTags({ cluster: cluster.id, hourlyPrice }) }),
          security_rules: [
            {
              direction: "ingress",
              ethertype: "IPv4",
              protocol: "tcp",
              remote_ip_prefix: "0.0.0.0/0",
              port_range_min: 22,
              port_range_max: 22,
            },
          ],
          user_data: renderUserData({
            apiUrl: api,
            apiKey: hyperstackApi.resolveApiKey(settings.apiKey),
            vmName: name,
            root: DEFAULT_NODE_ROOT,
            watchdogSeconds,
          }),
        },
        idempotent: false,
        purpose: `creating virtual machine ${name}`,
        signal,
      });
      const [vm] = parseAnswer(createVmsAnswerSchema, data, "creating a virtual machine").instances;
      if (!vm)
        throw new HyperstackApiError({
          kind: "unknown-answer",
          message: `Hyperstack created no VM for ${name}`,
        });
      return vm;
    },

    async get(id, signal) {
      const purpose = `looking up virtual machine ${id}`;
      const { data } = await http.send("get", {
        method: "GET",
        url: `${api}/core/virtual-machines/${id}`,
        idempotent: true,
        purpose,
        signal,
      });
      const vm = parseAnswer(vmAnswerSchema, data, purpose).instance ?? null;
      if (vm?.port_randomization === true && vm.status.toUpperCase() === "ACTIVE") {
        // Asked for off, yet on: port 22 of the floating IP is not the VM's SSH, and the API says not which is.
        throw new HyperstackApiError({
          kind: "bad-request",
          message: `Hyperstack gave virtual machine ${id} random public ports (port_randomization_status ${JSON.stringify(vm.port_randomization_status ?? null)}) though enable_port_randomization was false: SSH is not on port 22 of ${vm.floating_ip}`,
        });
      }
      if (vm) await openPeerNetwork(vm, signal);
      return vm;
    },

    async listPage(cursor, signal) {
      const page = cursor === undefined ? 1 : Number(cursor);
      const { data } = await http.send("list", {
        method: "GET",
        url: `${api}/core/virtual-machines`,
        params: { page: String(page), pageSize: String(PAGE_SIZE), search: "skyward-" },
        idempotent: true,
        purpose: "listing virtual machines",
        signal,
      });
      const answer = parseAnswer(vmsAnswerSchema, data, "listing virtual machines");
      const next = nextPage(page, answer.instances.length, answer);
      return { machines: answer.instances, ...(next === undefined ? {} : { next: String(next) }) };
    },

    delete: {
      async one(id, signal) {
        await http.send("delete", {
          method: "DELETE",
          url: `${api}/core/virtual-machines/${id}`,
          idempotent: true,
          purpose: `deleting virtual machine ${id}`,
          signal,
        });
      },
    },

    isMachineId: (id) => /^\d+$/.test(id),
    isBeingDeleted: (vm) => vm.status.toUpperCase() === "DELETING",
    idOf: (vm) => String(vm.id),
    tags: {
      name: (cluster, index) => `${cluster.id}-${index}`,
      nameOf: (vm) => vm.name || undefined,
      read: (vm) => tagsFromLabels(vm.labels),
    },

    describe(vm, { identityFile }): Instance {
      const tags = tagsFromLabels(vm.labels);
      if (vm.environment?.name) tags["hyperstack:environment"] = vm.environment.name;
      const status = statusOf(vm);
      const floatingIp = vm.floating_ip || null;
      const fixedIp = vm.fixed_ip || null;
      const mapping =
        floatingIp && settings.sshAddress
          ? settings.sshAddress({ id: String(vm.id), floatingIp, fixedIp })
          : undefined;
      const ssh =
        status === "running" && floatingIp
          ? instanceSsh({ host: floatingIp, port: 22, user: settings.sshUser }, identityFile, mapping)
          : null;
      const created = Date.parse(vm.created_at);
      return Object.freeze({
        id: String(vm.id),
        status: sshReachableStatus(status, ssh),
        publicIp: floatingIp,
        privateIp: mapping?.privateIp ?? fixedIp,
        ssh,
        spot: tags[SKYWARD_TAGS.spot] === "1",
        hourlyPrice: hourlyPriceFromTags(tags),
        offerId: tags[SKYWARD_TAGS.offer] ?? "",
        createdAt: Number.isFinite(created) ? created : Date.now(),
        tags: Object.freeze(tags),
      });
    },

    selfDestruct(instance) {
      if (settings.sshAddress && instance.publicIp) {
        // A stand-in host of a test is not the VM: it must never be deleted.
        const vm = { id: instance.id, floatingIp: instance.publicIp, fixedIp: instance.privateIp };
        return settings.sshAddress(vm).selfDestruct ?? "true";
      }
      // Installed by the VM's user data, with the key it saved there (see user-data.ts): it deletes the
      // VM through the API, which is what ends the bill.
      const command = `${SELF_DESTRUCT_COMMAND} ${shellQuote(instance.id)}`;
      return settings.sshUser === "root" ? command : `sudo -n ${command}`;
    },

    teardown: environments.teardown,
    cleanup: environments.cleanup,
  };
}

/**
 * The Hyperstack provider: `Hyperstack()` with default settings, or `Hyperstack({ region: "CANADA-1" })`.
 * Throws {@link ConfigurationError} for bad settings; the API key is looked up on the first API call.
 */
export function Hyperstack(settings: HyperstackSettings = {}): ProviderV1<HyperstackClusterData> {
  return defineMachineProvider(adapterFor(parseSettings(settings, "Hyperstack")));
}

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "hyperstack"`), its
 * keys already camelCased by the core: `ssh_user = "ubuntu"` arrives as `sshUser`.
 */
export function createProviderFromConfig(
  settings: Record<string, unknown>,
): ProviderV1<HyperstackClusterData> {
  return defineMachineProvider(adapterFor(parseSettings(settings as HyperstackSettings, "")));
}
