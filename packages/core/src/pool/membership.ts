/**
 * The node set of a started pool: the nodes present, the indices pending (being provisioned, or
 * awaiting a new start), growth under way and nodes retiring; the reconcile loop that grows and
 * shrinks it toward the desired size, and the waiters of `resize`.
 */
import type { Instance, Offer, Provider } from "../contract/provider.js";
import { offerFormFactorFit, offerQuery } from "../contract/provider.js";
import { Autoscaler } from "./autoscale.js";
import { retellCluster } from "./cluster-retell.js";
import { instanceHourlyPrice } from "./cost.js";
import { createNodeWatchers, type PoolNodeWatchers } from "./node-loss.js";
import { collectionsNodeGone, startNode } from "./node-start.js";
import {
  isClosing,
  type NodeRuntime,
  newNode,
  type PoolContext,
  placement,
  reportError,
  slotsPerNode,
} from "./pool-context.js";
import { provisionInstances, provisionProgressEvents, terminateQuietly } from "./provision.js";
import { Reconciler } from "./reconcile.js";
import { terminateInstancesOf } from "./shutdown.js";

/** A caller of `resize` waiting for the pool to reach its target. */
export interface SizeWaiter {
  check(): void;
  fail(error: Error): void;
}

/** The pool's node set and how it changes. */
export class Membership {
  readonly #context: PoolContext;
  readonly #watchers: PoolNodeWatchers;
  /** The node count the pool aims at, and the bounds autoscaling and `resize` keep to. */
  desired = 0;
  bounds: { min: number; max: number } = { min: 0, max: 0 };
  /** Instances being provisioned for growth, not yet in the node set. */
  #growing = 0;
  /** Nodes being stopped and terminated (scale-down, failed starts). */
  retiring = 0;
  /** Growth and scale-down under way, awaited on shutdown. */
  readonly #background = new Set<Promise<void>>();
  readonly #sizeWaiters = new Set<SizeWaiter>();
  #reconciler: Reconciler | undefined;
  #autoscaler: Autoscaler | undefined;
  #lastPoke = 0;
  /** Growth failures in a row, and no new growth before this time (`performance.now()`): a backoff. */
  #growthFailures = 0;
  #growthPausedUntil = 0;
  /** When the reconcile loop last read the nodes' instances from the provider (`performance.now()`). */
  #instancesCheckedAt = performance.now();
  /** A target `resize` set that the pool has not reached yet: until it has, idleness shrinks nothing. */
  #explicitTarget: number | undefined;
  /** Idle time counts from here at the earliest: when the last explicit target was reached. */
  #idleFloor = 0;

  constructor(context: PoolContext) {
    this.#context = context;
    this.#watchers = createNodeWatchers(context, this);
  }

  /** Nodes the pool has or is getting: ready, starting, being replaced, being provisioned. */
  actualNodes(): number {
    return this.#context.nodes.length + this.#growing;
  }

  /** Indices awaiting a new start. */
  #awaiting(): number {
    let count = 0;
    for (const state of this.#context.pending.values()) if (state === "awaiting") count += 1;
    return count;
  }

