/**
 * How an API's machine maps onto Skyward's, written as data: the table of its status words (from its
 * `status` field), where its name, tags, SSH address, market, price and creation date are. The adapter's
 * `describe`, tag codec and "already being deleted" test are made from it once, instead of each
 * provider writing the `describeMachine` call, the codec and the status checks again.
 */
import type { Instance, InstanceStatus } from "@skyward/core/contract";
import type { SshStandIn } from "../instances.js";
import { hourlyPriceFromTags, SKYWARD_TAGS } from "../tags.js";
import type { MachineAdapter, MachineDescribeContext, MachineTagCodec } from "./adapter.js";
import { describeMachine, type StandInSeam, statusTable } from "./machine-instance.js";

/** Where SSH listens on a machine. */
export interface MachineEndpointAddress {
  readonly host: string;
  readonly port: number;
}

/** What {@link mappedMachine} reads of a machine; `Mapping` is what the `sshAddress` test seam returns. */
export interface MachineMapping<Machine, Address, Mapping extends SshStandIn = SshStandIn> {
  /** The API's status words per Skyward status (compared without case); a word not listed is `pending`. */
  readonly statuses: Partial<Readonly<Record<InstanceStatus, readonly string[]>>>;
  /** The machine's status word; default its `status` field. */
  readonly statusWord?: (machine: Machine) => string | null | undefined;
  /** The status, for an API whose status word alone does not say it; given the word's. Default the word's. */
  readonly status?: (machine: Machine, byWord: InstanceStatus) => InstanceStatus;
  /** The status words of a machine the API is already deleting: teardown leaves it be. Default none. */
  readonly deleting?: readonly string[];
  /** The machine's unique name, as the API shows it (default its `name` field); also the tag `nameTag`, when given. */
  readonly name?: (machine: Machine) => string | null | undefined;
  readonly nameTag?: string;
  /** Skyward's tags the machine carries (a description, its environment). */
  readonly tags: (machine: Machine) => Readonly<Record<string, string>>;
  /** Where SSH listens, once the API says. */
  readonly address: (machine: Machine) => MachineEndpointAddress | undefined;
  /** What the `sshAddress` test seam is given for machine `id` at `address`. */
  readonly seamAddress: (id: string, address: MachineEndpointAddress, machine: Machine) => Address;
  /** Whether it runs on the spot market; `tags` are those it carries. Default: its `skyward:spot` tag is `1`. */
  readonly spot?: (machine: Machine, tags: Readonly<Record<string, string>>) => boolean;
  /** Its hourly price, USD, when the API (or a tag, `tags` being those it carries) says. Default: its price tag's. */
  readonly hourlyPrice?: (
    machine: Machine,
    tags: Readonly<Record<string, string>>,
  ) => number | null | undefined;
  /** When it was created (an ISO date or ms); default now. */
  readonly createdAt?: (machine: Machine) => string | number | null | undefined;
  /** Its public address, given its status; default the SSH address's host. */
  readonly publicIp?: (machine: Machine, status: InstanceStatus) => string | null;
  /** Its private address, given the seam's stand-in and the public address; default the stand-in's host, else the public address. */
  readonly privateIp?: (
    machine: Machine,
    standIn: Mapping | undefined,
    publicIp: string | null,
  ) => string | null;
  /** The login user; default root. */
  readonly user?: string;
  /** Skyward's directory on the machine, when set (`{id}` in it becomes the machine's id). */
  readonly root?: string | undefined;
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

/** A machine as {@link mappedMachine} takes it: an id (a number is reported as text) and, unless the mapping says where they are, its status word and name. */
export interface MappableMachine {
  readonly id: string | number;
  readonly status?: string | null | undefined;
  readonly name?: string | null | undefined;
}

/** The adapter's view of its machines from `mapping`; see the module comment. */
export function mappedMachine<
  Machine extends MappableMachine,
  Address,
  Mapping extends SshStandIn = SshStandIn,
>(
  standIns: StandInSeam<Address, Mapping>,
  mapping: MachineMapping<Machine, Address, Mapping>,
): MappedMachine<Machine> {
  const statusOf = statusTable(mapping.statuses);
  const wordOf = (machine: Machine) =>
    (mapping.statusWord ? mapping.statusWord(machine) : machine.status) ?? "";
  const statusOfMachine = (machine: Machine) => {
    const byWord = statusOf(wordOf(machine));
    return mapping.status ? mapping.status(machine, byWord) : byWord;
  };
  const deleting = new Set((mapping.deleting ?? []).map((word) => word.toLowerCase()));
  const nameOf = mapping.name ?? ((machine: Machine) => machine.name);
  const tagsOf = (machine: Machine): Record<string, string> => {
    const name = nameOf(machine);
    const named = name && mapping.nameTag ? { [mapping.nameTag]: name } : {};
    return { ...mapping.tags(machine), ...named };
  };
  return {
    statusOf,
    liveClusters: (machines) =>
      new Set(
        machines
          .filter((machine) => statusOfMachine(machine) !== "terminated")
          .flatMap((machine) => mapping.tags(machine)[SKYWARD_TAGS.cluster] ?? []),
      ),
    isBeingDeleted: (machine) => deleting.has(wordOf(machine).toLowerCase()),
    tags: {
      name: (cluster, index) => `${cluster.id}-${index}`,
      nameOf: (machine) => nameOf(machine) || undefined,
      read: tagsOf,
    },
    describe(machine, { identityFile }) {
      const id = String(machine.id);
      const tags = tagsOf(machine);
      const status = statusOfMachine(machine);
      const address = mapping.address(machine);
      const standIn = standIns.of(id, address && mapping.seamAddress(id, address, machine));
      const publicIp = mapping.publicIp ? mapping.publicIp(machine, status) : (address?.host ?? null);
      return describeMachine({
        id,
        status,
        address: address ? { ...address, user: mapping.user ?? "root" } : null,
        identityFile,
        root: mapping.root,
        standIn,
        ...(mapping.publicIp ? { publicIp } : {}),
        ...(mapping.privateIp ? { privateIp: mapping.privateIp(machine, standIn, publicIp) } : {}),
        spot: mapping.spot ? mapping.spot(machine, tags) : tags[SKYWARD_TAGS.spot] === "1",
        hourlyPrice:
          (mapping.hourlyPrice ?? ((_, tagged) => hourlyPriceFromTags(tagged)))(machine, tags) ?? null,
        tags,
        createdAt: mapping.createdAt?.(machine),
      });
    },
  };
}
