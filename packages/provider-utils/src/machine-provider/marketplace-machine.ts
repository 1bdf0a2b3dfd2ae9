/**
 * What the adapters of marketplace APIs whose machines log in as root and delete themselves through
 * the API (Verda's VMs, Novita's containers) write alike, written once: their fixed fields (no
 * idempotency token, so a lost create is found by name; a boot command arming the watchdog; no
 * network between machines), the `sshAddress` test seam with the self-destruct a worker runs, the
 * on-demand and spot listings an offer query asks for, and the read right after a create that never
 * loses the machine asked for.
 */
import type { Instance, OfferQuery } from "@skyward/core/contract";
import type { SshStandIn } from "../instances.js";
import type { MachineAdapter } from "./adapter.js";
import { SELF_DESTRUCT_COMMAND } from "./api-self-destruct.js";
import { type StandInSeam, selfDestructCommand, standInSeam } from "./machine-instance.js";

/** What {@link marketplaceMachine} is given. */
export interface MarketplaceMachineOptions<Address, Mapping extends SshStandIn> {
  /** The provider's name (`"verda"`): the cluster id prefix, and the key pair `<name>_ed25519`. */
  readonly name: string;
  readonly label: string;
  readonly settings: {
    readonly keysDirectory?: string | undefined;
    readonly retryDelayMs: number;
    readonly sshAddress?: ((address: Address) => Mapping) | undefined;
  };
  /** The machine's address from its `Instance`, for the test seam. */
  readonly addressOf: (instance: Instance) => Address | undefined;
}

/** The fields of an adapter {@link marketplaceMachine} fills in. */
export type MarketplaceMachineFields = Pick<
  MachineAdapter<{ readonly id: string }>,
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
>;

/** The shared half of a marketplace adapter; see the module comment. */
export function marketplaceMachine<Address, Mapping extends SshStandIn>(
  options: MarketplaceMachineOptions<Address, Mapping>,
): { readonly standIns: StandInSeam<Address, Mapping>; readonly fields: MarketplaceMachineFields } {
  const { name, settings } = options;
  const standIns = standInSeam(settings.sshAddress, options.addressOf);
  return {
    standIns,
    fields: {
      name,
      label: options.label,
      capabilities: Object.freeze({ spot: true, offerCache: "marketplace", peerNetwork: "none" }),
      clusterIdPrefix: name,
      sshUser: "root",
      keyName: `${name}_ed25519`,
      keysDirectory: settings.keysDirectory,
      idempotencyToken: false,
      bootWatchdog: "boot-command",
      // A delete refused for now (a machine still provisioning) is tried again five retry delays apart.
      deleteRetryDelayMs: settings.retryDelayMs * 5,
      idOf: (machine) => machine.id,
      selfDestruct: (instance) =>
        standIns.selfDestruct(instance, selfDestructCommand(SELF_DESTRUCT_COMMAND, instance.id, "root")),
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
