/**
 * Losing nodes: an interruption notice (the replacement asked for at once, the node drained), a
 * connection lost, failed health checks, an instance the provider reports gone; a lost node is
 * replaced under its index; a replacement that fails is dropped for the reconcile loop to start again.
 */
import type { Instance } from "../contract/provider.js";
import { ProvisionError } from "../errors/errors.js";
import type { WorkerEvent } from "../protocol/protocol.js";
import { checkInstances } from "./instance-watch.js";
import { collectionsNodeGone, type NodeWatchers } from "./node-start.js";
import { isClosing, type NodeRuntime, type PoolContext, placement } from "./pool-context.js";
import type { WorkerConnection } from "./worker-connection.js";

/** What replacing a node needs of the node set. */
export interface ReplacingMembership {
  startNode(node: NodeRuntime, signal: AbortSignal): Promise<void>;
  provision(count: number, signal: AbortSignal): Promise<Instance[]>;
  dropNode(node: NodeRuntime, error: unknown): void;
  /** Announces (`node.provisioned`) the instance a node was just given: it costs from now on. */
  provisioned(node: NodeRuntime): void;
  /** Work that shutdown waits for before it terminates the nodes (a replacement under way). */
  track(work: Promise<void>): void;
}

/** The watchers of started nodes, and the reconcile loop's check of their instances. */
export interface PoolNodeWatchers extends NodeWatchers {
  /**
   * A step of the reconcile loop, once per tick: reads the connected nodes' instances from the
   * provider; one gone behind the pool's back (terminated, stopping, not found) is lost.
   */
  checkInstances(): Promise<void>;
  /**
   * A node the reconcile loop started: when a lost node's replacement failed under this index, this
   * one is its replacement (`node.replaced`, naming the instance lost), which whoever waits for it sees.
   */
  started(node: NodeRuntime): void;
  /** An index the pool gave up (its target no longer includes it): no replacement comes for it. */
  givenUp(index: number): void;
}

