/**
 * The budget watchdog: from a {@link CostMeter} and `options.budget`, calls back once when the total
 * reaches the warning amount and once when it reaches the maximum. The total grows linearly between
 * two changes of the hourly rate, so the watchdog sleeps exactly until the next amount is due (at most
 * a minute at a time) and plans again whenever the rate changes.
 */
import { BudgetExceededError } from "../errors/errors.js";
import type { EventHub } from "../observe/events.js";
import type { Budget } from "../spec/options.js";
import type { CostMeter, PoolCost } from "./cost.js";

/** What the watchdog calls, each at most once. */
export interface BudgetCallbacks {
  /** The total reached `budget.warnAt`. */
  warning(cost: PoolCost): void;
  /** The total reached `budget.max`. */
  exceeded(cost: PoolCost): void;
}

const MS_PER_HOUR = 3_600_000;
/** The longest sleep between two looks: keeps clock changes and rounding from mattering. */
const MAX_SLEEP_MS = 60_000;

/** Watches `meter` against `budget` until {@link BudgetWatch.stop}. */
export class BudgetWatch {
  readonly #meter: CostMeter;
  readonly #budget: Budget;
  readonly #callbacks: BudgetCallbacks;
  readonly #offChange: () => void;
  #timer: NodeJS.Timeout | undefined;
  #warned = false;
  #done = false;

  constructor(meter: CostMeter, budget: Budget, callbacks: BudgetCallbacks) {
    this.#meter = meter;
    this.#budget = budget;
    this.#callbacks = callbacks;
    this.#offChange = meter.onChange(() => this.check());
    this.check();
  }

  /** Looks at the total now, calls back what is due, and plans the next look. */
  check(): void {
    if (this.#done) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const now = Date.now();
    const total = this.#meter.total(now);
    if (!this.#warned && total >= this.#budget.warnAt) {
      this.#warned = true;
      this.#callbacks.warning(this.#meter.snapshot(now));
    }
    if (total >= this.#budget.max) {
      this.stop();
      this.#callbacks.exceeded(this.#meter.snapshot(now));
      return;
    }
    const rate = this.#meter.hourlyRate;
    if (rate <= 0) return; // nothing accrues until the rate changes, which calls check again
    const next = this.#warned ? this.#budget.max : this.#budget.warnAt;
    const due = Math.ceil(((next - total) / rate) * MS_PER_HOUR) + 1;
    this.#timer = setTimeout(() => this.check(), Math.min(Math.max(due, 1), MAX_SLEEP_MS));
    // A budget alone never keeps the process alive: the pool's connections do while it runs.
    this.#timer.unref();
  }

  /** Stops watching. */
  stop(): void {
    this.#done = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#offChange();
  }
}

/**
 * A pool's budget: the watchdog over its cost, the `budget.warning` and `budget.exceeded` events,
 * and, once spent, the error its tasks and calls fail with.
 */
export class PoolBudget {
  readonly #watch: BudgetWatch | undefined;
  #spent: { budget: number; total: number } | undefined;

  /**
   * `spend` runs once, when the budget is spent while `live()` holds (the pool not going away): it
   * stops the pool's work and closes it. It may run before this constructor returns (a picked-up
   * pool whose budget ran out meanwhile).
   */
  constructor(
    meter: CostMeter,
    budget: Budget | null | undefined,
    events: { readonly hub: EventHub; readonly poolId: string },
    live: () => boolean,
    spend: (spent: PoolBudget) => void,
  ) {
    if (!budget) return;
    const { hub, poolId } = events;
    this.#watch = new BudgetWatch(meter, budget, {
      warning: (cost) =>
        hub.emit({
          type: "budget.warning",
          timestamp: Date.now(),
          poolId,
          total: cost.total,
          budget: budget.max,
          warnAt: budget.warnAt,
          hourlyRate: cost.hourlyRate,
        }),
      exceeded: (cost) => {
        if (this.#spent || !live()) return;
        this.#spent = { budget: budget.max, total: cost.total };
        hub.emit({
          type: "budget.exceeded",
          timestamp: Date.now(),
          poolId,
          total: cost.total,
          budget: budget.max,
          hourlyRate: cost.hourlyRate,
        });
        spend(this);
      },
    });
  }

  /** The error of a task (or of the pool, without `taskId`) once the budget is spent; undefined before. */
  error(taskId?: string): BudgetExceededError | undefined {
    const spent = this.#spent;
    return spent
      ? new BudgetExceededError({ ...spent, ...(taskId !== undefined ? { taskId } : {}) })
      : undefined;
  }

  /** Stops watching (the pool is shutting down). */
  stop(): void {
    this.#watch?.stop();
  }
}
