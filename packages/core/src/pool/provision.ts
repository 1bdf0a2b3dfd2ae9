/**
 * Provisioning: instances asked of a provider for a prepared cluster, retried as the spec allows,
 * then polled until they run; what the provider reports meanwhile becomes `provision.progress`.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Cluster, Instance, ProgressReport, Provider } from "../contract/provider.js";
import { attemptsOf, NoCapacityError, type ProvisionAttempt, ProvisionError } from "../errors/errors.js";
import type { PoolSpec } from "../spec/spec.js";
import type { InstanceBilling } from "./cost.js";
import { abortError, type PoolContext } from "./pool-context.js";

/** The spec's provisioning settings. */
type ProvisionSettings = Pick<PoolSpec, "maxProvisionAttempts" | "provisionRetryDelay" | "provisionTimeout">;

/** Takes the provider's progress reports while instances are asked for and awaited (with the instance awaited). */
export type ProvisionProgress = (report: ProgressReport, instanceId?: string) => void;

/**
 * The pool's {@link ProvisionProgress}: each report a `provision.progress` event, sent when what it
 * says of a step (of an instance) changes — `getInstance` is polled, and a queue moves slowly.
 */
export function provisionProgressEvents(
  context: Pick<PoolContext, "hub" | "id">,
  provider: string,
): ProvisionProgress {
  const said = new Map<string, string>();
  return (report, instanceId) => {
    const step = `${instanceId ?? ""}\u0000${report.phase}`;
    const saying = `${report.status}\u0000${report.detail ?? ""}`;
    if (said.get(step) === saying) return;
    said.set(step, saying);
    context.hub.emit({
      type: "provision.progress",
      timestamp: Date.now(),
      poolId: context.id,
      provider,
      ...(instanceId !== undefined ? { instanceId } : {}),
      phase: report.phase,
      status: report.status,
      ...(report.detail !== undefined ? { detail: report.detail } : {}),
    });
  };
}

/**
 * Provisions `count` instances of `cluster` and waits until they run; on failure, what was
 * provisioned is terminated. A `NoCapacityError` lists every attempt. `billing` is told of each
 * instance as the provider returns it (it costs from then on) and as it is terminated.
 */
export async function provisionInstances(
  provider: Provider,
  cluster: Cluster,
  spec: ProvisionSettings,
  count: number,
  signal: AbortSignal,
  progress?: ProvisionProgress,
  billing?: InstanceBilling,
): Promise<Instance[]> {
  const instances: Instance[] = [];
  const attempts: ProvisionAttempt[] = [];
  // Given up (the pool closed, the caller's signal): what was made so far goes too, or it bills on.
  const abandon = async (): Promise<never> => {
    if (instances.length > 0) await terminateQuietly(provider, cluster, instances, billing);
    throw abortError(signal, "Provisioning");
  };
  for (let attempt = 1; instances.length < count; attempt += 1) {
    if (signal.aborted) await abandon();
    try {
      const created = await provider.provision({
        cluster,
        count: count - instances.length,
        signal,
        ...(progress ? { progress: (report: ProgressReport) => progress(report) } : {}),
      });
      billing?.created(created, cluster.offer);
      instances.push(...created);
    } catch (error) {
      if (signal.aborted) await abandon();
      attempts.push(
        ...attemptsOf(error, {
          provider: provider.name,
          offer: cluster.offer.instanceType,
          region: cluster.offer.region,
        }),
      );
      if (
        attempt >= spec.maxProvisionAttempts ||
        (ProvisionError.isInstance(error) && !error.isRetryable && !NoCapacityError.isInstance(error))
      ) {
        // What was made goes; a terminate that fails is said with the error, not instead of it (a
        // start tries the next offer on a capacity error, and stops on any other).
        const left =
          instances.length > 0 ? await terminateOrSay(provider, cluster, instances, billing) : undefined;
        if (NoCapacityError.isInstance(error) || attempt >= spec.maxProvisionAttempts) {
          if (left)
            attempts.push({
              provider: provider.name,
              offer: cluster.offer.instanceType,
              region: cluster.offer.region,
              reason: left,
            });
          throw new NoCapacityError({ attempts, cause: error });
        }
        if (!left) throw error;
        throw new ProvisionError({
          provider: provider.name,
          isRetryable: (error as ProvisionError).isRetryable,
          message: `${(error as Error).message}; ${left}`,
          cause: error,
        });
      }
      // Cut short by an abort: the next turn gives up what was made.
      await sleep(spec.provisionRetryDelay * 1000, undefined, { signal }).catch(() => undefined);
    }
  }
  try {
    return await waitUntilRunning(provider, cluster, spec.provisionTimeout, instances, signal, progress);
  } catch (error) {
    await terminateQuietly(provider, cluster, instances, billing);
    throw error;
  }
}

