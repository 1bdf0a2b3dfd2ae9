/**
 * The adapter half of a container marketplace (RunPod, Vast.ai, Novita): an image pulled before the
 * container starts (a long provisioning wait), spot and an hour's offer cache, containers without
 * FUSE, and machines described through {@link mappedMachine}, reached at their own address (or,
 * where the mapping gives `seamAddress`, at the `sshAddress` test seam's stand-in).
 */
import type { ProviderCapabilities } from "@skyward/core/contract";
import type { SshStandIn } from "../instances.js";
import { IMAGE_PULL_PROVISION_TIMEOUT_SECONDS } from "./image-pull.js";
import { type MachineMapping, type MappableMachine, mappedMachine } from "./machine-mapping.js";
import { type MachineAdapterHalfOptions, machineAdapterHalf } from "./marketplace-machine.js";

/** A marketplace of containers whose images are pulled before they start; `peerNetwork` as the provider's. */
export function imagePullCapabilities(
  peerNetwork: ProviderCapabilities["peerNetwork"],
): ProviderCapabilities {
  return Object.freeze({
    spot: true,
    offerCache: "marketplace",
    peerNetwork,
    provisionTimeout: IMAGE_PULL_PROVISION_TIMEOUT_SECONDS,
  });
}

/** What {@link containerMarketplace} is given. */
export interface ContainerMarketplaceOptions<Machine, Address = undefined>
  extends Pick<
    MachineAdapterHalfOptions<Address, SshStandIn>,
    "name" | "label" | "clusterIdPrefix" | "settings"
  > {
  readonly peerNetwork: ProviderCapabilities["peerNetwork"];
  /** What the containers are called (`"pods"`), in the refusal of the spec's volumes. */
  readonly containers: string;
  /** Without `seamAddress`, no test seam: the `sshAddress` setting is never asked. */
  readonly mapping: Omit<MachineMapping<Machine, Address>, "seamAddress"> &
    Partial<Pick<MachineMapping<Machine, Address>, "seamAddress">>;
}

/** The half; see the module comment. */
export function containerMarketplace<Machine extends MappableMachine, Address = undefined>(
  options: ContainerMarketplaceOptions<Machine, Address>,
) {
  const { mapping, peerNetwork, containers, ...half } = options;
  const capabilities = imagePullCapabilities(peerNetwork);
  const { fields, standIns } = machineAdapterHalf({ ...half, capabilities, addressOf: () => undefined });
  const seamAddress = mapping.seamAddress ?? (() => undefined as Address);
  const machine = mappedMachine(standIns, { ...mapping, seamAddress });
  return { ...fields, containersWithoutFuse: containers, ...machine };
}
