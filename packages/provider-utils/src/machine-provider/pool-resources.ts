/**
 * What a pool registers at an API beside its machines (an SSH key, a startup script), named after the
 * pool — `<cluster id>_<pool id>` — so that `skyward cleanup` finds what a dead client left: each kind
 * is declared once (its list and its delete), and cleanup removes those of pools without a live
 * machine and reports the others as left. A resource the API no longer knows counts as removed.
 */
import type { CleanupOptions, CleanupResult, LeftPoolResource, PoolResource } from "@skyward/core/contract";
import type { machineEndpoints } from "./endpoints.js";
import { machineErrorKind } from "./errors.js";

/** One kind of registered resource; `list` and `remove` take the input of an endpoint ({@link machineEndpoints}). */
export interface PoolResourceKind {
  /** What it is, in results and messages (`"SSH key"`). */
  readonly kind: string;
  /** Every resource of the kind, with its name. */
  list(input: Readonly<Record<string, never>>, signal: AbortSignal): Promise<readonly NamedResource[]>;
  /** Deletes one by id; resolves when done, throws its API error otherwise. */
  remove(input: { readonly id: string }, signal: AbortSignal): Promise<unknown>;
}

/** A registered resource as its list shows it. */
export interface NamedResource {
  readonly id: string;
  readonly name: string;
}

/** What {@link namedPoolResources} is given. */
export interface NamedPoolResourcesOptions<Kind extends string> {
  /** The cluster id prefix of the provider (`"verda"` for `verda-1a2b3c4d`). */
  readonly prefix: string;
  readonly kinds: Readonly<Record<Kind, PoolResourceKind>>;
  /** The cluster ids that still have a machine that is not terminated. */
  readonly liveClusters: (signal: AbortSignal) => Promise<ReadonlySet<string>>;
}

/** The resources of {@link namedPoolResources}. */
export interface NamedPoolResources<Kind extends string> {
  /** The name of a pool's resources: `<cluster id>_<pool id>`, or the cluster id without a pool. */
  name(clusterId: string, poolId: string): string;
  /** Deletes resource `id` of `kind` unless it is already gone (`teardown`). */
  remove(kind: Kind, id: string | undefined, signal: AbortSignal): Promise<void>;
  /** The provider's `cleanup`: the resources of the pools asked that have no live machine. */
  cleanup(options: CleanupOptions): Promise<CleanupResult>;
}

/** Registered resources named after their pool; see the module comment. */
export function namedPoolResources<Kind extends string>(
  options: NamedPoolResourcesOptions<Kind>,
): NamedPoolResources<Kind> {
  const pattern = new RegExp(`^(${options.prefix}-[0-9a-f]{8})(?:_(\\S+))?$`);
  const kinds = Object.entries(options.kinds) as [Kind, PoolResourceKind][];
  async function remove(kind: Kind, id: string | undefined, signal: AbortSignal) {
    try {
      if (id) await options.kinds[kind].remove({ id }, signal);
    } catch (error) {
      if (machineErrorKind(error) !== "gone") throw error;
    }
  }
  return {
    name: (clusterId, poolId) => (poolId ? `${clusterId}_${poolId}` : clusterId),
    remove,
    async cleanup({ pools, signal }) {
      const [live, ...listed] = await Promise.all([
        options.liveClusters(signal),
        ...kinds.map(([key, kind]) =>
          kind.list({}, signal).then((all) => all.map((one) => ({ ...one, key }))),
        ),
      ]);
      const removed: PoolResource[] = [];
      const left: LeftPoolResource[] = [];
      for (const { key, id, name } of listed.flat()) {
        const [, cluster, pool] = pattern.exec(name) ?? [];
        const poolId = pool || cluster;
        if (!cluster || !poolId || (pools !== "all" && !pools.includes(poolId))) continue;
        const kind = options.kinds[key].kind;
        if (live.has(cluster))
          left.push({ poolId, kind, id: name, reason: `pool ${poolId} still has instances` });
        else {
          await remove(key, id, signal);
          removed.push({ poolId, kind, id: name });
        }
      }
      return { removed, left };
    },
  };
}
