/**
 * Refusals a plugin makes in its hooks before any node is provisioned, for what its distributed
 * runtime cannot do: grow or shrink (a process group's size is fixed when it forms), or run its
 * tasks in child processes of the node's worker (the worker process is the rank).
 */
import { ConfigurationError } from "../errors/errors.js";
import type { Cluster } from "./types.js";

/** Refuses an elastic pool (`nodes` a range, `min` to `max`), with the message `why(min, max)` at `nodes`. */
export function refuseElasticPool(cluster: Cluster, why: (min: number, max: number) => string): void {
  const min = cluster.spec.nodes?.min ?? 1;
  const max = cluster.spec.nodes?.max ?? min;
  if (min === max) return;
  throw new ConfigurationError({ issues: [{ path: "nodes", message: why(min, max) }] });
}

/** Refuses `options.worker.executor: "process"`, with `message` at that path. */
export function refuseProcessExecutor(cluster: Cluster, message: string): void {
  if (cluster.spec.worker?.executor !== "process") return;
  throw new ConfigurationError({ issues: [{ path: "options.worker.executor", message }] });
}
