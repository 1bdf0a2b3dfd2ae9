/**
 * Where `pool.run` sends a call: a {@link RunTarget} checked against the pool's nodes and workers.
 */
import { ConfigurationError } from "../errors/errors.js";
import type { RunTarget } from "./pool.js";

/** A node, and optionally one worker on it. */
export interface Placement {
  readonly node: number;
  readonly worker?: number;
}

/** The nodes a target may name: those present, those being started, and the workers per node. */
export interface TargetNodes {
  /** The indices of the nodes the pool has now. */
  readonly present: readonly number[];
  /** Whether `index` names a node the pool has or is starting. */
  readonly known: (index: number) => boolean;
  readonly workersPerNode: number;
}

/** The placement `target` names; a `ConfigurationError` naming the field when it names none. */
export function resolveTarget(target: RunTarget | undefined, nodes: TargetNodes): Placement | undefined {
  if (target === undefined) return undefined;
  if (target === "head") return { node: 0 };
  const count = nodes.present.length;
  const perNode = nodes.workersPerNode;
  const fail = (path: string, message: string) => new ConfigurationError({ issues: [{ path, message }] });
  const index = (value: unknown, below: number) =>
    typeof value === "number" && Number.isInteger(value) && value >= 0 && value < below;
  // Elastic pools can have gaps in their node indices: a node target must name a node the pool has.
  const known = (value: unknown) => typeof value === "number" && nodes.known(value);
  const indices = nodes.present.join(", ") || "none now";
  if (typeof target === "number") {
    if (!known(target))
      throw fail(
        "target",
        `expected "head" or the index of one of the pool's nodes (${indices}), received ${String(target)}`,
      );
    return { node: target };
  }
  if (typeof target === "object" && target !== null && "rank" in target) {
    const node = typeof target.rank === "number" ? Math.floor(target.rank / perNode) : Number.NaN;
    if (!index(target.rank, count * perNode))
      throw fail(
        "target.rank",
        `expected a global rank from 0 to ${count * perNode - 1} (${count} nodes × ${perNode} workers), received ${String(target.rank)}`,
      );
    if (!known(node))
      throw fail(
        "target.rank",
        `rank ${String(target.rank)} belongs to node ${node}, which the pool does not have now (its nodes: ${indices})`,
      );
    return { node, worker: (target.rank as number) % perNode };
  }
  if (typeof target === "object" && target !== null && "node" in target) {
    if (!known(target.node))
      throw fail(
        "target.node",
        `expected the index of one of the pool's nodes (${indices}), received ${String(target.node)}`,
      );
    if (target.worker === undefined) return { node: target.node };
    if (!index(target.worker, perNode))
      throw fail(
        "target.worker",
        `expected a worker index from 0 to ${perNode - 1} (workers per node), received ${String(target.worker)}`,
      );
    return { node: target.node, worker: target.worker };
  }
  throw fail(
    "target",
    `expected "head", a node index, { node, worker? } or { rank }, received ${typeof target === "object" ? JSON.stringify(target) : String(target)}`,
  );
}
