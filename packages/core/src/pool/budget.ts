/**
 * The budget watchdog: from a {@link CostMeter} and `options.budget`, calls back once when the total
 * reaches the warning amount and once when it reaches the maximum. The total grows linearly between
 * two changes of the hourly rate, so the watchdog sleeps exactly until the next amount is due (at most
 * a minute at a time) and plans again whenever the rate changes.
 */
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
