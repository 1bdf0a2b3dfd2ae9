/**
 * Loss detection through the provider: the instances of a pool's connected nodes are read with
 * `getInstance` once per tick of the pool's reconcile loop, and a node whose instance is gone,
 * terminated or stopping (a spot reclaim, someone terminating it in the console) is reported lost —
 * even while its connection still looks open, as it may for a while after a host disappears.
 */
import type { Instance } from "../contract/provider.js";

/** A node as the watch sees it. */
export interface WatchedNode {
  readonly index: number;
  readonly instanceId: string;
}

/** Options of {@link checkInstances}. */
export interface InstanceCheckOptions {
  /** Seconds one `getInstance` call may take (at least 10). */
  readonly timeoutSeconds: number;
  /** Stops the check. */
  readonly signal: AbortSignal;
  /** The nodes to check: those with a connected worker. */
  readonly nodes: readonly WatchedNode[];
  /** The provider's view of one instance (null: it does not exist). */
  readonly getInstance: (id: string, signal: AbortSignal) => Promise<Instance | null>;
  /** A node's instance is gone: `status` is what the provider said (`"gone"` for null). */
  readonly onGone: (node: WatchedNode, status: string) => void;
  /** A `getInstance` call failed (the node is not declared lost for that). */
  readonly onError?: (node: WatchedNode, error: unknown) => void;
}

/** Whether the provider's answer means the instance will not run the node any more. */
export function instanceGone(instance: Instance | null): boolean {
  return instance === null || instance.status === "terminated" || instance.status === "stopping";
}

/**
 * Reads every node's instance once, in parallel; resolves when all answered (or failed). The pool's
 * reconcile loop runs it once per tick, so there is one loop and no timer of its own.
 */
export async function checkInstances(options: InstanceCheckOptions): Promise<void> {
  const { signal } = options;
  if (signal.aborted) return;
  await Promise.all(
    options.nodes.map(async (node) => {
      try {
        const deadline = AbortSignal.timeout(Math.max(options.timeoutSeconds, 10) * 1000);
        const instance = await options.getInstance(node.instanceId, AbortSignal.any([signal, deadline]));
        if (!signal.aborted && instanceGone(instance)) options.onGone(node, instance?.status ?? "gone");
      } catch (error) {
        if (!signal.aborted) options.onError?.(node, error);
      }
    }),
  );
}
