/**
 * Bringing a pool up: offers ranked, each candidate prepared (the plugins' image transforms and
 * worker layout) and provisioned until one works, then every node started at once; the pool is
 * ready when its minimum node count is.
 */
import {
  applyImageTransforms,
  resolveWorkerLayout,
  type WorkerLayout,
  workerModules,
} from "../contract/plugin.js";
import type { Cluster, Instance, Offer, Provider } from "../contract/provider.js";
import {
  attemptPlace,
  attemptsOf,
  ConfigurationError,
  NoCapacityError,
  ProvisionError,
} from "../errors/errors.js";
import { extendImage, type Image } from "../spec/image.js";
import type { Options } from "../spec/options.js";
import type { PoolSpec } from "../spec/spec.js";
import type { Membership } from "./membership.js";
import { rankOffers } from "./offers.js";
import { abortError, type NodeRuntime, newNode, type PoolContext, setPoolState } from "./pool-context.js";
import { freeLoopbackPort } from "./ports.js";
import { provisionInstances, provisionProgressEvents } from "./provision.js";

/** A candidate's spec, cluster, image and worker layout once the plugins have had their say. */
interface Shaped {
  readonly spec: PoolSpec;
  readonly cluster: Cluster;
  readonly image: Image;
  readonly layout: WorkerLayout;
}

/**
 * Applies the plugins to a prepared cluster: their image transforms (`options.bootstrapTimeout`
 * winning over theirs), their worker layout, their worker modules shipped with the code.
 */
async function shapeCluster(spec: PoolSpec, cluster: Cluster, options: Options): Promise<Shaped> {
  let transformed = await applyImageTransforms(spec.plugins, spec.image, cluster);
  // A plugin may replace the image's bootstrapTimeout (extendImage); options.bootstrapTimeout, when
  // given, wins. The effective value is the pool's deadline, the bootstrap script's and the one
  // providers read from the cluster's spec at provision (boot watchdogs).
  const bootstrapTimeout = options.bootstrapTimeout ?? transformed.bootstrapTimeout;
  if (transformed.bootstrapTimeout !== bootstrapTimeout)
    transformed = extendImage(transformed, { bootstrapTimeout });
  if (spec.bootstrapTimeout !== bootstrapTimeout) {
    spec = Object.freeze({ ...spec, bootstrapTimeout });
    cluster = Object.freeze({ ...cluster, spec });
  }
  // The plugin that sets workersPerNode (MIG: one worker per GPU instance) decides; 1 otherwise.
  const layout = resolveWorkerLayout(spec.plugins, cluster);
  const { concurrency } = spec.worker;
  if (layout.processPerWorker && concurrency > 1 && concurrency !== layout.workersPerNode) {
    // Each worker process is one rank on one device: more task slots would be ranks twice over.
    throw new ConfigurationError({
      issues: [
        {
          path: "options.worker.concurrency",
          message: `expected 1 (or ${layout.workersPerNode}, the workers per node) with one worker per accelerator, received ${concurrency}`,
        },
      ],
    });
  }
  if (!spec.worker.reuseProcesses && !layout.processPerWorker && spec.worker.executor === "thread") {
    // Threads are never "reused" or not: accepted, the option would be ignored.
    throw new ConfigurationError({
      issues: [
        {
          path: "options.worker.reuseProcesses",
          message:
            'applies only to tasks run in subprocesses (executor: "process"); here tasks run in threads of the worker: remove it, or set executor: "process"',
        },
      ],
    });
  }
  // Plugins' worker modules travel with the code: they land in the work directory, on sys.path.
  const modulePaths = workerModules(spec.plugins)
    .map((module) => module.path)
    .filter((path): path is string => path !== undefined && !transformed.includes.includes(path));
  const image = modulePaths.length > 0 ? extendImage(transformed, { includes: modulePaths }) : transformed;
  return { spec, cluster, image, layout };
}

/** Tears a candidate's cluster down, within two minutes, ignoring failure (it is being given up). */
async function tearDownQuietly(provider: Provider, cluster: Cluster): Promise<void> {
  await provider.teardown({ cluster, signal: AbortSignal.timeout(120_000) }).catch(() => undefined);
}

/** What {@link provisionPool} settled on. */
interface Chosen {
  readonly spec: PoolSpec;
  readonly provider: Provider;
  readonly offer: Offer;
  readonly cluster: Cluster;
  readonly instances: Instance[];
}