/** How the pool handles the loss of its nodes. */
export function createNodeWatchers(context: PoolContext, membership: ReplacingMembership): PoolNodeWatchers {
  const { hub } = context;
  /** Lost nodes whose replacement failed, by index: the instance lost (the first, if several failed). */
  const unreplaced = new Map<number, string>();

  const replaced = (node: NodeRuntime, previousInstanceId: string): void => {
    hub.emit({
      type: "node.replaced",
      timestamp: Date.now(),
      poolId: context.id,
      node: node.index,
      instanceId: node.instance.id,
      previousInstanceId,
    });
  };

  /** Declares a node lost while its connection may still look open, and closes that connection. */
  const declareLost = (node: NodeRuntime, reason: string): void => {
    const connection = node.connection;
    if (!connection) return;
    nodeLost(node, connection, reason, true);
    void connection.close({ timeoutMs: 1000 });
  };

  /**
   * `running`: the worker may still run (silent, unhealthy, its instance reported gone, drained after
   * a notice): the pool ends it with its instance, so its exit is no news; a worker whose connection
   * ended by itself is another matter, and its exit (a crash, a kill) is reported.
   */
  const nodeLost = (
    node: NodeRuntime,
    connection: WorkerConnection,
    reason: string,
    running = false,
  ): void => {
    if (node.connection !== connection) return;
    node.connection = undefined;
    if (running) node.replacing = node.launch;
    context.refs.nodeLost(node.index);
    context.tasks.detach(node.index, reason);
    collectionsNodeGone(context, node.index);
    // Let go of on purpose (scale-down): not lost, so no event and no replacement.
    if (node.retiring) return;
    if (isClosing(context)) return;
    hub.emit({
      type: "node.lost",
      timestamp: Date.now(),
      poolId: context.id,
      node: node.index,
      instanceId: node.instance.id,
      reason,
    });
    // Tracked: a close meanwhile waits for it, so that the instance it gets is terminated too.
    membership.track(replaceNode(node, reason));
  };

  const replaceNode = async (node: NodeRuntime, reason: string): Promise<void> => {
    const { provider, cluster } = placement(context);
    // Lost nodes are always replaced (tasks count their own retries).
    const previous = node.instance;
    const asked = node.nextInstance;
    try {
      await provider.terminate({ cluster, ids: [previous.id], signal: AbortSignal.timeout(60_000) });
      // Said at once: the lost instance stops costing now, whether or not a replacement comes.
      hub.emit({
        type: "node.destroyed",
        timestamp: Date.now(),
        poolId: context.id,
        node: node.index,
        instanceId: previous.id,
      });
      // The instance asked for at the interruption notice, or (none, or it failed) a new one now.
      const instance =
        (asked ? await asked.catch(() => undefined) : undefined) ??
        (await membership.provision(1, context.abort.signal))[0];
      if (!instance) throw new ProvisionError({ provider: provider.name, message: "no instance came back" });
      node.instance = instance;
      node.nextInstance = undefined;
      membership.provisioned(node);
      await membership.startNode(node, context.abort.signal);
      replaced(node, unreplaced.get(node.index) ?? previous.id);
      unreplaced.delete(node.index);
    } catch (error) {
      // An instance asked for at a notice and not taken yet stays the node's, so that the node's
      // terminate (let go of below, or the pool's shutdown) takes it too: it bills until then.
      if (isClosing(context)) return;
      if (!unreplaced.has(node.index)) unreplaced.set(node.index, previous.id);
      hub.emit({
        type: "error",
        timestamp: Date.now(),
        poolId: context.id,
        node: node.index,
        message: `could not replace node ${node.index} (lost: ${reason}): ${(error as Error).message}; the pool starts another in its place after a backoff`,
        cause: error,
      });
      // Let go of like a node that failed to start: the reconcile loop starts another under its index
      // while the pool wants it (a fixed pool always does), backing off after each failure; tasks
      // pinned to it wait for that one within provisionTimeout.
      membership.dropNode(node, error);
    }
  };

  /**
   * The cloud will reclaim the node's instance: it takes no new tasks, its tasks that have not
   * started move elsewhere, its replacement's instance is asked for at once, and the node is let go
   * as soon as its running tasks are done (or lost with them, which retries them).
   */
  const interrupted = (node: NodeRuntime, connection: WorkerConnection, notice: WorkerEvent): void => {
    if (node.connection !== connection || node.nextInstance !== undefined) return;
    if (isClosing(context)) return;
    const reason = [notice.kind, notice.action, notice.time ? `at ${notice.time}` : ""]
      .filter((part) => typeof part === "string" && part !== "")
      .join(" ");
    hub.emit({
      type: "node.preempted",
      timestamp: Date.now(),
      poolId: context.id,
      node: node.index,
      instanceId: node.instance.id,
      reason,
    });
    context.tasks.drain(node.index);
    const { provider } = placement(context);
    const next = membership.provision(1, context.abort.signal).then(([instance]) => {
      if (!instance) throw new ProvisionError({ provider: provider.name, message: "no instance came back" });
      return instance;
    });
    next.catch(() => undefined);
    node.nextInstance = next;
    void context.tasks.whenIdle(node.index).then(() => declareLost(node, `interruption notice: ${reason}`));
  };

  const watchInstances = async (): Promise<void> => {
    const { provider, cluster } = context;
    if (!provider || !cluster) return;
    await checkInstances({
      timeoutSeconds: context.options.reconcileTickInterval,
      signal: context.abort.signal,
      nodes: context.nodes
        .filter((node) => node.connection !== undefined && !node.retiring)
        .map((node) => ({ index: node.index, instanceId: node.instance.id })),
      getInstance: (id, signal) => provider.getInstance({ cluster, id, signal }),
      onGone: (watched, status) => {
        // Elastic pools can have gaps in their node indices: found by index, not by position.
        const node = context.nodes.find((candidate) => candidate.index === watched.index);
        // A late answer about an instance the node no longer runs on (or a node let go of) changes nothing.
        if (node?.instance.id !== watched.instanceId || !node.connection || node.retiring) return;
        const reason = `the provider reports its instance ${watched.instanceId} ${status}`;
        // A spot instance ended behind the pool's back was, in all likelihood, reclaimed (said once:
        // a node whose worker already reported its preemption has its replacement asked for).
        if (node.instance.spot && node.nextInstance === undefined) {
          hub.emit({
            type: "node.preempted",
            timestamp: Date.now(),
            poolId: context.id,
            node: node.index,
            instanceId: node.instance.id,
            reason,
          });
        }
        declareLost(node, reason);
      },
    });
  };

  const started = (node: NodeRuntime): void => {
    const previous = unreplaced.get(node.index);
    if (previous === undefined) return;
    unreplaced.delete(node.index);
    replaced(node, previous);
  };

  return {
    interrupted,
    lost: nodeLost,
    unhealthy: declareLost,
    checkInstances: watchInstances,
    started,
    givenUp: (index) => unreplaced.delete(index),
  };
}
