/**
 * The one half every adapter of a machine-renting API shares, written once: its fixed fields (no
 * idempotency token, so a lost create is found by name; a boot command arming the watchdog), the
 * login user (root on marketplace containers, a sudo user on VMs), and the `sshAddress` test seam with
 * the self-destruct a worker runs (machines are described through `mappedMachine`, which puts the
 * seam's stand-in in). Root containers (Verda,
 * Novita) use it as is; `defineApiVm` (VMs deleting themselves through the API) is this half with its
 * defaults. Also here: the on-demand and spot listings an offer query asks for, and the read right
 * after a create that never loses the machine asked for.
 */
import type { Instance, OfferQuery, ProviderCapabilities } from "@skyward/core/contract";
import type { SshStandIn } from "../instances.js";
import type { MachineAdapter } from "./adapter.js";
import { SELF_DESTRUCT_COMMAND } from "./api-self-destruct.js";
import { type StandInSeam, selfDestructCommand, standInSeam } from "./machine-instance.js";

/** What {@link machineAdapterHalf} is given. */
export interface MachineAdapterHalfOptions<Address, Mapping extends SshStandIn> {
  /** The provider's name (`"verda"`): the key pair `<name>_ed25519`. */
  readonly name: string;
  readonly label: string;
  readonly settings: {
    readonly keysDirectory?: string | undefined;
    readonly retryDelayMs: number;
    /** The login user; default `root`. */
    readonly sshUser?: string | undefined;
    readonly sshAddress?: ((address: Address) => Mapping) | undefined;
  };
  /** The machine's address from its `Instance`, for the test seam. */
  readonly addressOf: (instance: Instance) => Address | undefined;
  /** Default: spot, marketplace offer cache, no network between machines. */
  readonly capabilities?: ProviderCapabilities;
  /** The prefix of cluster ids; default the provider's name. */
  readonly clusterIdPrefix?: string;
  /** With the default capabilities: how long a machine may take to start, s (an image pull's). */
  readonly provisionTimeout?: number;
}

/** The fields of an adapter {@link machineAdapterHalf} fills in. */
export type MachineAdapterHalfFields = Pick<
  MachineAdapter<{ readonly id: string | number }>,
  | "name"
  | "label"
  | "capabilities"
  | "clusterIdPrefix"
  | "sshUser"
  | "keyName"
  | "keysDirectory"
  | "idempotencyToken"
  | "bootWatchdog"
  | "deleteRetryDelayMs"
  | "idOf"
  | "selfDestruct"
  | "forget"
>;

/** The shared half; see the module comment. */
export interface MachineAdapterHalf<Address, Mapping extends SshStandIn> {
  readonly standIns: StandInSeam<Address, Mapping>;
  readonly fields: MachineAdapterHalfFields;
}

/** The one adapter half; see the module comment. */
export function machineAdapterHalf<Address, Mapping extends SshStandIn>(
  options: MachineAdapterHalfOptions<Address, Mapping>,
): MachineAdapterHalf<Address, Mapping> {
  const { name, settings } = options;
  const sshUser = settings.sshUser ?? "root";
  const standIns = standInSeam(settings.sshAddress, options.addressOf);
  return {
    standIns,
    fields: {
      name,
      label: options.label,
      capabilities:
        options.capabilities ??
        Object.freeze({
          spot: true,
          offerCache: "marketplace",
          peerNetwork: "none",
          ...(options.provisionTimeout !== undefined ? { provisionTimeout: options.provisionTimeout } : {}),
        }),
      clusterIdPrefix: options.clusterIdPrefix ?? name,
      sshUser,
      keyName: `${name}_ed25519`,
      keysDirectory: settings.keysDirectory,
      idempotencyToken: false,
      bootWatchdog: "boot-command",
      // A delete refused for now (a machine still provisioning) is tried again five retry delays apart.
      deleteRetryDelayMs: Math.max(1, settings.retryDelayMs) * 5,
      idOf: (machine) => String(machine.id),
      selfDestruct: (instance) =>
        standIns.selfDestruct(instance, selfDestructCommand(SELF_DESTRUCT_COMMAND, instance.id, sshUser)),
      forget: standIns.forget,
    },
  };
}

/** The on-demand and spot listings the query's allocation asks for (`none` for a market it does not). */
export async function marketListings<Listing>(
  query: Pick<OfferQuery, "allocation">,
  list: (spot: boolean) => Promise<Listing>,
  none: Listing,
): Promise<{ onDemand: Listing; spot: Listing }> {
  const [onDemand, spot] = await Promise.all([
    query.allocation !== "spot" ? list(false) : none,
    query.allocation !== "on-demand" ? list(true) : none,
  ]);
  return { onDemand, spot };
}

/**
 * The machine just created, read back; when that read fails (a list a moment behind the create), the
 * machine as it was asked for — never lost, since the API has it. An abort still throws.
 */
export async function readAfterCreate<Machine>(
  read: Promise<Machine>,
  asked: () => Machine,
  signal: AbortSignal,
): Promise<Machine> {
  try {
    return await read;
  } catch (error) {
    if (signal.aborted) throw error;
    return asked();
  }
}
