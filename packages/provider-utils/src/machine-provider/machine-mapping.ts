/**
 * How an API's machine maps onto Skyward's, written as data: the table of its status words (from its
 * `status` field), where its name, tags, SSH address, market, price and creation date are. The adapter's
 * `describe`, tag codec and "already being deleted" test are made from it once, instead of each
 * provider writing the `describeMachine` call, the codec and the status checks again.
 */
import type { Instance, InstanceStatus } from "@skyward/core/contract";
import type { SshStandIn } from "../instances.js";
import { SKYWARD_TAGS } from "../tags.js";
import type { MachineAdapter, MachineDescribeContext, MachineTagCodec } from "./adapter.js";
import { describeMachine, type StandInSeam, statusTable } from "./machine-instance.js";

/** Where SSH listens on a machine. */
export interface MachineEndpointAddress {
  readonly host: string;
  readonly port: number;
}

/** What {@link mappedMachine} reads of a machine. */
export interface MachineMapping<Machine, Address> {
  /** The API's status words per Skyward status (compared without case); a word not listed is `pending`. */
  readonly statuses: Partial<Readonly<Record<InstanceStatus, readonly string[]>>>;
  /** The status words of a machine the API is already deleting: teardown leaves it be. */
  readonly deleting: readonly string[];
  /** The machine's unique name, as the API shows it; it is also reported as the tag `nameTag`. */
  readonly name: (machine: Machine) => string | null | undefined;
  readonly nameTag: string;
  /** Skyward's tags the machine carries (a description, its environment). */
  readonly tags: (machine: Machine) => Readonly<Record<string, string>>;
  /** Where SSH listens, once the API says. */
  readonly address: (machine: Machine) => MachineEndpointAddress | undefined;
  /** What the `sshAddress` test seam is given for machine `id` at `address`. */
  readonly seamAddress: (id: string, address: MachineEndpointAddress) => Address;
  /** Whether it runs on the spot market; `tags` are those it carries. */
  readonly spot: (machine: Machine, tags: Readonly<Record<string, string>>) => boolean;
  /** Its hourly price, USD, when the API says. */
  readonly hourlyPrice: (machine: Machine) => number | null | undefined;
  readonly createdAt: (machine: Machine) => string | null | undefined;
}

/** What {@link mappedMachine} makes of a mapping. */
export interface MappedMachine<Machine> extends Pick<MachineAdapter<Machine>, "isBeingDeleted"> {
  /** A status word of the API as Skyward's. */
  readonly statusOf: (status: string) => InstanceStatus;
  /** The clusters (`skyward:cluster` tags) of the machines that are not terminated. */
  readonly liveClusters: (machines: readonly Machine[]) => Set<string>;
  /** Names `<cluster id>-<index>`; tags as the mapping reads them, with the name under `nameTag`. */
  readonly tags: MachineTagCodec<Machine>;
  /** The machine as Skyward sees it, reached as `user` (default root) or at the seam's stand-in. */
  describe(machine: Machine, context: Pick<MachineDescribeContext<never>, "identityFile">): Instance;
}

/** The adapter's view of its machines from `mapping`; see the module comment. */
export function mappedMachine<Machine extends { readonly id: string; readonly status: string }, Address>(
  standIns: StandInSeam<Address, SshStandIn>,
  mapping: MachineMapping<Machine, Address> & { readonly user?: string },
): MappedMachine<Machine> {
  const user = mapping.user ?? "root";
  const statusOf = statusTable(mapping.statuses);
  const deleting = new Set(mapping.deleting.map((word) => word.toLowerCase()));
  const tagsOf = (machine: Machine): Record<string, string> => {
    const name = mapping.name(machine);
    return { ...mapping.tags(machine), ...(name ? { [mapping.nameTag]: name } : {}) };
  };
  return {
    statusOf,
    liveClusters: (machines) =>
      new Set(
        machines
          .filter((machine) => statusOf(machine.status) !== "terminated")
          .flatMap((machine) => mapping.tags(machine)[SKYWARD_TAGS.cluster] ?? []),
      ),
    isBeingDeleted: (machine) => deleting.has(machine.status.toLowerCase()),
    tags: {
      name: (cluster, index) => `${cluster.id}-${index}`,
      nameOf: (machine) => mapping.name(machine) || undefined,
      read: tagsOf,
    },
    describe(machine, { identityFile }) {
      const tags = tagsOf(machine);
      const address = mapping.address(machine);
      const seam = address && mapping.seamAddress(machine.id, address);
      return describeMachine({
        id: machine.id,
        status: statusOf(machine.status),
        address: address ? { ...address, user } : null,
        identityFile,
        standIn: standIns.of(machine.id, seam),
        spot: mapping.spot(machine, tags),
        hourlyPrice: mapping.hourlyPrice(machine) ?? null,
        tags,
        createdAt: mapping.createdAt(machine),
      });
    },
  };
}
