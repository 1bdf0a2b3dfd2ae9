/** What providers whose nodes are reached over SSH share about the instances they report. */
import type { InstanceSsh, InstanceStatus } from "@skyward/core/contract";

/**
 * The status to report for an instance reached over SSH: `running` only once it has its SSH
 * coordinates (the pool starts the worker as soon as it sees `running`), else `pending`; other
 * statuses as they are.
 */
export function sshReachableStatus(status: InstanceStatus, ssh: InstanceSsh | null): InstanceStatus {
  return status === "running" && ssh === null ? "pending" : status;
}

/**
 * Where a provider's `sshAddress` test seam says an instance is reached instead of its own address: a
 * real SSH host (a test bed's) standing in for it, so the provider driven against a fake of its API
 * runs a real pool. Never set against the real API.
 */
export interface SshStandIn {
  /** Host name or address to connect to. */
  readonly host: string;
  /** The SSH port. */
  readonly port: number;
  /** The login user; default the provider's. */
  readonly user?: string;
  /** The private key to log in with; default the provider's key pair. A secret: never logged. */
  readonly privateKey?: string;
  /** The stand-in host's Skyward root directory; default the provider's (`/opt/skyward` unless set). */
  readonly root?: string;
  /** The stand-in host's key fingerprint (`SHA256:…`); default trust on first use. */
  readonly hostKeyFingerprint?: string;
  /** The self-destruct command for a worker on the stand-in host (never the instance's own). Default `true`: nothing. */
  readonly selfDestruct?: string;
}

/**
 * The `sshAddress` test seam of a provider, asked once per instance: the stand-in it gave for an
 * instance id is kept, so an instance keeps its host however often it is looked up. Undefined for
 * every instance when no seam is set.
 */
export function rememberedStandIns<Addresses extends { readonly id: string }, Mapping>(
  seam: ((addresses: Addresses) => Mapping) | undefined,
): (addresses: Addresses) => Mapping | undefined {
  const mappings = new Map<string, Mapping>();
  return (addresses) => {
    if (!seam) return undefined;
    let mapping = mappings.get(addresses.id);
    if (mapping === undefined) {
      mapping = seam(addresses);
      mappings.set(addresses.id, mapping);
    }
    return mapping;
  };
}

/**
 * An instance's SSH coordinates: its own `address` (host, port, user) and the provider's key
 * (`identityFile`), each field replaced by the stand-in's where a test seam gives one.
 */
export function instanceSsh(
  address: { readonly host: string; readonly port: number; readonly user: string },
  identityFile: string | undefined,
  standIn: SshStandIn | undefined,
): InstanceSsh {
  return Object.freeze({
    host: standIn?.host ?? address.host,
    port: standIn?.port ?? address.port,
    user: standIn?.user ?? address.user,
    ...(standIn?.privateKey !== undefined
      ? { privateKey: standIn.privateKey }
      : identityFile !== undefined
        ? { identityFile }
        : {}),
    ...(standIn?.hostKeyFingerprint !== undefined ? { hostKeyFingerprint: standIn.hostKeyFingerprint } : {}),
    ...(standIn?.root !== undefined ? { root: standIn.root } : {}),
  });
}
