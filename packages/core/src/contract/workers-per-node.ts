/**
 * How many worker processes a node runs, as the plugins ask: one plugin's `workersPerNode` hook, or
 * one worker per accelerator (`workersPerAccelerator()`), and the layout (pinned devices or not)
 * that follows; conflicting plugins are refused when the spec is validated.
 */
import { ConfigurationError } from "../errors/errors.js";
import { badReturn, guardedSync } from "./plugin-error.js";
import type { Cluster, PluginV1, WorkersPerNode } from "./types.js";

const perAcceleratorMarker = Symbol.for("skyward.workersPerNode.perAccelerator");

/**
 * The accelerators each node of `cluster` has: the offer's count, else the spec's (`accelerator:
 * sky.accelerators.A100({ count: 8 })` → 8); 0 for CPU nodes. A fractional share counts as none.
 */
export function acceleratorsPerNode(cluster: Cluster): number {
  const count = cluster.offer.accelerator?.count ?? cluster.spec.acceleratorCount;
  return typeof count === "number" && Number.isFinite(count) && count >= 1 ? Math.floor(count) : 0;
}

/** Options of {@link workersPerAccelerator}. */
export interface WorkersPerAcceleratorOptions {
  /**
   * Pin worker `i` of a node to device `i` (`CUDA_VISIBLE_DEVICES`: the process sees one device,
   * its `cuda:0`). Default true. False: every worker sees all of the node's devices, and the
   * framework picks device `LOCAL_RANK` (accelerate, Hugging Face `Trainer`: `cuda:<LOCAL_RANK>`).
   */
  readonly pin?: boolean;
  /**
   * Called with the count and the cluster before the hook returns it: a plugin's own checks
   * (accelerate: `num_processes` = nodes × accelerators); what it throws fails the pool's start.
   */
  readonly check?: (count: number, cluster: Cluster) => void;
}

/**
 * A {@link WorkersPerNode} hook for one worker per accelerator: the node's accelerator count
 * ({@link acceleratorsPerNode}). The pool recognises it (see {@link isWorkersPerAccelerator}): it runs
 * each worker as a process of its own, checks each node has that many GPUs, and (with `pin`) pins
 * worker `i` of a node to device `i`.
 *
 * @throws {Error} (when called) for a cluster whose nodes have no accelerator.
 */
export function workersPerAccelerator(options: WorkersPerAcceleratorOptions = {}): WorkersPerNode {
  const { pin = true, check } = options;
  const hook: WorkersPerNode = ({ cluster }) => {
    const count = acceleratorsPerNode(cluster);
    if (count < 1) {
      throw new Error(
        "one worker per accelerator needs nodes with accelerators (e.g. accelerator: sky.accelerators.A100({ count: 8 })), and this pool's nodes have none",
      );
    }
    check?.(count, cluster);
    return count;
  };
  Object.defineProperty(hook, perAcceleratorMarker, { value: Object.freeze({ pin }) });
  return hook;
}

function perAcceleratorSettings(hook: unknown): { pin: boolean } | undefined {
  if (typeof hook !== "function") return undefined;
  const settings = (hook as unknown as Record<symbol, unknown>)[perAcceleratorMarker];
  return typeof settings === "object" && settings !== null ? (settings as { pin: boolean }) : undefined;
}

/** Whether `hook` is one {@link workersPerAccelerator} made (from any copy of this package). */
export function isWorkersPerAccelerator(hook: unknown): boolean {
  return perAcceleratorSettings(hook) !== undefined;
}

/**
 * Every plugin after the first that sets its own {@link Plugin.workersPerNode} (at most one plugin
 * may decide how many workers a node runs; {@link workersPerAccelerator} hooks all agree and yield to
 * it): its index in `plugins` and a message naming both.
 */
export function workersPerNodeConflicts(plugins: readonly PluginV1[]): { index: number; message: string }[] {
  const setting = plugins
    .map((plugin, index) => ({ plugin, index }))
    .filter(
      ({ plugin }) =>
        typeof plugin.workersPerNode === "function" && !isWorkersPerAccelerator(plugin.workersPerNode),
    );
  const [first, ...others] = setting;
  if (!first) return [];
  return others.map(({ plugin, index }) => ({
    index,
    message: `plugins "${first.plugin.name}" and "${plugin.name}" both set workersPerNode; at most one plugin of a pool may decide how many workers a node runs`,
  }));
}

/**
 * The workers each node runs on `cluster`: what the one plugin that sets
 * {@link Plugin.workersPerNode} returns, else 1.
 *
 * @throws {ConfigurationError} when two plugins set it (naming both).
 * @throws {PluginError} when the hook throws or returns anything but a positive whole number.
 */
export function resolveWorkersPerNode(plugins: readonly PluginV1[], cluster: Cluster): number {
  return resolveWorkerLayout(plugins, cluster).workersPerNode;
}

/** How a pool's nodes run their workers, as {@link resolveWorkerLayout} decides. */
export interface WorkerLayout {
  /** Workers per node. */
  readonly workersPerNode: number;
  /**
   * Whether some plugin asked for one worker per accelerator ({@link workersPerAccelerator}): each
   * worker is then a process of its own (the process executor).
   */
  readonly processPerWorker: boolean;
  /**
   * Whether the count is the node's accelerators (no plugin set its own): each node then checks it
   * has that many GPUs before it starts.
   */
  readonly checkAccelerators: boolean;
  /**
   * Whether, besides, the runtime pins worker `i` of a node to device `i` (`CUDA_VISIBLE_DEVICES`):
   * when every plugin asking for one worker per accelerator pins.
   */
  readonly pinAccelerators: boolean;
}

/**
 * The workers each node runs on `cluster`: what the one plugin that sets its own
 * {@link Plugin.workersPerNode} returns; else, when a plugin asks for one worker per accelerator,
 * the node's accelerator count; else 1.
 *
 * @throws {ConfigurationError} when two plugins set their own count (naming both).
 * @throws {PluginError} when the hook throws or returns anything but a positive whole number.
 */
export function resolveWorkerLayout(plugins: readonly PluginV1[], cluster: Cluster): WorkerLayout {
  const conflicts = workersPerNodeConflicts(plugins);
  if (conflicts.length > 0) {
    throw new ConfigurationError({
      issues: conflicts.map(({ index, message }) => ({ path: `plugins[${index}]`, message })),
    });
  }
  const setting = plugins.filter((plugin) => typeof plugin.workersPerNode === "function");
  const perAccelerator = setting.filter((plugin) => isWorkersPerAccelerator(plugin.workersPerNode));
  const processPerWorker = perAccelerator.length > 0;
  const own = setting.find((plugin) => !isWorkersPerAccelerator(plugin.workersPerNode));
  // The one plugin with its own count (MIG) decides; else every per-accelerator hook runs (they agree
  // on the count, and each may check it its own way).
  let decided: number | undefined;
  for (const plugin of own ? [own] : perAccelerator) {
    const hook = plugin.workersPerNode as WorkersPerNode;
    const count: unknown = guardedSync(plugin, "workersPerNode", () => hook.call(plugin, { cluster }));
    if (typeof count !== "number" || !Number.isInteger(count) || count < 1) {
      throw badReturn(plugin, "workersPerNode", "a positive whole number", count);
    }
    decided ??= count;
  }
  const byAccelerators = own === undefined && processPerWorker;
  return {
    workersPerNode: decided ?? 1,
    processPerWorker,
    checkAccelerators: byAccelerators,
    pinAccelerators:
      byAccelerators && perAccelerator.every((plugin) => perAcceleratorSettings(plugin.workersPerNode)?.pin),
  };
}
