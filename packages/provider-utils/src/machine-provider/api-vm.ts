/**
 * What the adapters of VM APIs whose machines delete themselves through the API (TensorDock,
 * Hyperstack: {@link renderApiBootScript}) write alike, written once: the login and key pair fields,
 * the credentials check, the boot script with the provider's key file, the delete (by the path the
 * self-destruct deletes by), and the `sshAddress` test seam, which puts a stand-in host in a machine's
 * place and nothing in its self-destruct's.
 */
import type { Instance } from "@skyward/core/contract";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";
import type { ProviderHttpSettings } from "../http/provider-http.js";
import type { SshStandIn } from "../instances.js";
import type { MachineAdapter } from "./adapter.js";
import {
  type ApiBootScriptOptions,
  renderApiBootScript,
  SELF_DESTRUCT_COMMAND,
  type SelfDestructApi,
} from "./api-self-destruct.js";
import type { MachineApi, MachineJsonClient } from "./machine-api.js";
import { type StandInSeam, selfDestructCommand, standInSeam } from "./machine-instance.js";

/** What {@link defineApiVm} is given. */
export interface ApiVmDefinition {
  /** The provider's API. */
  readonly api: MachineApi;
  /** The provider's name in offers and tags (`"tensordock"`); its key pair is `<name>_ed25519`. */
  readonly name: string;
  /** What the API calls a machine (`"instance"`), in messages. */
  readonly machineNoun: string;
  /** How the self-destruct calls the API, and where the VM keeps the key. */
  readonly selfDestruct: SelfDestructApi & { readonly keyFile: string };
}

/** The parsed settings {@link ApiVm.adapterBase} reads. */
export interface ApiVmSettings<Address, Mapping extends SshStandIn> extends ProviderHttpSettings {
  readonly apiUrl: string;
  readonly apiKey?: string | undefined;
  readonly sshUser: string;
  readonly keysDirectory?: string | undefined;
  readonly sshAddress?: ((address: Address) => Mapping) | undefined;
}

/** The fields of an adapter {@link ApiVm.adapterBase} fills in. */
export type ApiVmFields = Pick<
  MachineAdapter<unknown>,
  | "name"
  | "sshUser"
  | "keyName"
  | "keysDirectory"
  | "idempotencyToken"
  | "bootWatchdog"
  | "checkCredentials"
  | "delete"
  | "selfDestruct"
>;

/** A VM API, as {@link defineApiVm} returns it. */
export interface ApiVm {
  /** The boot script of a VM (cloud-init runs it as root): it arms the self-destruct and the boot watchdog. */
  renderBootScript(options: ApiBootScriptOptions): string;
  /** What one provider object's adapter shares: its client, its test seam, the common fields, and the boot script of a VM. */
  adapterBase<Address, Mapping extends SshStandIn>(
    settings: ApiVmSettings<Address, Mapping>,
    addressOf: (instance: Instance) => Address | undefined,
  ): {
    readonly client: MachineJsonClient;
    readonly standIns: StandInSeam<Address, Mapping>;
    readonly fields: ApiVmFields;
    bootScript(vmName: string, watchdogSeconds: number): string;
  };
}

/** Defines a VM API's shared adapter half; see the module comment. */
export function defineApiVm(definition: ApiVmDefinition): ApiVm {
  const { api, name, machineNoun, selfDestruct } = definition;
  const renderBootScript = (options: ApiBootScriptOptions) =>
    renderApiBootScript(selfDestruct, { keyFile: selfDestruct.keyFile, ...options });
  return {
    renderBootScript,
    adapterBase(settings, addressOf) {
      const client = api.jsonClient(settings);
      const standIns = standInSeam(settings.sshAddress, addressOf);
      const fields: ApiVmFields = {
        name,
        sshUser: settings.sshUser,
        keyName: `${name}_ed25519`,
        keysDirectory: settings.keysDirectory,
        // The create takes no idempotency token: one whose answer was lost is looked for by name.
        idempotencyToken: false,
        bootWatchdog: "boot-command",
        checkCredentials: () => void api.resolveApiKey(settings.apiKey),
        delete: {
          async one(id, signal) {
            const path = selfDestruct.deletePath.replace("{id}", id);
            await client.remove("delete", path, `deleting ${machineNoun} ${id}`, signal);
            standIns.forget(id);
          },
        },
        // Installed by the boot script with the key it saved: deleting through the API ends the bill.
        selfDestruct: (instance) =>
          standIns.selfDestruct(
            instance,
            selfDestructCommand(SELF_DESTRUCT_COMMAND, instance.id, settings.sshUser),
          ),
      };
      const bootScript = (vmName: string, watchdogSeconds: number) =>
        renderBootScript({
          apiUrl: settings.apiUrl,
          apiKey: api.resolveApiKey(settings.apiKey),
          vmName,
          root: DEFAULT_NODE_ROOT,
          watchdogSeconds,
        });
      return { client, standIns, fields, bootScript };
    },
  };
}
