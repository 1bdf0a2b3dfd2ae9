/** The Hyperstack provider: an adapter on `@skyward/provider-utils`'s machine-provider base (README: What it supports). */
import {
  defineApiVm,
  type MachineAdapter,
  machineProviderFactories,
  skywardTags,
  tagsFromWords,
  tagsToWords,
} from "@skyward/provider-utils";
import { HyperstackApiError, hyperstackApi, hyperstackCalls, type Vm } from "./hyperstack-api.js";
import { type HyperstackClusterData, hyperstackEnvironments } from "./hyperstack-environments.js";
import { hyperstackOffers } from "./hyperstack-offers.js";
import { type HyperstackSettings, type ParsedSettings, settingsSchema } from "./hyperstack-settings.js";

/** A `port_randomization_status` still being set up: which port 22 maps to is not known yet. */
const PORTS_SETTLING = /pend|progress|creat|updat|process|attach/i;

/** The VM half of the adapter; its boot script is a VM's `user_data` (cloud-init runs it as root). */
export const hyperstackVm = defineApiVm({
  api: hyperstackApi,
  // Prices are a catalogue, but stock moves: the core caches offers for an hour at most.
  capabilities: Object.freeze({ spot: true, offerCache: "marketplace" }),
  machineNoun: "virtual machine",
  endpoints: hyperstackCalls,
  // The self-destruct finds a VM by name in a search of the VMs (a VM does not know its own id).
  selfDestruct: {
    header: "api_key",
    idPattern: "[0-9]+",
    listPath: "/core/virtual-machines?pageSize=100&search={name}",
    listItems: ["instances"],
    deletePath: "/core/virtual-machines/{id}",
    keyFile: "/etc/skyward/hyperstack-api-key",
  },
});

/** The ingress rule of a security group: TCP port 22, or any protocol from a network. */
const ingress = (rule: object) => ({ direction: "ingress", ethertype: "IPv4", ...rule });
const tcp22 = { protocol: "tcp", port_range_min: 22, port_range_max: 22 };
const SSH = ingress({ ...tcp22, remote_ip_prefix: "0.0.0.0/0" });

function adapterFor(settings: ParsedSettings): MachineAdapter<Vm, HyperstackClusterData> {
  const { calls, fields, bootScript, mapped } = hyperstackVm.adapterBase(
    settings,
    ({ id, publicIp: ip, privateIp }) => (ip ? { id, floatingIp: ip, fixedIp: privateIp } : undefined),
  );
  const machine = mapped({
    // VM statuses (Instance_Fields `status`): gone or never running again, being deleted, else on its way.
    statuses: {
      terminated: ["DELETED", "ERROR", "SHUTOFF", "HIBERNATED", "HIBERNATING", "SHELVED"],
      stopping: ["DELETING"],
      running: ["ACTIVE"],
    },
    // Running once it has its floating IP and which port 22 maps to is known.
    status: (vm: Vm, byWord) =>
      byWord === "running" && (!vm.floating_ip || PORTS_SETTLING.test(vm.port_randomization_status ?? ""))
        ? "pending"
        : byWord,
    deleting: ["DELETING"],
    tags: ({ labels, environment }) => ({
      ...tagsFromWords(labels),
      ...(environment?.name ? { "hyperstack:environment": environment.name } : {}),
    }),
    address: (vm) => (vm.floating_ip ? { host: vm.floating_ip, port: 22 } : undefined),
    seamAddress: (id, { host }, vm) => ({ id, floatingIp: host, fixedIp: vm.fixed_ip || null }),
    privateIp: (vm, standIn) => standIn?.privateIp ?? (vm.fixed_ip || null),
    createdAt: (vm) => vm.created_at,
  });
  const environments = hyperstackEnvironments(calls, settings);

  /** Opens the VM's private network (its fixed IP's /24, where peers talk) to it, once it has an address there. */
  async function openPeerNetwork(vm: Vm, signal: AbortSignal) {
    const parts = vm.status.toUpperCase() === "ACTIVE" ? (vm.fixed_ip?.split(".") ?? []) : [];
    const network = parts.length === 4 ? `${parts.slice(0, 3).join(".")}.0/24` : undefined;
    if (!network || vm.security_rules.some((rule) => rule.remote_ip_prefix === network)) return;
    const body = ingress({ protocol: "any", remote_ip_prefix: network });
    await calls.openPeers({ id: vm.id, body }, signal);
  }

  return {
    ...fields,
    ...machine,
    cacheKey: JSON.stringify([settings.apiUrl, settings.regions ? [...settings.regions].sort() : null]),
    offers: (query, signal) => hyperstackOffers(calls, settings, query, signal),
    prepare: environments.prepare,

    async create({ cluster, name, tags, hourlyPrice, watchdogSeconds, signal }) {
      const { environmentName, imageName, flavorName, keyName } = cluster.specific;
      const placed = { environment_name: environmentName, image_name: imageName, flavor_name: flavorName };
      // Port 22 stays port 22 on the floating IP (the VM's answer is checked: see `get`).
      const ports = { assign_floating_ip: true, enable_port_randomization: false, security_rules: [SSH] };
      const labels = tagsToWords({ ...tags, ...skywardTags({ cluster: cluster.id, hourlyPrice }) });
      const vm = { name, key_name: keyName, count: 1, create_bootable_volume: false, labels };
      const body = { ...vm, ...placed, ...ports, user_data: bootScript(name, watchdogSeconds) };
      const purpose = `creating virtual machine ${name}`;
      const { instances } = await calls.createVm({ body, purpose }, signal);
      if (instances[0]) return instances[0];
      const message = `Hyperstack created no VM for ${name}`;
      throw new HyperstackApiError({ kind: "unknown-answer", message });
    },

    async get(id, signal) {
      const { instance: vm } = await calls.vm({ id }, signal);
      if (!vm) return null;
      if (vm.port_randomization === true && vm.status.toUpperCase() === "ACTIVE") {
        // Asked for off, yet on: port 22 of the floating IP is not the VM's SSH, and the API says not which is.
        const message = `Hyperstack gave virtual machine ${id} random public ports (port_randomization_status ${JSON.stringify(vm.port_randomization_status ?? null)}) though enable_port_randomization was false: SSH is not on port 22 of ${vm.floating_ip}`;
        throw new HyperstackApiError({ message });
      }
      await openPeerNetwork(vm, signal);
      return vm;
    },

    listPage: (cursor, signal) => calls.vms.page(cursor, signal, { query: { search: "skyward-" } }),
    isMachineId: (id) => /^\d+$/.test(id),
    teardown: environments.teardown,
    cleanup: environments.cleanup,
  };
}

const factories = machineProviderFactories<HyperstackSettings>()("Hyperstack", settingsSchema, adapterFor);

/** The Hyperstack provider: `Hyperstack()` or `Hyperstack({ region: "CANADA-1" })`; bad settings throw `ConfigurationError`. */
export const Hyperstack = factories.provider;

/** Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "hyperstack"`), keys camelCased. */
export const createProviderFromConfig = factories.fromConfig;
