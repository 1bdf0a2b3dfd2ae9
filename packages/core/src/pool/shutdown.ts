/**
 * Letting go of the nodes at shutdown: their workers released, their endpoints closed, and (unless
 * the pool was detached) their instances terminated and the provider's resources torn down.
 */
import { type NodeRuntime, type PoolContext, placement } from "./pool-context.js";

/** Closes the connections at once, sending nothing: a detached pool's workers must see no `cancel`. */
export async function dropConnections(context: PoolContext): Promise<void> {
  await Promise.all(
    context.nodes.map(async (node) => {
      const connection = node.connection;
      node.connection = undefined;
      await connection?.close({ timeoutMs: 5000 });
    }),
  );
}

/** Releases every worker still connected (they stop after `ttl`), then closes the endpoints. */
export async function releaseWorkers(context: PoolContext): Promise<void> {
  await Promise.all(
    context.nodes.map(async (node) => {
      const connection = node.connection;
      node.connection = undefined;
      if (!connection?.isOpen) return;
      connection.sendIfOpen({ t: "release", ttl: context.spec.ttl });
      await connection.close({ timeoutMs: 5000 });
    }),
  );
  await Promise.all(
    context.nodes.map(async (node) => {
      const endpoint = node.endpoint;
      node.endpoint = undefined;
      endpoint?.close?.();
    }),
  );
}

/** Terminates the nodes' instances and tears the provider's resources down, reporting failures. */
export async function terminateNodes(
  context: PoolContext,
  report: (what: string, error: unknown) => void,
): Promise<void> {
  const { provider, cluster } = context;
  if (!provider || !cluster) return;
  const deadline = AbortSignal.timeout(context.options.shutdownTimeout * 1000);
  try {
    // Replacements asked for after an interruption notice and not started yet go too.
    const asked = await Promise.all(
      context.nodes.map((node) => node.nextInstance?.then((instance) => instance.id).catch(() => undefined)),
    );
    const replacements = asked.filter((id): id is string => id !== undefined);
    await terminateInstancesOf(context, context.nodes, replacements, deadline);
  } catch (error) {
    report("terminating the instances failed", error);
  }
  try {
    await provider.teardown({ cluster, signal: deadline });
  } catch (error) {
    report("tearing down the provider's resources failed", error);
  }
}

/**
 * How a failure while the pool shuts down is told: an `error` event, even though the pool is
 * closing (`reportError` of pool-context.ts keeps quiet then).
 */
export function shutdownReporter(context: PoolContext): (what: string, error: unknown) => void {
  return (what, error) =>
    context.hub.emit({
      type: "error",
      timestamp: Date.now(),
      poolId: context.id,
      message: `${what}: ${(error as Error)?.message ?? String(error)}`,
      cause: error,
    });
}

/**
 * Terminates `nodes`' instances and the `replacements` asked for them (created at the provider,
 * billed since then, and no node's yet), then says so: the replacements stop costing, and each
 * node's `node.destroyed` event. What the provider's `terminate` throws is thrown, nothing said.
 */
export async function terminateInstancesOf(
  context: PoolContext,
  nodes: readonly NodeRuntime[],
  replacements: readonly string[],
  signal: AbortSignal,
): Promise<void> {
  const { provider, cluster } = placement(context);
  await provider.terminate({
    cluster,
    ids: [...nodes.map((node) => node.instance.id), ...replacements],
    signal,
  });
  context.billing?.terminated(replacements);
  for (const node of nodes) {
    context.hub.emit({
      type: "node.destroyed",
      timestamp: Date.now(),
      poolId: context.id,
      node: node.index,
      instanceId: node.instance.id,
    });
  }
}