  /** Starts a node of the set (see {@link startNode}), watched for interruption, loss and health. */
  startNode(node: NodeRuntime, signal: AbortSignal): Promise<void> {
    return startNode(this.#context, node, signal, this.#watchers);
  }

  /** Provisions `count` instances of the pool's cluster (see {@link provisionInstances}). */
  provision(count: number, signal: AbortSignal): Promise<Instance[]> {
    const { provider, cluster } = placement(this.#context);
    return provisionInstances(
      provider,
      cluster,
      this.#context.spec,
      count,
      signal,
      provisionProgressEvents(this.#context, provider.name),
      this.#context.billing,
    );
  }

  /** Takes in a provisioned node: known to the task manager from now on (a broadcast covers it while it starts). */
  add(node: NodeRuntime, provider: Provider, offer: Offer): void {
    this.#context.nodes.push(node);
    this.#context.nodes.sort((a, b) => a.index - b.index);
    this.#context.tasks.expect(node.index);
    emitProvisioned(this.#context, node, provider, offer);
  }

  /** Announces the instance a node was given in place of a lost one (see {@link ReplacingMembership}). */
  provisioned(node: NodeRuntime): void {
    const { provider, cluster } = placement(this.#context);
    emitProvisioned(this.#context, node, provider, cluster.offer);
  }

  /** The pool is ready: the reconcile loop and the autoscaler run from now on. */
  startLoops(startedAt: number): void {
    const { options } = this.#context;
    this.#autoscaler = new Autoscaler(
      {
        cooldownMs: options.autoscaleCooldown * 1000,
        idleTimeoutMs: options.autoscaleIdleTimeout * 1000,
      },
      startedAt,
    );
    this.#reconciler = new Reconciler(
      () => this.#reconcile(),
      options.reconcileTickInterval * 1000,
      (error) => reportError(this.#context, "the reconcile loop failed", error),
    );
    // Nodes beyond `min` that failed while the pool came up are started again from here.
    if (this.#context.nodes.length < this.desired) this.#reconciler.poke();
  }

  /** Asks the reconcile loop to look now. */
  poke(): void {
    this.#reconciler?.poke();
  }

  /** Stops the reconcile loop; then waits for growth and scale-down under way. */
  async stop(): Promise<void> {
    this.sizeChanged();
    await this.#reconciler?.stop();
  }

  /**
   * Growth and replacements stop at the abort (what they made is then the nodes' or terminated);
   * nodes being retired finish (their instances terminated by then).
   */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#background]);
  }

  /** A task waits for a slot: with room to grow (or no node at all), the reconcile loop looks soon. */
  onQueued(): void {
    const reconciler = this.#reconciler;
    if (!reconciler) return;
    const empty = this.actualNodes() === 0;
    if (!empty && this.desired >= this.bounds.max) return;
    const now = performance.now();
    if (!empty && now - this.#lastPoke < 200) return;
    this.#lastPoke = now;
    reconciler.poke();
  }

  /** One step of the reconcile loop: the autoscaler's decision, then growth or shrinking toward it. */
  async #reconcile(): Promise<void> {
    const context = this.#context;
    if (context.state !== "ready") return;
    const { tasks, nodes, pending } = context;
    this.#settleExplicitTarget();
    const decision = this.#autoscaler?.decide(
      {
        actual: this.actualNodes(),
        starting: Math.max(0, this.actualNodes() - tasks.liveNodes),
        queued: tasks.queued,
        slotsPerNode: slotsPerNode(context),
        // The head is let go of only as the last node, so while others remain (or are still being
        // retired) its idleness counts for nothing.
        // An explicit target is reached first; then a node's idle time counts from when it became
        // ready or last worked, and from no earlier than when the target was reached.
        idleSince:
          this.#explicitTarget !== undefined
            ? []
            : tasks
                .idleNodes()
                .filter(([index]) => index !== 0 || (nodes.length === 1 && this.retiring === 0))
                .map(([, since]) => Math.max(since, this.#idleFloor)),
      },
      this.bounds,
      this.desired,
      performance.now(),
    );
    if (decision) this.setDesired(decision.to, decision.reason);
    const actual = this.actualNodes();
    // Indices awaiting a new start that the target no longer needs are given up (their tasks fail).
    let spare = actual + this.#awaiting() - this.desired;
    for (const [index, state] of [...pending].sort((a, b) => b[0] - a[0])) {
      if (spare <= 0) break;
      if (state !== "awaiting") continue;
      pending.delete(index);
      this.#watchers.givenUp(index);
      tasks.startFailed(index, "the pool's target no longer includes it", false);
      spare -= 1;
    }
    if (actual < this.desired && performance.now() >= this.#growthPausedUntil)
      this.#grow(this.desired - actual);
    else if (actual > this.desired) this.#shrink(actual - this.desired);
    this.sizeChanged();
    // Once per tick (not on every poke): the provider's view of the connected nodes' instances.
    const now = performance.now();
    if (now - this.#instancesCheckedAt >= context.options.reconcileTickInterval * 1000) {
      this.#instancesCheckedAt = now;
      await this.#watchers.checkInstances();
    }
  }

  /** `resize`'s target: reached before the idle rule may shrink the pool again. */
  setExplicitTarget(to: number): void {
    this.#explicitTarget = to;
    this.setDesired(to, "resize()");
  }

  /** Forgets an explicit target once the pool has it (or aims elsewhere), starting the idle clocks. */
  #settleExplicitTarget(): void {
    const target = this.#explicitTarget;
    if (target === undefined) return;
    const context = this.#context;
    const reached =
      context.tasks.liveNodes === target && this.actualNodes() === target && this.retiring === 0;
    if (!reached && this.desired === target) return;
    this.#explicitTarget = undefined;
    this.#idleFloor = performance.now();
  }

  setDesired(to: number, reason: string): void {
    if (to === this.desired) return;
    const context = this.#context;
    context.hub.emit({
      type: "scaling",
      timestamp: Date.now(),
      poolId: context.id,
      from: this.desired,
      to,
      reason,
    });
    this.desired = to;
  }

  /** Work under way that shutdown waits for ({@link settled}): growth, scale-down, replacements. */
  track(work: Promise<void>): void {
    this.#background.add(work);
    void work.finally(() => this.#background.delete(work));
  }

  /** Provisions `count` more nodes and starts them, each under the lowest free index. */
  #grow(count: number): void {
    const context = this.#context;
    const { provider, cluster } = placement(context);
    const { pending, tasks } = context;
    // Indices awaiting a new start first, then the lowest free ones.
    const indices = [...pending]
      .filter(([, state]) => state === "awaiting")
      .map(([index]) => index)
      .sort((a, b) => a - b)
      .slice(0, count);
    const used = new Set([...context.nodes.map((node) => node.index), ...pending.keys()]);
    for (let next = 0; indices.length < count; next += 1) if (!used.has(next)) indices.push(next);
    for (const index of indices) {
      pending.set(index, "provisioning");
      // Known to the task manager from now on: a broadcast covers it while it starts.
      tasks.expect(index);
    }
    this.#growing += count;
    const signal = context.abort.signal;
    this.track(
      (async () => {
        let instances: Instance[];
        try {
          instances = await this.provision(count, signal);
        } catch (error) {
          this.#growing -= count;
          this.#growthFailed();
          reportError(context, `could not add ${count} node${count === 1 ? "" : "s"}`, error);
          for (const index of indices) this.#awaitStart(index, (error as Error)?.message ?? String(error));
          this.#sizeFailed(error as Error);
          return;
        }
        this.#growing -= count;
        if (signal.aborted) {
          for (const index of indices) pending.delete(index);
          await terminateQuietly(provider, cluster, instances, context.billing);
          return;
        }
        for (const [position, index] of indices.entries()) {
          const instance = instances[position];
          if (!instance) {
            this.#awaitStart(index, "the provider returned fewer instances than asked for");
            continue;
          }
          pending.delete(index);
          const node = newNode(index, instance);
          context.nodes.push(node);
          context.nodes.sort((a, b) => a.index - b.index);
          emitProvisioned(context, node, provider, cluster.offer);
          this.startNode(node, signal).then(
            () => {
              this.#watchers.started(node);
              this.#growthFailures = 0;
              this.#reconciler?.poke();
              this.sizeChanged();
            },
            (error) => this.dropNode(node, error),
          );
        }
      })(),
    );
  }

  /**
   * Retires up to `count` idle nodes, longest idle first; busy ones wait for a later step. The head
   * goes only as the last node (scaling to zero), once the others are gone — not while one is still
   * being retired: the others' cluster settings name its address.
   */
  #shrink(count: number): void {
    const { nodes, tasks } = this.#context;
    let removed = 0;
    for (const [index] of tasks.idleNodes()) {
      if (removed >= count) break;
      if (index === 0 && (nodes.length > 1 || this.retiring > 0)) continue;
      const node = nodes.find((candidate) => candidate.index === index);
      if (!node || !tasks.remove(index)) continue;
      removed += 1;
      nodes.splice(nodes.indexOf(node), 1);
      this.track(this.#retire(node));
    }
    // The nodes that stay learn the pool's new membership.
    if (removed > 0) retellCluster(this.#context);
  }

  /** Stops an idle node's worker and has the provider terminate its instance. */
  async #retire(node: NodeRuntime): Promise<void> {
    node.retiring = true;
    this.retiring += 1;
    try {
      await this.#stopAndTerminate(node);
    } finally {
      this.retiring -= 1;
    }
    this.sizeChanged();
  }

  async #stopAndTerminate(node: NodeRuntime): Promise<void> {
    const context = this.#context;
    const connection = node.connection;
    node.connection = undefined;
    if (connection?.isOpen) {
      connection.sendIfOpen({ t: "shutdown" });
      await connection.close({ timeoutMs: 5000 });
    }
    collectionsNodeGone(context, node.index);
    node.endpoint?.close?.();
    node.endpoint = undefined;
    // An instance asked for after an interruption notice goes too: the node it was for is let go.
    const asked = await node.nextInstance?.then((instance) => instance.id).catch(() => undefined);
    node.nextInstance = undefined;
    await terminateNode(context, node, asked);
  }

  /** Growth failed: the next attempt waits a tick, doubling with each failure in a row, up to 5 minutes. */
  #growthFailed(): void {
    const tick = this.#context.options.reconcileTickInterval * 1000;
    this.#growthPausedUntil = performance.now() + Math.min(tick * 2 ** this.#growthFailures, 300_000);
    this.#growthFailures += 1;
  }

  /** A node that failed to start: reported, taken out of the pool, its instance terminated. */
  dropNode(node: NodeRuntime, error: unknown): void {
    const context = this.#context;
    if (isClosing(context)) return;
    this.#growthFailed();
    reportError(context, `node ${node.index} failed to start`, error, node.index);
    const position = context.nodes.indexOf(node);
    if (position >= 0) context.nodes.splice(position, 1);
    retellCluster(context);
    // Tasks pinned to it (a broadcast's parts) wait for the node the reconcile loop starts under its
    // index while the pool wants one, and fail otherwise.
    this.#awaitStart(
      node.index,
      `node ${node.index} failed to start: ${(error as Error)?.message ?? String(error)}`,
    );
    this.track(this.#retire(node));
    this.#sizeFailed(error as Error);
  }

  /**
   * Starting a node under `index` failed: while the pool wants more nodes it waits for the reconcile
   * loop's next growth (tasks pinned to it wait, within `provisionTimeout`); otherwise it is given up
   * and those tasks fail.
   */
  #awaitStart(index: number, reason: string): void {
    const again = this.actualNodes() + this.#awaiting() < this.desired;
    if (again) this.#context.pending.set(index, "awaiting");
    else {
      this.#context.pending.delete(index);
      this.#watchers.givenUp(index);
    }
    this.#context.tasks.startFailed(index, reason, again);
  }

  /** Waits, with `resize`, for the size to settle (`waiter.check`) or growth to fail. */
  addSizeWaiter(waiter: SizeWaiter): () => void {
    this.#sizeWaiters.add(waiter);
    return () => this.#sizeWaiters.delete(waiter);
  }

  sizeChanged(): void {
    for (const waiter of [...this.#sizeWaiters]) waiter.check();
  }

  #sizeFailed(error: Error): void {
    for (const waiter of [...this.#sizeWaiters]) waiter.fail(error);
  }
}

/** Terminates a node let go of (and the replacement `asked` for it), reporting a failure. */
async function terminateNode(
  context: PoolContext,
  node: NodeRuntime,
  asked: string | undefined,
): Promise<void> {
  try {
    await terminateInstancesOf(
      context,
      [node],
      asked !== undefined ? [asked] : [],
      AbortSignal.timeout(context.options.shutdownTimeout * 1000),
    );
  } catch (error) {
    reportError(context, `terminating node ${node.index} (${node.instance.id}) failed`, error, node.index);
  }
}

/** The `node.provisioned` event of a node just provisioned. */
function emitProvisioned(context: PoolContext, node: NodeRuntime, provider: Provider, offer: Offer): void {
  const { instance } = node;
  const asked = context.spec.accelerator?.formFactor;
  context.hub.emit({
    type: "node.provisioned",
    timestamp: Date.now(),
    poolId: context.id,
    node: node.index,
    instanceId: instance.id,
    provider: provider.name,
    instanceType: offer.instanceType,
    spot: instance.spot,
    region: offer.region,
    accelerator: offer.accelerator
      ? `${offer.accelerator.count}x ${offer.accelerator.name}${offer.accelerator.formFactor === undefined ? "" : ` ${offer.accelerator.formFactor}`}`
      : null,
    ...(asked !== undefined && offerFormFactorFit(offer, offerQuery(context.spec)) === "unknown"
      ? { unverifiedFormFactor: asked }
      : {}),
    hourlyPrice: instanceHourlyPrice(instance, offer),
    publicIp: instance.publicIp,
    privateIp: instance.privateIp,
  });
}