/** Tries the ranked offers in turn until one is prepared and provisioned. */
async function provisionPool(
  context: PoolContext,
  specs: readonly PoolSpec[],
  defaultProvider: () => Provider,
  signal: AbortSignal,
): Promise<Chosen> {
  const { options, hub } = context;
  const withSettings = (spec: PoolSpec) =>
    Object.freeze({ ...spec, shutdownTimeoutSeconds: options.shutdownTimeout });
  // Offers from every spec, best first; when one fails to prepare or provision, the next is tried.
  const { candidates, attempts } = await rankOffers(
    specs,
    { defaultProvider, selection: options.selection },
    signal,
  );
  for (const candidate of candidates) {
    const { provider, offer } = candidate;
    context.spec = withSettings(candidate.spec);
    let cluster: Cluster | undefined;
    try {
      cluster = await provider.prepare({ spec: candidate.spec, offer, signal, poolId: context.id });
      const shaped = await shapeCluster(candidate.spec, cluster, options);
      cluster = shaped.cluster;
      context.spec = withSettings(shaped.spec);
      context.layout = shaped.layout;
      context.image = shaped.image;
      setPoolState(context, "provisioning");
      const instances = await provisionInstances(
        provider,
        cluster,
        context.spec,
        shaped.spec.nodes.desired,
        signal,
        provisionProgressEvents(context, provider.name),
        context.billing,
      );
      return { spec: shaped.spec, provider, offer, cluster, instances };
    } catch (error) {
      if (signal.aborted) {
        // The pool is not started yet, so its shutdown knows no cluster to tear down: done here.
        if (cluster) await tearDownQuietly(provider, cluster);
        throw abortError(signal, "Provisioning the pool");
      }
      // A plugin's transform failing, or bad input, is not a capacity problem: no other offer helps.
      if (!ProvisionError.isInstance(error) && !NoCapacityError.isInstance(error)) {
        if (cluster) await tearDownQuietly(provider, cluster);
        throw error;
      }
      // A NoCapacityError (the provider's, or provisioning's) brings its attempts: listed once each,
      // not its message inside ours.
      const place = { provider: provider.name, offer: offer.instanceType, region: offer.region };
      const failed = attemptsOf(error, place);
      attempts.push(...failed);
      hub.emit({
        type: "error",
        timestamp: Date.now(),
        poolId: context.id,
        message: `${attemptPlace(place)} failed: ${failed.map((attempt) => attempt.reason).join("; ")}; trying the next offer`,
        cause: error,
      });
      if (cluster) await tearDownQuietly(provider, cluster);
    }
  }
  throw new NoCapacityError({ attempts });
}

/**
 * Provisions the pool and starts its nodes; resolves once `min` of them (at least one) are ready,
 * the others joining as they come. The caller has set the state to "requesting". Tracked as
 * `context.provisioning` (a shutdown waits for it).
 */
export function provisionAndStart(
  context: PoolContext,
  membership: Membership,
  specs: readonly PoolSpec[],
  defaultProvider: () => Provider,
  signal: AbortSignal,
): Promise<{ spec: PoolSpec; cluster: Cluster }> {
  const started = provisionAndStartNodes(context, membership, specs, defaultProvider, signal);
  context.provisioning = started.then(
    () => undefined,
    () => undefined,
  );
  return started;
}

async function provisionAndStartNodes(
  context: PoolContext,
  membership: Membership,
  specs: readonly PoolSpec[],
  defaultProvider: () => Provider,
  signal: AbortSignal,
): Promise<{ spec: PoolSpec; cluster: Cluster }> {
  const { spec, provider, offer, cluster, instances } = await provisionPool(
    context,
    specs,
    defaultProvider,
    signal,
  );
  context.provider = provider;
  context.cluster = cluster;
  for (const [index, instance] of instances.entries())
    membership.add(newNode(index, instance), provider, offer);
  // Nodes on this machine share its loopback address: the head's services need a free port there.
  const local = instances.every((instance) => instance.privateIp?.startsWith("127.") === true);
  if (local) context.headPort = await freeLoopbackPort();
  membership.desired = spec.nodes.desired;
  membership.bounds = { min: spec.nodes.min, max: spec.nodes.max };
  // Partial readiness: the pool is usable once `min` nodes are (at least one); the rest join as they come.
  const readyAt = Math.min(spec.nodes.desired, Math.max(1, spec.nodes.min));
  // The caller's signal gives the start up only until the pool is ready: nodes still starting then
  // (beyond `min`) go on under the pool's own, or they would be started twice.
  const untilReady = new AbortController();
  const giveUp = () => untilReady.abort(signal.reason);
  if (signal.aborted) giveUp();
  else signal.addEventListener("abort", giveUp, { once: true });
  const nodeSignal = AbortSignal.any([untilReady.signal, context.abort.signal]);
  try {
    // Every node starts at once: the head's address (what the others need of it) is its private
    // address, known from provisioning, so no node waits for another's bootstrap.
    const head = context.nodes[0] as NodeRuntime;
    const headStarted = membership.startNode(head, nodeSignal);
    // Observed below; this keeps a failure of the head from going unhandled while the others start.
    headStarted.catch(() => undefined);
    const others = context.nodes.slice(1);
    const enough = waitForNodes(membership, context, readyAt, headStarted, others, nodeSignal);
    enough.catch(() => undefined);
    await headStarted;
    await enough;
  } finally {
    signal.removeEventListener("abort", giveUp);
  }
  return { spec, cluster };
}

/**
 * Starts `others` (the head is started by the caller) and resolves once `minimum` nodes are ready;
 * rejects with the first failure once too few are left to get there. A node that fails is dropped
 * (its instance terminated); the reconcile loop starts another once the pool is ready.
 */
function waitForNodes(
  membership: Membership,
  context: PoolContext,
  minimum: number,
  head: Promise<void>,
  others: readonly NodeRuntime[],
  signal: AbortSignal,
): Promise<void> {
  const tasks = context.tasks;
  let starting = others.length + 1;
  let failure: unknown;
  return new Promise<void>((resolve, reject) => {
    const check = () => {
      if (tasks.liveNodes >= minimum) resolve();
      else if (failure !== undefined && tasks.liveNodes + starting < minimum) reject(failure);
    };
    const settled = (error?: unknown) => {
      starting -= 1;
      if (error !== undefined) failure ??= error;
      check();
    };
    // The head's failure is the caller's to report; here it only stops counting as starting.
    head.then(
      () => settled(),
      (error) => settled(error),
    );
    for (const node of others) {
      membership.startNode(node, signal).then(
        () => settled(),
        (error) => {
          membership.dropNode(node, error);
          settled(error);
        },
      );
    }
    check();
  });
}
