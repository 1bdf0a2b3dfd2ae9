/**
 * A large argument of `pool.broadcast` sent once from the client and fanned out by the nodes: it is
 * kept on the first node as a remote reference (one crossing of the client's link), and each other
 * node fetches it from there node to node (`ref-moves.ts`) before its call runs, instead of the
 * client sending it once per node. The reference is released when the broadcast ends.
 */
import { NDArray, PyObject, type RemoteRef } from "../protocol/values.js";
import { type DispatchHost, submitTask } from "./dispatch.js";
import type { WaitOptions } from "./pool.js";
import { nodeIndices } from "./pool-context.js";
import { type Kwargs, type PendingTask, python } from "./python-function.js";

/** An argument at least this large (bytes) is fanned out by the nodes, when a broadcast reaches several. */
export const FAN_OUT_BYTES = 1024 * 1024;

const keepValue = python<[value: unknown], unknown>("skyward.refs:value");

/** The size of an argument worth fanning out (bytes, arrays, pickled objects, strings), else 0. */
function sizeOf(value: unknown): number {
  if (typeof value === "string") return value.length;
  if (value instanceof PyObject) return value.bytes.byteLength;
  if (value instanceof NDArray) return value.data.byteLength;
  if (ArrayBuffer.isView(value)) return value.byteLength;
  return 0;
}

/**
 * Whether every worker may be handed the very same object: a reference hands the kept object itself
 * to each task of its node (thread executor), so a mutable one (an array, an object) is shared only
 * when each node runs one worker; bytes and strings are immutable in Python.
 */
function shareable(value: unknown, workersPerNode: number): boolean {
  return workersPerNode === 1 || typeof value === "string" || value instanceof Uint8Array;
}

/** A broadcast's call with its large arguments replaced by references kept on the first node. */
export interface FannedOut<R> {
  readonly pending: PendingTask<R>;
  /** The references made for it: released once the broadcast ends. */
  readonly refs: readonly RemoteRef[];
}

/**
 * Keeps each large top-level argument of `pending` (positional or keyword, {@link FAN_OUT_BYTES} or
 * more) on the pool's first node and returns the call taking references instead; the call as it
 * was when the pool has a single node or no argument is large.
 */
export async function fanOutArguments<R>(
  host: DispatchHost,
  pending: PendingTask<R>,
  options: WaitOptions,
): Promise<FannedOut<R>> {
  const nodes = nodeIndices(host.context);
  const perNode = host.context.layout.workersPerNode;
  const large = (value: unknown) => sizeOf(value) >= FAN_OUT_BYTES && shareable(value, perNode);
  if (nodes.length < 2 || (!pending.args.some(large) && !Object.values(pending.kwargs).some(large)))
    return { pending, refs: [] };
  const first = nodes[0]!;
  const refs: RemoteRef[] = [];
  const kept = async (value: unknown): Promise<unknown> => {
    if (!large(value)) return value;
    const ref = await submitTask(host, keepValue(value).withKeep(), { ...options, target: first }).result;
    refs.push(ref);
    return ref;
  };
  try {
    const args = await Promise.all(pending.args.map(kept));
    const kwargs: Kwargs = Object.fromEntries(
      await Promise.all(Object.entries(pending.kwargs).map(async ([key, value]) => [key, await kept(value)])),
    );
    return { pending: { ...pending, args, kwargs }, refs };
  } catch (error) {
    await Promise.all(refs.map((ref) => ref.release()));
    throw error;
  }
}
