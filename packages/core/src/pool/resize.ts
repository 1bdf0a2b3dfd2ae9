/**
 * `pool.resize`: a new target (and bounds) for the node set, and the wait until the pool has it.
 */
import type { Provider } from "../contract/provider.js";
import { CancelledError, ConfigurationError } from "../errors/errors.js";
import { type Nodes, type NodesInput, nodes as resolveNodes } from "../spec/nodes.js";
import { checkAbortSignal } from "./abort-signal.js";
import type { Membership } from "./membership.js";
import { abortError, type PoolContext } from "./pool-context.js";

/**
 * Refuses a node count a provider cannot hold (`capabilities.maxInstances`: a fixed set of SSH hosts)
 * before any machine starts, rather than failing to grow to it later.
 */
export function checkNodeCeiling(provider: Provider | undefined, nodes: Nodes, path: string): void {
  const limit = provider?.capabilities.maxInstances;
  if (limit === undefined || nodes.max <= limit) return;
  throw new ConfigurationError({
    issues: [
      {
        path,
        message: `expected at most ${limit} node${limit === 1 ? "" : "s"}: the ${provider?.name} provider holds no more, received ${nodes.max}`,
      },
    ],
  });
}

/** The topology a `resize` target means, given the pool's bounds now. */
function resizeTopology(target: number | NodesInput | Nodes, bounds: { min: number; max: number }): Nodes {
  if (typeof target !== "number") {
    if (typeof target !== "object" || target === null) {
      throw new ConfigurationError({
        issues: [
          {
            path: "nodes",
            message: `expected a node count (a whole number) or sky.nodes({ desired, min, max }), received ${JSON.stringify(target) ?? String(target)}`,
          },
        ],
      });
    }
    return resolveNodes(target as NodesInput);
  }
  const { min, max } = bounds;
  const fixed = min === max;
  const lowest = fixed ? 1 : min;
  const highest = fixed ? Number.POSITIVE_INFINITY : max;
  if (!Number.isInteger(target) || target < lowest || target > highest) {
    throw new ConfigurationError({
      issues: [
        {
          path: "nodes",
          message: fixed
            ? `expected a node count as a whole number >= 1, received ${String(target)}`
            : `expected a node count from ${min} to ${max} (the pool's bounds; to change them, pass sky.nodes({ desired, min, max })), received ${String(target)}`,
        },
      ],
    });
  }
  return fixed ? { desired: target, min: target, max: target } : { desired: target, min, max };
}

/** Sets the pool's target and bounds; resolves once it has exactly that many ready nodes. */
export async function resizePool(
  context: PoolContext,
  membership: Membership,
  target: number | NodesInput | Nodes,
  signal: AbortSignal | undefined,
): Promise<void> {
  checkAbortSignal(signal);
  if (signal?.aborted) throw abortError(signal, "resize");
  const topology = resizeTopology(target, membership.bounds);
  if (context.growthRefusal !== undefined && topology.max > membership.bounds.max) {
    throw new ConfigurationError({ issues: [{ path: "nodes", message: context.growthRefusal }] });
  }
  checkNodeCeiling(context.provider, topology, "nodes.max");
  membership.bounds = { min: topology.min, max: topology.max };
  membership.setExplicitTarget(topology.desired);
  const desired = membership.desired;
  await new Promise<void>((resolve, reject) => {
    const waiter = {
      check: () => {
        const ready = context.tasks.liveNodes;
        const settled =
          ready === desired && membership.actualNodes() === desired && membership.retiring === 0;
        if (settled || membership.desired !== desired || context.state !== "ready") done();
      },
      fail: (error: Error) => done(error),
    };
    const onAbort = () => done(abortError(signal as AbortSignal, "resize"));
    const done = (error?: Error) => {
      stopWaiting();
      signal?.removeEventListener("abort", onAbort);
      if (error) reject(error);
      else if (context.state !== "ready")
        reject(
          new CancelledError({ message: `The pool is ${context.state.replace("_", " ")}; resize stopped` }),
        );
      else resolve();
    };
    const stopWaiting = membership.addSizeWaiter(waiter);
    signal?.addEventListener("abort", onAbort, { once: true });
    membership.poke();
  });
}
