/**
 * What a pool costs: each instance's hourly price (from its offer) times how long the pool has held
 * it, from the moment the provider created it (billing starts there on most clouds) until it was
 * terminated. Nodes are kept from the pool's own events (`node.provisioned`, `node.destroyed`,
 * `pool.destroyed`: a replaced node's lost instance is destroyed and its new one provisioned), so
 * every path that adds or removes a node is counted without the meter being called from it. An
 * instance is created before it is a node — while it starts, or asked for at an interruption notice
 * and taken only once the old node drained — and may never become one (it did not start in time, or
 * went away): provisioning tells the meter of those itself ({@link InstanceBilling}).
 */
import type { Instance, Offer } from "../contract/types.js";
import type { EventHub } from "../observe/events.js";

/** One node's share of a pool's cost, as {@link PoolCost} lists it. */
export interface NodeCost {
  /** The node's index in the pool. */
  readonly node: number;
  /** The instance it runs on now. */
  readonly instanceId: string;
  /** Its price, USD per hour. */
  readonly hourlyPrice: number;
  /** When the pool got this instance, milliseconds since the epoch. */
  readonly since: number;
  /** What this instance has cost so far, USD. */
  readonly total: number;
}

/** A pool's cost at one moment: `pool.cost()`. Estimates from the offers' prices, not a bill. */
export interface PoolCost {
  /** Always `"USD"`. */
  readonly currency: "USD";
  /** What the pool's instances cost together now, USD per hour. */
  readonly hourlyRate: number;
  /** What the pool has cost so far, USD: its current instances and those it has let go of. */
  readonly total: number;
  /** Its instances running now, by node. */
  readonly nodes: readonly NodeCost[];
}

/**
 * The hourly price of an instance: the provider's own, else the offer's price for the kind of
 * capacity it got (spot or on-demand), else the offer's other price; 0 when none is known.
 */
export function instanceHourlyPrice(
  instance: Pick<Instance, "hourlyPrice" | "spot">,
  offer: Pick<Offer, "spotPrice" | "onDemandPrice">,
): number {
  if (instance.hourlyPrice !== null) return instance.hourlyPrice;
  const [first, second] = instance.spot
    ? [offer.spotPrice, offer.onDemandPrice]
    : [offer.onDemandPrice, offer.spotPrice];
  return first ?? second ?? 0;
}

interface Running {
  /** Its node; undefined while it is not one yet (starting, or a replacement waiting for its node). */
  readonly node: number | undefined;
  readonly instanceId: string;
  readonly hourlyPrice: number;
  readonly since: number;
}

/**
 * What provisioning tells the meter of instances that are not nodes (yet): each one created, from
 * the moment the provider returned it, and each one it terminated.
 */
export interface InstanceBilling {
  /** `instances` of `offer` were created at the provider at `at`: they cost from then on. */
  created(
    instances: readonly Pick<Instance, "id" | "hourlyPrice" | "spot">[],
    offer: Pick<Offer, "spotPrice" | "onDemandPrice">,
    at?: number,
  ): void;
  /** Instances `ids` were terminated at `at` (a terminate that failed is not said: they may bill on). */
  terminated(ids: readonly string[], at?: number): void;
}

const MS_PER_HOUR = 3_600_000;

/** Accrues a pool's cost from its events; see the module comment. */
export class CostMeter {
  readonly #running = new Map<string, Running>();
  readonly #listeners = new Set<() => void>();
  /** USD accrued by instances already let go of. */
  #ended = 0;

  /** Follows the pool's events on `hub` until the returned function is called. */
  observe(hub: EventHub): () => void {
    const offs = [
      hub.on("node.provisioned", (event) =>
        this.start(event.node, event.instanceId, event.hourlyPrice ?? 0, event.timestamp),
      ),
      hub.on("node.destroyed", (event) => this.stop(event.instanceId, event.timestamp)),
      hub.on("pool.destroyed", (event) => this.stopAll(event.timestamp)),
    ];
    return () => {
      for (const off of offs) off();
    };
  }

  /**
   * Adds `amount` USD spent before this meter started: what a detached pool had cost, carried over
   * to the pool that attaches it.
   */
  carry(amount: number): void {
    if (!(amount > 0)) return;
    this.#ended += amount;
    this.#changed();
  }

  /** Calls `listener` whenever the hourly rate changes; returns a function that stops it. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Instance `instanceId` of node `node` costs `hourlyPrice` USD per hour from `at` on; one already
   * billed since its creation ({@link billing}) keeps its start, and is the node's from now on.
   */
  start(node: number, instanceId: string, hourlyPrice: number, at: number = Date.now()): void {
    const created = this.#running.get(instanceId);
    if (created?.node !== undefined) return;
    this.#running.set(instanceId, { node, instanceId, hourlyPrice, since: created?.since ?? at });
    this.#changed();
  }

  /** How provisioning tells this meter of the instances it creates and terminates. */
  billing(): InstanceBilling {
    return {
      created: (instances, offer, at = Date.now()) => {
        let added = false;
        for (const instance of instances) {
          if (this.#running.has(instance.id)) continue;
          const hourlyPrice = instanceHourlyPrice(instance, offer);
          this.#running.set(instance.id, {
            node: undefined,
            instanceId: instance.id,
            hourlyPrice,
            since: at,
          });
          added = true;
        }
        if (added) this.#changed();
      },
      terminated: (ids, at = Date.now()) => {
        for (const id of ids) this.stop(id, at);
      },
    };
  }

  /** Instance `instanceId` costs nothing from `at` on (terminated). */
  stop(instanceId: string, at: number = Date.now()): void {
    const running = this.#running.get(instanceId);
    if (!running) return;
    this.#running.delete(instanceId);
    this.#ended += accrued(running, at);
    this.#changed();
  }

  /** Every instance stops costing at `at` (the pool is gone). */
  stopAll(at: number = Date.now()): void {
    if (this.#running.size === 0) return;
    for (const running of this.#running.values()) this.#ended += accrued(running, at);
    this.#running.clear();
    this.#changed();
  }

  /** USD per hour, all running instances together. */
  get hourlyRate(): number {
    let rate = 0;
    for (const running of this.#running.values()) rate += running.hourlyPrice;
    return rate;
  }

  /** USD so far, at `now`. */
  total(now: number = Date.now()): number {
    let total = this.#ended;
    for (const running of this.#running.values()) total += accrued(running, now);
    return total;
  }

  /** The pool's cost at `now` (instances not a node yet count in its rate and total, not its `nodes`). */
  snapshot(now: number = Date.now()): PoolCost {
    const nodes = [...this.#running.values()]
      .filter((running): running is Running & { node: number } => running.node !== undefined)
      .map((running) => ({ ...running, total: accrued(running, now) }))
      .sort((a, b) => a.node - b.node);
    return { currency: "USD", hourlyRate: this.hourlyRate, total: this.total(now), nodes };
  }

  #changed(): void {
    for (const listener of [...this.#listeners]) listener();
  }
}

function accrued(running: Running, at: number): number {
  return (running.hourlyPrice * Math.max(0, at - running.since)) / MS_PER_HOUR;
}
