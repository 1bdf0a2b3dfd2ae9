/**
 * What the adapters of VM APIs whose machines delete themselves through the API (TensorDock,
 * Hyperstack: {@link renderApiBootScript}) write alike, written once: the one adapter half
 * ({@link machineAdapterHalf}: login and key pair fields, the `sshAddress` test seam, `describe`) with a
 * sudo login user and `skyward-` cluster ids, the credentials check, the boot script with the
 * provider's key file, the delete (by the path the self-destruct deletes by), and the machine mapping
 * reached as that login user.
 */
import type { Instance, ProviderCapabilities } from "@skyward/core/contract";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";
import type { ProviderHttpSettings } from "../http/provider-http.js";
import type { SshStandIn } from "../instances.js";
import type { MachineAdapter } from "./adapter.js";
import { type ApiBootScriptOptions, renderApiBootScript, type SelfDestructApi } from "./api-self-destruct.js";
import type { MachineApi, MachineJsonClient } from "./machine-api.js";
import {
  type MachineMapping,
  type MappableMachine,
  type MappedMachine,
  mappedMachine,
} from "./machine-mapping.js";
import {
  type MachineAdapterHalf,
  type MachineAdapterHalfFields,
  machineAdapterHalf,
} from "./marketplace-machine.js";

/** What {@link defineApiVm} is given; `Calls` what its declared endpoints bind to (`machineEndpoints`). */
export interface ApiVmDefinition<Calls = undefined> {
  /** The provider's API. */
  readonly api: MachineApi;
  /** The provider's name in offers and tags (`"tensordock"`); its key pair is `<name>_ed25519`. Default the API's `provider`. */
  readonly name?: string;
  /** The provider as people write it (`"TensorDock"`). Default the API's `label`. */
  readonly label?: string;
  readonly capabilities: ProviderCapabilities;
  /** What the API calls a machine (`"instance"`), in messages. */
  readonly machineNoun: string;
  /** How the self-destruct calls the API, and where the VM keeps the key. */
  readonly selfDestruct: SelfDestructApi & { readonly keyFile: string };
  /** The API's declared endpoints (`machineEndpoints`), bound to each adapter's client as `calls`. */
  readonly endpoints?: (client: MachineJsonClient) => Calls;
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
export type ApiVmFields = MachineAdapterHalfFields &
  Pick<MachineAdapter<unknown>, "checkCredentials" | "delete">;

/** A VM API, as {@link defineApiVm} returns it. */
export interface ApiVm<Calls = undefined> {
  /** The boot script of a VM (cloud-init runs it as root): it arms the self-destruct and the boot watchdog. */
  renderBootScript(options: ApiBootScriptOptions): string;
  /** What one provider object's adapter shares: its client, its test seam, the common fields, and the boot script of a VM. */
  adapterBase<Address, Mapping extends SshStandIn>(
    settings: ApiVmSettings<Address, Mapping>,
    addressOf: (instance: Instance) => Address | undefined,
  ): MachineAdapterHalf<Address, Mapping> & {
    readonly client: MachineJsonClient;
    /** The declared endpoints bound to `client` (undefined without any). */
    readonly calls: Calls;
    readonly fields: ApiVmFields;
    bootScript(vmName: string, watchdogSeconds: number): string;
    /** The adapter's view of its machines ({@link mappedMachine}) through the test seam, reached as the settings' `sshUser`. */
    mapped<Machine extends MappableMachine>(
      mapping: MachineMapping<Machine, Address, Mapping>,
    ): MappedMachine<Machine>;
  };
}

/** Defines a VM API's shared adapter half; see the module comment. */
export function defineApiVm<Calls = undefined>(definition: ApiVmDefinition<Calls>): ApiVm<Calls> {
  const { api, machineNoun, selfDestruct } = definition;
  const renderBootScript = (options: ApiBootScriptOptions) =>
    renderApiBootScript(selfDestruct, { keyFile: selfDestruct.keyFile, ...options });
  return {
    renderBootScript,
    adapterBase<Address, Mapping extends SshStandIn>(
      settings: ApiVmSettings<Address, Mapping>,
      addressOf: (instance: Instance) => Address | undefined,
    ) {
      const client = api.jsonClient(settings);
      const named = { name: definition.name ?? api.provider, label: definition.label ?? api.label };
      const half = machineAdapterHalf({
        ...definition,
        ...named,
        settings,
        addressOf,
        clusterIdPrefix: "skyward",
      });
      const fields: ApiVmFields = {
        ...half.fields,
        checkCredentials: () => void api.resolveApiKey(settings.apiKey),
        delete: {
          async one(id, signal) {
            const path = selfDestruct.deletePath.replace("{id}", id);
            await client.remove("delete", path, `deleting ${machineNoun} ${id}`, signal);
          },
        },
      };
      const bootScript = (vmName: string, watchdogSeconds: number) =>
        renderBootScript({
          apiUrl: settings.apiUrl,
          apiKey: api.resolveApiKey(settings.apiKey),
          vmName,
          root: DEFAULT_NODE_ROOT,
          watchdogSeconds,
        });
      const calls = definition.endpoints?.(client) as Calls;
      const mapped = <Machine extends MappableMachine>(mapping: MachineMapping<Machine, Address, Mapping>) =>
        mappedMachine(half.standIns, { user: settings.sshUser, ...mapping });
      return { ...half, client, calls, fields, bootScript, mapped };
    },
  };
}
