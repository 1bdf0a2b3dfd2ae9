/**
 * How a machine of the base looks to Skyward, written once: a provider's status table, Skyward's tags
 * as `key=value` words (labels, a description), the `Instance` it describes, the `sshAddress` test seam
 * that puts a stand-in SSH host in a machine's place, and the command that deletes the machine from
 * inside it. The adapters give only what their API calls each thing.
 */
import { type Instance, type InstanceStatus, shellQuote } from "@skyward/core/contract";
import { instanceSsh, type SshStandIn, sshReachableStatus } from "../instances.js";
import { SKYWARD_TAGS } from "../tags.js";

/**
 * A provider's statuses as Skyward's, from a table of the API's words (compared without case); a word
 * the table lacks is `otherwise` (`pending`: a machine on its way).
 */
export function statusTable(
  table: Partial<Readonly<Record<InstanceStatus, readonly string[]>>>,
  otherwise: InstanceStatus = "pending",
): (status: string) => InstanceStatus {
  const byWord = new Map<string, InstanceStatus>();
  for (const [status, words] of Object.entries(table) as [InstanceStatus, readonly string[]][])
    for (const word of words) byWord.set(word.toLowerCase(), status);
  return (status) => byWord.get(status.toLowerCase()) ?? otherwise;
}

/** Skyward's tags as `key=value` words (`skyward:cluster=skyward-1a2b3c4d`). */
export function tagsToWords(tags: Readonly<Record<string, string>>): string[] {
  return Object.entries(tags).map(([key, value]) => `${key}=${value}`);
}

/** Skyward's tags read back from `key=value` words; words of others are left out. */
export function tagsFromWords(words: Iterable<string>): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const word of words) {
    const at = word.indexOf("=");
    if (at > 0 && word.startsWith("skyward:")) tags[word.slice(0, at)] = word.slice(at + 1);
  }
  return tags;
}

/** What {@link describeMachine} makes an `Instance` of. */
export interface MachineFacts {
  readonly id: string;
  readonly status: InstanceStatus;
  /** Where SSH listens on the machine, when the API says; the machine is `running` only with one. */
  readonly address: { readonly host: string; readonly port: number; readonly user: string } | null;
  readonly identityFile: string | undefined;
  /** Skyward's directory on the machine, when set (`{id}` in it becomes the machine's id). */
  readonly root?: string | undefined;
  /** The test seam's stand-in host, when one is set. */
  readonly standIn?: SshStandIn | undefined;
  /** Default the address's host. */
  readonly publicIp?: string | null;
  /** Default the stand-in's host, else the public address: machines without a shared private network. */
  readonly privateIp?: string | null;
  readonly spot: boolean;
  readonly hourlyPrice: number | null;
  readonly tags: Readonly<Record<string, string>>;
  /** When the API says it was created (an ISO date or ms); default now. */
  readonly createdAt?: string | number | null | undefined;
}

/** The machine as Skyward sees it: SSH coordinates once running, the offer from its tags. */
export function describeMachine(facts: MachineFacts): Instance {
  const reached =
    facts.status === "running" && facts.address
      ? instanceSsh(facts.address, facts.identityFile, facts.standIn)
      : null;
  const ssh =
    reached && reached.root === undefined && facts.root !== undefined
      ? Object.freeze({ ...reached, root: facts.root.replaceAll("{id}", facts.id) })
      : reached;
  const created = typeof facts.createdAt === "number" ? facts.createdAt : Date.parse(facts.createdAt ?? "");
  const publicIp = facts.publicIp !== undefined ? facts.publicIp : (facts.address?.host ?? null);
  return Object.freeze({
    id: facts.id,
    status: sshReachableStatus(facts.status, ssh),
    publicIp,
    privateIp: facts.privateIp !== undefined ? facts.privateIp : (ssh?.host ?? publicIp),
    ssh,
    spot: facts.spot,
    hourlyPrice: facts.hourlyPrice,
    offerId: facts.tags[SKYWARD_TAGS.offer] ?? "",
    createdAt: Number.isFinite(created) ? created : Date.now(),
    tags: Object.freeze({ ...facts.tags }),
  });
}

/**
 * The `sshAddress` test seam of a provider: asked once per machine (by id) where a stand-in host
 * replaces it, and what runs instead of its self-destruct — a stand-in host must never be deleted.
 */
export interface StandInSeam<Address, Mapping extends SshStandIn> {
  /** The stand-in of machine `id` at `address`; undefined without a seam or an address. */
  of(id: string, address: Address | undefined): Mapping | undefined;
  /** Forgets a deleted machine. */
  forget(id: string): void;
  /** The stand-in's self-destruct (default `true`: nothing) for a machine with one, else `command`. */
  selfDestruct(instance: Instance, command: string): string;
}

/**
 * The seam of `sshAddress`; `addressOf` rebuilds a machine's address from its `Instance`, for a
 * provider object that never described the machine (a detached pool attached again).
 */
export function standInSeam<Address, Mapping extends SshStandIn>(
  sshAddress: ((address: Address) => Mapping) | undefined,
  addressOf: (instance: Instance) => Address | undefined,
): StandInSeam<Address, Mapping> {
  const byId = new Map<string, Mapping>();
  const of = (id: string, address: Address | undefined) => {
    if (!sshAddress || address === undefined) return undefined;
    const mapping = byId.get(id) ?? sshAddress(address);
    byId.set(id, mapping);
    return mapping;
  };
  return {
    of,
    forget: (id) => void byId.delete(id),
    selfDestruct(instance, command) {
      const mapping = byId.get(instance.id) ?? of(instance.id, addressOf(instance));
      return mapping ? (mapping.selfDestruct ?? "true") : command;
    },
  };
}

/** `command <id>`, through `sudo -n` unless the login user is root: the machine deleting itself. */
export function selfDestructCommand(command: string, id: string, sshUser: string): string {
  const line = `${command} ${shellQuote(id)}`;
  return sshUser === "root" ? line : `sudo -n ${line}`;
}
