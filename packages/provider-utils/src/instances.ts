/** What providers whose nodes are reached over SSH share about the instances they report. */
import { NoCapacityError } from "@skyward/core";
import type { Cluster, Instance, InstanceSsh, InstanceStatus } from "@skyward/core/contract";
import { marketsFor } from "./offers/prices.js";
import { skywardTags } from "./tags.js";

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

/** What {@link provisionByMarket} is given. */
export interface ProvisionByMarketOptions {
  /** The cluster to provision: its spec's allocation and its offer choose the markets. */
  readonly cluster: Cluster<unknown>;
  /** How many instances are wanted. */
  readonly count: number;
  /** The provider's name, for the {@link NoCapacityError}. */
  readonly provider: string;
  readonly signal: AbortSignal;
  /** Creates one instance on the spot or on-demand market: its id, or why the market has no capacity. */
  create(spot: boolean): Promise<string | { noCapacity: string }>;
  /** The instance just created as the API shows it now; null while the API shows nothing yet. */
  describe(id: string): Promise<Instance | null>;
}

/**
 * Creates `count` instances one at a time on the markets the allocation asks for
 * ({@link marketsFor}), moving to the next market when one has no capacity. An instance the API does
 * not show yet is reported `pending` with the offer's price. A failure after some instances were made
 * ends with those (the pool asks again for the rest); with none made, it throws — and when every market
 * was out of capacity, a {@link NoCapacityError} naming each.
 */
export async function provisionByMarket(options: ProvisionByMarketOptions): Promise<Instance[]> {
  const { cluster, signal } = options;
  const markets = marketsFor(cluster.spec.allocation, cluster.offer);
  const created: Instance[] = [];
  const reasons: string[] = [];
  while (created.length < options.count && markets.length > 0) {
    const spot = markets[0] === "spot";
    let outcome: string | { noCapacity: string };
    try {
      outcome = await options.create(spot);
    } catch (error) {
      if (created.length > 0 && !signal.aborted) break;
      throw error;
    }
    if (typeof outcome !== "string") {
      reasons.push(`${spot ? "spot" : "on-demand"}: ${outcome.noCapacity}`);
      markets.shift();
      continue;
    }
    created.push(
      (await options.describe(outcome)) ??
        Object.freeze({
          id: outcome,
          status: "pending" as const,
          publicIp: null,
          privateIp: null,
          ssh: null,
          spot,
          hourlyPrice: spot ? cluster.offer.spotPrice : cluster.offer.onDemandPrice,
          offerId: cluster.offer.id,
          createdAt: Date.now(),
          tags: Object.freeze(skywardTags({ cluster: cluster.id, pool: cluster.poolId, spot })),
        }),
    );
  }
  if (created.length === 0) {
    throw new NoCapacityError({
      attempts: reasons.map((reason) => ({
        provider: options.provider,
        offer: cluster.offer.instanceType,
        reason,
      })),
    });
  }
  return created;
}
