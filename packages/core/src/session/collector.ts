/**
 * Collecting a detached pool's tasks on attach: a connection of its own to each worker adopts the
 * tasks still running, collects those that finished (with the stream items kept meanwhile) and
 * runs their nested tasks until they end.
 */
import type { SubtaskRunner } from "../pool/task-manager.js";
import { WorkerConnection } from "../pool/worker-connection.js";
import type { WorkerMessage } from "../protocol/protocol.js";
import { serveAdoptedSubtasks } from "./adopted-subtasks.js";
import { type CollectedResult, openOutcomes } from "./outcomes-state.js";
import type { DetachedPoolState, DetachedTask } from "./state.js";

const TERMINAL = new Set(["result", "error", "end"]);

/** How the collector reaches a node's worker: by TCP, or through a stream (an SSH tunnel). */
export type Reach = (
  node: DetachedPoolState["nodes"][number],
) => Promise<{ host: string; port: number } | { host: string; stream: import("node:stream").Duplex }>;

/** What {@link collectDetached} returns: the outcomes, and how to close its connections. */
export interface Collector {
  readonly results: Promise<CollectedResult[]>;
  readonly close: () => Promise<void>;
  /** Runs the picked-up tasks' nested tasks on the attached pool from now on (undefined: it did not start). */
  readonly runNested: (run: SubtaskRunner | undefined) => void;
  /**
   * What is not handed over yet, for a detach after this attach: the outcomes received, and the
   * tasks still without one (they go on, or wait, on their workers).
   */
  readonly pending: () => { outcomes: CollectedResult[]; tasks: DetachedTask[] };
}

/**
 * Reconnects to each node's worker on a connection of its own, before the pool's: it adopts the
 * detached tasks still running, collects those that finished, with the stream items the workers
 * kept meanwhile, and runs the adopted tasks' nested tasks on the attached pool until they end.
 */
export async function collectDetached(
  state: DetachedPoolState,
  tokenOf: (node: DetachedPoolState["nodes"][number]) => string,
  reach: Reach,
  signal: AbortSignal | undefined,
): Promise<Collector> {
  // Outcomes an earlier attach received and never handed over (detached again before that).
  const carried = await openOutcomes(state);
  const expected = new Map<string, DetachedTask>(state.tasks.map((task) => [task.taskId, task]));
  let runNested: (run: SubtaskRunner | undefined) => void = () => {};
  const nested = new Promise<SubtaskRunner | undefined>((resolve) => {
    runNested = resolve;
  });
  const outcomes = new Map<string, CollectedResult>();
  const items = new Map<string, Map<number, unknown>>();
  const connections: WorkerConnection[] = [];
  let settle: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    settle = resolve;
  });
  const check = () => {
    if (outcomes.size === expected.size) settle();
  };
  const close = async () => {
    await Promise.all(connections.map((connection) => connection.close({ timeoutMs: 2000 })));
  };
  // The tasks these connections adopted (wire ids): those of the state file, and any still running
  // from an earlier detach. The connections stay until they have all ended, since they run the
  // tasks' nested tasks.
  const adopted = new Set<string>();
  let collectedAll = false;
  const closeIfIdle = () => {
    if (collectedAll && adopted.size === 0) void close();
  };
  const extra = (taskId: string, dropped = 0) => {
    const received = items.get(taskId);
    return {
      items: received ? [...received.entries()].sort((a, b) => a[0] - b[0]).map(([, value]) => value) : [],
      dropped,
    };
  };
  try {
    for (const node of state.nodes) {
      const connection = await WorkerConnection.connect(await reach(node), {
        token: tokenOf(node),
        node: node.index,
        timeoutMs: 30_000,
        ...(signal ? { signal } : {}),
      });
      connections.push(connection);
      const mine = [...expected.values()].filter((task) => task.node === node.index);
      const finished = new Set(connection.welcome.results);
      const running = new Set((connection.welcome as { running?: string[] }).running ?? []);
      for (const id of running) adopted.add(id);
      serveAdoptedSubtasks(connection, nested);
      connection.onMessage((message: WorkerMessage) => {
        const id = (message as { id?: string | null }).id;
        if (TERMINAL.has(message.t) && typeof id === "string" && adopted.delete(id)) closeIfIdle();
        const task = typeof id === "string" ? expected.get(id) : undefined;
        if (!task || outcomes.has(task.taskId)) return;
        if (message.t === "item") {
          const received = items.get(task.taskId) ?? new Map<number, unknown>();
          items.set(task.taskId, received);
          received.set(message.seq, message.value);
          return;
        }
        if (!TERMINAL.has(message.t)) return;
        const base = { taskId: task.taskId, name: task.name, node: task.node };
        const dropped = (message as { dropped?: number }).dropped ?? 0;
        if (message.t === "error") {
          const error = message as { type?: string; message?: string };
          outcomes.set(task.taskId, {
            ...base,
            ...extra(task.taskId, dropped),
            ok: false,
            errorType: error.type ?? "Error",
            message: error.message ?? "",
          });
        } else {
          outcomes.set(task.taskId, {
            ...base,
            ...extra(task.taskId, dropped),
            ok: true,
            value: (message as { value?: unknown }).value,
          });
        }
        check();
      });
      connection.onLost((loss) => {
        for (const id of running) adopted.delete(id);
        for (const task of mine) {
          if (outcomes.has(task.taskId)) continue;
          outcomes.set(task.taskId, {
            taskId: task.taskId,
            name: task.name,
            node: task.node,
            ...extra(task.taskId),
            ok: false,
            errorType: "lost",
            message: `the connection to node ${node.index} was lost: ${loss.error.message}`,
          });
        }
        check();
      });
      for (const task of mine) {
        if (finished.has(task.taskId) || running.has(task.taskId)) continue;
        outcomes.set(task.taskId, {
          taskId: task.taskId,
          name: task.name,
          node: task.node,
          items: [],
          dropped: 0,
          ok: false,
          errorType: "lost",
          message: `the worker of node ${node.index} no longer knows task ${task.taskId}`,
        });
      }
      // Finished tasks resend their outcome; running ones hand over the items they kept meanwhile.
      const collect = mine
        .filter((task) => finished.has(task.taskId) || running.has(task.taskId))
        .map((task) => task.taskId);
      if (collect.length > 0) connection.send({ t: "collect", ids: collect });
    }
  } catch (error) {
    void close();
    throw error;
  }
  check();
  const results = done.then(() => {
    collectedAll = true;
    closeIfIdle();
    return [...carried, ...state.tasks.map((task) => outcomes.get(task.taskId) as CollectedResult)];
  });
  const pending = () => ({
    outcomes: [
      ...carried,
      ...state.tasks.flatMap((task) => {
        const outcome = outcomes.get(task.taskId);
        return outcome ? [outcome] : [];
      }),
    ],
    tasks: state.tasks.filter((task) => !outcomes.has(task.taskId)),
  });
  return { results, close, runNested, pending };
}