/**
 * Polls `getInstance` until every instance runs and can be reached (an SSH address, or a provider
 * that starts workers itself), within `timeoutSeconds`.
 */
async function waitUntilRunning(
  provider: Provider,
  cluster: Cluster,
  timeoutSeconds: number,
  instances: Instance[],
  signal: AbortSignal,
  progress: ProvisionProgress | undefined,
): Promise<Instance[]> {
  const reachable = (instance: Instance) => instance.status === "running";
  const deadline = performance.now() + timeoutSeconds * 1000;
  let interval = 1000;
  const current = [...instances];
  while (!current.every(reachable)) {
    if (signal.aborted) throw abortError(signal, "Waiting for instances");
    if (performance.now() > deadline) {
      const waiting = current
        .filter((instance) => !reachable(instance))
        .map((instance) => `${instance.id} (${instance.status})`);
      throw new ProvisionError({
        provider: provider.name,
        isRetryable: true,
        message: `Instances not running with an address within ${timeoutSeconds} s: ${waiting.join(", ")}`,
      });
    }
    // Cut short by an abort (the pool closing): the loop's top gives up at once.
    await pause(interval, signal);
    interval = Math.min(interval * 1.5, 5000);
    for (const [index, instance] of current.entries()) {
      if (reachable(instance)) continue;
      const latest = await provider.getInstance({
        cluster,
        id: instance.id,
        signal,
        ...(progress ? { progress: (report: ProgressReport) => progress(report, instance.id) } : {}),
      });
      if (latest === null || latest.status === "terminated" || latest.status === "stopping") {
        throw new ProvisionError({
          provider: provider.name,
          isRetryable: true,
          message: `Instance ${instance.id} went away while starting (${latest?.status ?? "gone"})`,
        });
      }
      current[index] = latest;
    }
  }
  return current;
}

/** Resolves after `ms`, or as soon as `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/** Terminates `instances`, within a minute; says why when that fails (they may bill on), else undefined. */
async function terminateOrSay(
  provider: Provider,
  cluster: Cluster,
  instances: readonly Instance[],
  billing: InstanceBilling | undefined,
): Promise<string | undefined> {
  const ids = instances.map((instance) => instance.id);
  try {
    await provider.terminate({ cluster, ids, signal: AbortSignal.timeout(60_000) });
    billing?.terminated(ids);
    return undefined;
  } catch (error) {
    return `terminating ${ids.join(", ")} failed: ${(error as Error)?.message ?? String(error)}; ${ids.length === 1 ? "it" : "they"} may still run`;
  }
}

/**
 * Terminates `instances`, within a minute, ignoring failure (they are being given up anyway); once
 * terminated, `billing` stops counting them (after a failed terminate they may still bill: it counts on).
 */
export async function terminateQuietly(
  provider: Provider,
  cluster: Cluster,
  instances: readonly Instance[],
  billing?: InstanceBilling,
): Promise<void> {
  const ids = instances.map((instance) => instance.id);
  await provider.terminate({ cluster, ids, signal: AbortSignal.timeout(60_000) }).then(
    () => billing?.terminated(ids),
    () => undefined,
  );
}
