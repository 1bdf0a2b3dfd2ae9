/**
 * The autoscaler's decisions, as pure functions of what the pool looks like now: grow on queued-task
 * pressure within `max` (after a cooldown, counted from the pool's start too), shrink nodes idle for
 * `autoscaleIdleTimeout` down to `min`. The reconcile loop ({@link Reconciler}) asks and acts.
 */

/** The bounds autoscaling keeps to. */
export interface ScaleBounds {
  readonly min: number;
  readonly max: number;
}

/** What the pool looks like when the autoscaler is asked. */
export interface PoolLoad {
  /** Nodes the pool has: ready, starting, or being replaced. */
  readonly actual: number;
  /** Of those, the ones not ready yet: the queue is theirs first, so it is no reason to grow further. */
  readonly starting: number;
  /** Tasks waiting for a slot on any node (not pinned, not prefetched onto a node). */
  readonly queued: number;
  /** Tasks one node runs at once (its worker concurrency). */
  readonly slotsPerNode: number;
  /** For each ready node with nothing running or waiting on it: since when (ms, `performance.now()`). */
  readonly idleSince: readonly number[];
}

/** The autoscaler's timing settings, in milliseconds. */
export interface AutoscaleSettings {
  readonly cooldownMs: number;
  readonly idleTimeoutMs: number;
}

/** A change of the pool's target size and why. */
export interface ScaleDecision {
  readonly to: number;
  readonly reason: string;
}

/** Decides the pool's target size from its load; remembers when it last grew, for the cooldown. */
export class Autoscaler {
  readonly #settings: AutoscaleSettings;
  #lastGrowth: number;

  /** `now` is the pool's start: the cooldown counts from there too. */
  constructor(settings: AutoscaleSettings, now: number) {
    this.#settings = settings;
    this.#lastGrowth = now;
  }

  /**
   * The new target, or undefined to keep `desired`. Growth: `min(max, actual + ceil(pressure / slots))`
   * once the cooldown has passed, where the pressure is the queued tasks less the slots of nodes
   * still starting — at once when no node is left at all (scale from zero). Shrinking:
   * with nothing queued, by the number of nodes idle for the idle timeout, never below `min`.
   */
  decide(load: PoolLoad, bounds: ScaleBounds, desired: number, now: number): ScaleDecision | undefined {
    const { cooldownMs, idleTimeoutMs } = this.#settings;
    if (load.queued > 0) {
      if (load.actual === 0 && desired === 0 && bounds.max >= 1) {
        this.#lastGrowth = now;
        return { to: Math.max(1, bounds.min), reason: `${describe(load.queued)} waiting and no node is up` };
      }
      if (now - this.#lastGrowth < cooldownMs) return undefined;
      const slots = Math.max(1, load.slotsPerNode);
      const pressure = load.queued - load.starting * slots;
      if (pressure <= 0) return undefined;
      const wanted = Math.min(bounds.max, Math.max(desired, load.actual + Math.ceil(pressure / slots)));
      if (wanted <= desired) return undefined;
      this.#lastGrowth = now;
      return { to: wanted, reason: `${describe(load.queued)} queued` };
    }
    const idle = load.idleSince.filter((since) => now - since >= idleTimeoutMs).length;
    if (idle === 0) return undefined;
    const wanted = Math.max(bounds.min, Math.min(desired, load.actual - idle));
    if (wanted >= desired) return undefined;
    return {
      to: wanted,
      reason: `${idle} node${idle === 1 ? "" : "s"} idle for ${seconds(idleTimeoutMs)}`,
    };
  }
}

function describe(count: number): string {
  return `${count} task${count === 1 ? "" : "s"}`;
}

function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}
