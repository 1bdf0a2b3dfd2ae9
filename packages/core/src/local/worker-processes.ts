/**
 * A Local worker's processes: the worker started in its own process group (`detached: true`), so
 * that what its tasks start goes with it, and stopping that whole group, never waiting for ever.
 */
import type { ChildProcess } from "node:child_process";

/** A worker process this client started. */
export interface RunningWorker {
  readonly child: ChildProcess;
  exited: boolean;
  /** Let go of by `detachLocalWorkers` (a detached pool): its processes outlive this pool, nothing here stops them. */
  detached?: boolean;
}

/** Sends `signal` to the worker's process group (or to it alone, if its group is gone), unless it exited. */
export function killGroup(worker: RunningWorker, signal: NodeJS.Signals): void {
  if (worker.exited || worker.child.pid === undefined) return;
  try {
    process.kill(-worker.child.pid, signal);
  } catch {
    try {
      worker.child.kill(signal);
    } catch {
      // already gone
    }
  }
}

/** Whether any process of the group `pgid` is left (a zombie not yet reaped counts). */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Resolves once the group `pgid` is gone, `ms` have passed, or `signal` is aborted. */
async function groupGone(pgid: number, ms: number, signal: AbortSignal | undefined): Promise<void> {
  const deadline = Date.now() + ms;
  while (groupAlive(pgid) && Date.now() < deadline && !signal?.aborted) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** How long a worker's process group has to end on SIGTERM before it is killed. */
const TERMINATE_GRACE_MS = 3000;
/** How long, after SIGKILL, terminate waits to see the group gone before it stops waiting. */
const KILL_WAIT_MS = 5000;

/**
 * Stops a worker and every process of its group (what its tasks started, unless they left it): stdin
 * closed and SIGTERM, {@link TERMINATE_GRACE_MS} to end, then SIGKILL (at once when `signal` is
 * aborted). It watches the group itself rather than the worker's `exit` event, which a detach removes
 * and which comes as soon as the worker alone is gone, and it never waits for ever.
 */
export async function stopWorker(worker: RunningWorker, signal: AbortSignal | undefined): Promise<void> {
  const pgid = worker.child.pid;
  if (pgid === undefined) return; // never started
  worker.child.stdin?.end();
  const send = (name: NodeJS.Signals) => {
    try {
      process.kill(-pgid, name);
    } catch {
      // the group is gone
    }
  };
  send("SIGTERM");
  await groupGone(pgid, TERMINATE_GRACE_MS, signal);
  if (!groupAlive(pgid)) return;
  send("SIGKILL");
  await groupGone(pgid, KILL_WAIT_MS, undefined);
}
