/**
 * Giving nodes of a pool's job back to the cluster while the job goes on: a running job is told which
 * nodes it keeps (`scontrol update NodeList`); a job still in the queue is held, made smaller
 * (`scontrol update NumNodes`) and released, so that it starts without the nodes let go of.
 */
import { ProvisionError, shellQuote } from "@skyward/core/contract";
import type { SlurmJob } from "./slurm-commands.js";
import type { SlurmLogin } from "./slurm-login.js";

/** A job this provider submitted, as the pool uses it. */
export interface TrackedJob {
  /** The cluster (pool) it belongs to. */
  readonly cluster: string;
  /** How many nodes it was given. */
  readonly nodes: number;
  /** Its nodes' indices the pool has let go of. */
  readonly released: Set<number>;
  /**
   * Those of them Slurm took out of the job: all but its batch host (its first node, which it keeps
   * until the end) once it runs; any of them while it waits in the queue.
   */
  readonly left: Set<number>;
  /**
   * Its nodes by index, recorded when it starts: instance `<job>-<index>` stays on its node after the
   * job is shrunk (squeue then lists only the nodes kept). An index that left the job before it started
   * has none.
   */
  names: readonly (string | undefined)[] | undefined;
}

/**
 * Records the nodes of `job` once it has them all: those of the indices still in it, in the job's order
 * (the indices that left it while it waited have none). True when they are known.
 */
export function recordNames(tracked: TrackedJob, job: SlurmJob): boolean {
  if (tracked.names !== undefined) return true;
  // While the names are unknown, `left` holds only indices taken out before the job started.
  if (job.nodes.length === 0 || job.nodes.length !== tracked.nodes - tracked.left.size) return false;
  const started = [...job.nodes];
  tracked.names = Array.from({ length: tracked.nodes }, (_, index) =>
    tracked.left.has(index) ? undefined : started.shift(),
  );
  return true;
}

/**
 * Gives back the nodes of a running job that were let go of: all but its batch host (Slurm cannot take
 * that one from a job: the job keeps it until the rest go), whichever went first. `beforeLeaving` runs
 * on the nodes about to leave (their node-local environments are removed).
 */
export async function shrinkRunningJob(
  login: SlurmLogin,
  jobId: string,
  tracked: TrackedJob & { names: readonly (string | undefined)[] },
  beforeLeaving: (nodes: readonly string[]) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  const { names } = tracked;
  const batchHost = names.findIndex((name) => name !== undefined);
  const keeps = (index: number) => index === batchHost || !tracked.released.has(index);
  const kept = names.filter((name, index): name is string => name !== undefined && keeps(index));
  const leaving = names.flatMap((name, index) =>
    name !== undefined && !keeps(index) && !tracked.left.has(index) ? [index] : [],
  );
  if (leaving.length === 0) return;
  await beforeLeaving(leaving.map((index) => names[index] as string));
  // A running job gives nodes back when told which it keeps (Slurm's "scontrol update NodeList").
  await login.checked(["scontrol", "update", `JobId=${jobId}`, `NodeList=${kept.join(",")}`], signal);
  for (const index of leaving) tracked.left.add(index);
}

/**
 * Makes a job that waits in the queue smaller by the nodes let go of, so that it starts without them.
 * It is held meanwhile: a job that started between the look and the change would give back nodes Slurm
 * chooses, not those let go of. False when it could not be held (it has started, or ended).
 */
export async function shrinkPendingJob(
  login: SlurmLogin,
  jobId: string,
  tracked: TrackedJob,
  signal?: AbortSignal,
): Promise<boolean> {
  const held = await login.run(`scontrol hold ${shellQuote(jobId)}`, signal);
  if (held.code !== 0) return false;
  try {
    const remaining = tracked.nodes - tracked.released.size;
    // min-max both: a bare count lowers the minimum only, and Slurm could still start it on more. The
    // job runs one task per node (`--ntasks-per-node=1`): its task count, left as it was, keeps it at
    // its old size.
    await login.checked(
      ["scontrol", "update", `JobId=${jobId}`, `NumNodes=${remaining}-${remaining}`, `NumTasks=${remaining}`],
      signal,
    );
    for (const index of tracked.released) tracked.left.add(index);
  } finally {
    // Released even when the change failed or the call was aborted: a job left held never starts. The
    // login's own command deadline bounds it.
    await login.checked(["scontrol", "release", jobId]);
  }
  return true;
}

/** The error for a job whose nodes could not be given back: it runs, but its nodes are not known. */
export function unknownNodesError(jobId: string, state: string): ProvisionError {
  return new ProvisionError({
    provider: "slurm",
    isRetryable: true,
    message: `could not give back nodes of Slurm job ${jobId}: it is ${state.toLowerCase()}, and squeue does not list all its nodes yet; asked again, they are tried again`,
  });
}
