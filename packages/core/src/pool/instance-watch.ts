/**
 * Loss detection through the provider: the instances of a pool's connected nodes are read with
 * `getInstance` on every tick, and a node whose instance is gone, terminated or stopping (a spot
 * reclaim, someone terminating it in the console) is reported lost — even while its connection
 * still looks open, as it may for a while after a host disappears.
 */
import type { Instance } from "../contract/provider.js";

/** A node as the watch sees it. */
export interface WatchedNode {
  readonly index: number;
  readonly instanceId: string;
}

/** Options of {@link watchInstances}. */
export interface InstanceWatchOptions {
  /** Seconds between ticks. */
  readonly intervalSeconds: number;
  /** Stops the watch. */
  readonly signal: AbortSignal;
  /** The nodes to check now: those with a connected worker. */
  readonly nodes: () => readonly WatchedNode[];
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

/** Starts the watch; it runs until `signal` aborts. */
export function watchInstances(options: InstanceWatchOptions): void {
  const { signal } = options;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const tick = async () => {
    await Promise.all(
      options.nodes().map(async (node) => {
        try {
          const deadline = AbortSignal.timeout(Math.max(options.intervalSeconds, 10) * 1000);
          const instance = await options.getInstance(node.instanceId, AbortSignal.any([signal, deadline]));
          if (!signal.aborted && instanceGone(instance)) options.onGone(node, instance?.status ?? "gone");
        } catch (error) {
          if (!signal.aborted) options.onError?.(node, error);
        }
      }),
    );
    if (!signal.aborted) schedule();
  };
  const schedule = () => {
    timer = setTimeout(() => void tick(), options.intervalSeconds * 1000);
    timer.unref();
  };
  signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
  if (!signal.aborted) schedule();
}
