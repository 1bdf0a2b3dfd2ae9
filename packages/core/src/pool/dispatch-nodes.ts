/**
 * The dispatcher's node set: each node's worker connection and slots; which nodes are live, idle,
 * draining or gone for good; and which takes the next task (round robin over free slots, see
 * `placement.ts`).
 */

import { ConnectionError, NodeUnavailableError } from "../errors/errors.js";
import { nextDueDelay, nextFreeNode, slotLimit } from "./placement.js";
import type { AdaptiveSchedule } from "./schedule.js";
import { failWaiting, type NodeState, newNodeState } from "./task-record.js";
import type { WorkerConnection } from "./worker-connection.js";

/**
 * Nested tasks a node is given per slot of its nested pool: one running and one waiting, so that a
 * slot does not wait a round trip through the client for its next one.
 */
const NESTED_PER_SLOT = 2;

/** The nodes tasks are dispatched to, by index. */
export class DispatchNodes {
  readonly #nodes: (NodeState | undefined)[] = [];
  readonly #schedule: AdaptiveSchedule;
  #roundRobin = 0;

  constructor(schedule: AdaptiveSchedule) {
    this.#schedule = schedule;
  }

  /** Every node by index (holes where none is). */
  get all(): readonly (NodeState | undefined)[] {
    return this.#nodes;
  }

  get(index: number): NodeState | undefined {
    return this.#nodes[index];
  }

  /** Nodes whose worker is connected. */
  get liveNodes(): number {
    let count = 0;
    for (const node of this.#nodes) if (node?.connection) count += 1;
    return count;
  }

  /** Total slots over the live nodes. */
  get capacity(): number {
    let total = 0;
    for (const node of this.#nodes) if (node?.connection) total += node.capacity;
    return total;
  }

  /** Connected nodes with nothing running or waiting on them, longest idle first: `[index, idleSince]`. */
  idleNodes(): [index: number, idleSince: number][] {
    const idle: [number, number][] = [];
    for (const node of this.#nodes) {
      if (node?.connection && node.running.size === 0 && node.pinned.length === 0)
        idle.push([node.index, node.idleSince]);
    }
    return idle.sort((a, b) => a[1] - b[1] || b[0] - a[0]);
  }

  /**
   * Node `index` failed to start: with `again` its pinned tasks wait for the next start, counted from
   * now; without, they fail and the node is forgotten (see `TaskManager.startFailed`).
   */
  startFailed(index: number, reason: string, again: boolean): void {
    if (again) this.expect(index);
    const node = this.#nodes[index];
    if (!node || node.connection) return;
    if (again) {
      const now = performance.now();
      for (const record of node.pinned) record.queuedAt = now;
      node.bounded = true;
      return;
    }
    failWaiting(node.pinned.splice(0), () => goneError(index, reason));
    if (node.running.size === 0) this.forget(index);
  }

  /** Node `index` is starting (it has no worker yet): a node without slots that tasks can be pinned to. */
  expect(index: number): void {
    if (this.#nodes[index]) return;
    this.#nodes[index] = newNodeState(index, undefined, {
      capacity: 0,
      workerSlots: 0,
      adaptive: false,
      nestedCapacity: 0,
      bounded: false,
    });
  }

  /**
   * Node `index`, for a task pinned to it.
   *
   * @throws {ConnectionError} when there is no such node.
   */
  pinnable(index: number): NodeState {
    const node = this.#nodes[index];
    if (!node)
      throw new ConnectionError({ host: `node ${index}`, node: index, message: `There is no node ${index}` });
    return node;
  }

  /** Takes idle node `index` out for good: false, keeping it, when a task runs or waits on it. */
  remove(index: number): boolean {
    const node = this.#nodes[index];
    if (!node) return true;
    if (node.running.size > 0 || node.pinned.length > 0) return false;
    node.connection = undefined;
    delete this.#nodes[index];
    return true;
  }

  /** Forgets node `index` whatever it holds. */
  forget(index: number): void {
    delete this.#nodes[index];
  }

  /**
   * Node `index` has a worker on `connection`: added, or brought back with fresh slots. A slot count
   * of `"auto"` adapts: the concurrency (`nestedCapacity`) plus a prefetch that follows the tasks.
   */
  connect(
    index: number,
    connection: WorkerConnection,
    capacity: number | "auto",
    nestedCapacity: number,
  ): NodeState {
    const adaptive = capacity === "auto";
    const fixed = adaptive ? nestedCapacity : capacity;
    const node = this.#nodes[index];
    if (!node) {
      const added = newNodeState(index, connection, {
        capacity: fixed,
        workerSlots: nestedCapacity,
        adaptive,
        nestedCapacity: nestedCapacity * NESTED_PER_SLOT,
        bounded: true,
      });
      this.#nodes[index] = added;
      return added;
    }
    node.bounded = true;
    node.connection = connection;
    node.capacity = fixed;
    node.workerSlots = nestedCapacity;
    node.adaptive = adaptive;
    node.idleSince = performance.now();
    node.nestedCapacity = nestedCapacity * NESTED_PER_SLOT;
    node.nestedRunning = 0;
    node.draining = false;
    return node;
  }

  /** The tasks on workers now (sent, not finished): what a detached pool leaves running. */
  onWorkers(): { taskId: string; name: string; node: number }[] {
    const tasks: { taskId: string; name: string; node: number }[] = [];
    for (const node of this.#nodes) {
      if (!node) continue;
      for (const record of node.running.values()) {
        if (!record.done) tasks.push({ taskId: record.id, name: record.request.ref, node: node.index });
      }
    }
    return tasks;
  }

  /** Node `index` takes no new tasks, and its worker is asked to withdraw those it has not started. */
  drain(index: number): void {
    const node = this.#nodes[index];
    if (!node?.connection || node.draining) return;
    node.draining = true;
    const ids = [...node.running.values()]
      .filter((record) => !record.request.nested)
      .map((record) => record.wireId);
    if (ids.length === 0) return;
    // Lost meanwhile: detach retries them.
    node.connection.sendIfOpen({ t: "withdraw", ids });
  }

  /** Resolves once nothing runs on node `index` (at once if nothing does, or it is gone). */
  whenIdle(index: number): Promise<void> {
    const node = this.#nodes[index];
    if (!node?.connection || node.running.size === 0) return Promise.resolve();
    return new Promise((resolve) => node.idleWaiters.push(resolve));
  }

  /** Tasks `node` may have in flight (nested ones apart) when the next to place is `ref`'s (`once`: see {@link slotLimit}). */
  limit(node: NodeState, ref: string, once = false): number {
    return slotLimit(this.#schedule, node, ref, once);
  }

  /**
   * The next node, round robin, with a free nested slot or a free slot for a task of `ref` (`last`
   * last); for a task that runs `once`, a free worker slot.
   */
  nextFree(nested: boolean, ref: string, last?: number, once = false): NodeState | undefined {
    const node = nextFreeNode(this.#schedule, this.#nodes, this.#roundRobin, nested, ref, last, once);
    if (node) this.#roundRobin = (node.index + 1) % this.#nodes.length;
    return node;
  }

  /** Milliseconds until the next running task is due to end, if one has an expected end to come. */
  nextDueDelay(): number | undefined {
    return nextDueDelay(this.#schedule, this.#nodes, performance.now());
  }
}

function goneError(index: number, reason: string): NodeUnavailableError {
  return new NodeUnavailableError({ node: index, message: `Node ${index} is gone: ${reason}` });
}
