import { z } from "zod";
import { parseInput } from "../errors/validation.js";

const positiveSeconds = z
  .number({ error: "expected a number of seconds" })
  .refine((value) => Number.isFinite(value) && value > 0, { message: "expected a number of seconds > 0" });
const nonNegativeSeconds = z
  .number({ error: "expected a number of seconds" })
  .refine((value) => Number.isFinite(value) && value >= 0, { message: "expected a number of seconds >= 0" });
const positiveInteger = z
  .number()
  .int({ message: "expected an integer" })
  .min(1, { message: "expected an integer >= 1" });
const nonNegativeInteger = z
  .number()
  .int({ message: "expected an integer" })
  .min(0, { message: "expected an integer >= 0" });

/** How tasks run inside each node's worker. */
export interface WorkerInput {
  /** Concurrent task slots per node. Default 1. */
  concurrency?: number;
  /**
   * Tasks sent to each node beyond its concurrency, so short tasks never wait on a round trip: a
   * fixed count, or `"auto"` (default) — measured per node from task durations: deep prefetch while
   * tasks are short (up to 64 per slot), none while they are long, so long tasks spread evenly;
   * plus, for a node far from the client, as many as it works through in the measured round trip
   * (up to 2,048 more per node), so a far link does not starve it. A task that may not run again
   * if its node is lost (`withRetry(false)`, retries used up) is never sent ahead: it waits in the
   * client for a free slot, so a node lost before it started cannot fail it.
   */
  buffer?: number | "auto";
  /** `"auto"` (→ `"thread"`), `"thread"` or `"process"`. Default `"auto"`. */
  executor?: "auto" | "thread" | "process";
  /**
   * With `executor: "process"` (or a plugin running one process per accelerator): reuse subprocesses
   * (true) or start a fresh one per task. Default true. `false` where tasks run in threads is refused.
   */
  reuseProcesses?: boolean;
}

/** The resolved worker settings: every field present, `executor` no longer `"auto"`. */
export interface Worker {
  readonly concurrency: number;
  readonly buffer: number | "auto";
  readonly executor: "thread" | "process";
  readonly reuseProcesses: boolean;
}

/** Validates worker input and fills in the reference's defaults. */
export const workerSchema = z
  .strictObject({
    concurrency: positiveInteger.default(1),
    buffer: z
      .union([nonNegativeInteger, z.literal("auto", { message: 'expected an integer >= 0 or "auto"' })], {
        message: 'expected an integer >= 0 or "auto"',
      })
      .default("auto"),
    executor: z
      .enum(["auto", "thread", "process"], { message: 'expected "auto", "thread" or "process"' })
      .default("auto"),
    reuseProcesses: z.boolean().default(true),
  })
  .transform(
    (value): Worker =>
      Object.freeze({
        concurrency: value.concurrency,
        buffer: value.buffer,
        executor: value.executor === "process" ? "process" : "thread",
        reuseProcesses: value.reuseProcesses,
      }),
  );

/** Validates and resolves worker settings: `sky.worker({ concurrency: 4 })`. */
export function worker(input: WorkerInput = {}): Worker {
  return parseInput(workerSchema, input, "worker");
}

/** A reference to a Python function: `sky.python("mod:fn")` or the `"mod:fn"` string itself. */
export type PythonFunctionReference = string | { readonly ref: string };

/** A health checker with its schedule: `{ check: sky.python("health:gpu_ok"), interval: 10 }`. */
export interface HealthCheckerInput {
  /**
   * The check, a Python function run on each node: it returns `True` (or a numpy bool or one-element
   * boolean tensor that is true) when the node is healthy, or a string saying what is wrong. It may take the node's `instance_info()` as its one argument.
   */
  check: PythonFunctionReference;
  /** Seconds between checks (also after a check that raised or timed out). Default 30. */
  interval?: number;
  /** Seconds one check may take; longer is a failure. Default 15. */
  timeout?: number;
  /** Consecutive failures after which the node is replaced. Default 3. */
  failures?: number;
}

/** The resolved health checker: every field present, `check` as `"module:qualname"`. */
export interface HealthChecker {
  readonly check: string;
  readonly interval: number;
  readonly timeout: number;
  readonly failures: number;
}

const functionReferencePattern = /^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$/;
const functionReferenceExpectation =
  'expected a Python function: sky.python("module:function") or "module:function"';

const functionReferenceSchema = z.unknown().transform((value, context): string => {
  const ref =
    typeof value === "string"
      ? value
      : (typeof value === "function" || (typeof value === "object" && value !== null)) &&
          typeof (value as { ref?: unknown }).ref === "string"
        ? (value as { ref: string }).ref
        : undefined;
  if (ref === undefined || !functionReferencePattern.test(ref)) {
    context.addIssue({ code: "custom", message: functionReferenceExpectation });
    return z.NEVER;
  }
  return ref;
});

/** Validates a health checker: a function reference alone, or one with its schedule. */
export const healthCheckerSchema = z
  .union(
    [
      z.strictObject({
        check: functionReferenceSchema,
        interval: positiveSeconds.default(30),
        timeout: positiveSeconds.default(15),
        failures: positiveInteger.default(3),
      }),
      functionReferenceSchema.transform((check) => ({ check, interval: 30, timeout: 15, failures: 3 })),
    ],
    {
      message: `${functionReferenceExpectation}, or { check, interval, timeout, failures }`,
    },
  )
  .transform((value): HealthChecker => Object.freeze({ ...value }));

/** Log levels, most verbose first. */
export type LogLevel = "TRACE" | "DEBUG" | "INFO" | "WARNING" | "ERROR";

/** Where Skyward's own log goes. */
export interface LogConfigInput {
  /** Default `"INFO"`. */
  level?: LogLevel;
  /** The log file. Default `~/.skyward/logs/skyward.log`. */
  file?: string;
  /** Also print the DEBUG and TRACE lines on the pool's console (which shows INFO and above itself). Default true. */
  console?: boolean;
  /** When to rotate: a size (`"50 MB"`) or a period (`"1 day"`). Default `"50 MB"`. */
  rotation?: string;
  /** How many rotated files to keep. Default 10. */
  retention?: number;
}

/** The resolved log configuration. */
export interface LogConfig {
  readonly level: LogLevel;
  readonly file: string;
  readonly console: boolean;
  readonly rotation: string;
  readonly retention: number;
}

// The lookahead asks for a digit other than 0: a rotation at "0 MB" or every "0 days" is no rotation.
const rotationPattern =
  /^\s*(?=[\d.]*[1-9])\d+(\.\d+)?\s*(B|KB|MB|GB|second|seconds|minute|minutes|hour|hours|day|days|week|weeks)\s*$/i;

/** Validates log settings and fills in the reference's defaults. */
export const logConfigSchema = z.strictObject({
  level: z
    .enum(["TRACE", "DEBUG", "INFO", "WARNING", "ERROR"], {
      message: 'expected "TRACE", "DEBUG", "INFO", "WARNING" or "ERROR"',
    })
    .default("INFO"),
  file: z.string().min(1, { message: "expected a file path" }).default("~/.skyward/logs/skyward.log"),
  console: z.boolean().default(true),
  rotation: z
    .string()
    .regex(rotationPattern, { message: 'expected a size like "50 MB" or a period like "1 day"' })
    .default("50 MB"),
  retention: nonNegativeInteger.default(10),
});

/** Validates and resolves log settings: `sky.logConfig({ level: "DEBUG" })`. */
export function logConfig(input: LogConfigInput = {}): LogConfig {
  return Object.freeze(parseInput(logConfigSchema, input, "logging"));
}

/** How a pool with several specs picks one: the cheapest viable offer, or the first spec that works. */
export type SelectionStrategy = "cheapest" | "first";

/** The console's look: `"rich"` (live, on a TTY), `"minimal"`, `"log"` (append-only lines), `"silent"`. */
export type ConsoleMode = "rich" | "minimal" | "log" | "silent";

/** A pool's spending limit, USD (see `options.budget`). */
export interface BudgetInput {
  /** The most the pool may cost in total, USD, > 0. Reaching it stops the pool. */
  max: number;
  /** The total, USD, at which a `budget.warning` event is emitted; > 0 and below `max`. Default 80 % of `max`. */
  warnAt?: number;
}

/** The resolved budget: both amounts, USD. */
export interface Budget {
  /** The most the pool may cost in total. */
  readonly max: number;
  /** Where the warning is emitted. */
  readonly warnAt: number;
}

const positiveUsd = z
  .number({ error: "expected an amount in USD" })
  .refine((value) => Number.isFinite(value) && value > 0, { message: "expected an amount in USD > 0" });

/** Validates a budget: a number (`max`) or `{ max, warnAt }`. */
export const budgetSchema = z
  .union(
    [
      positiveUsd.transform((max) => ({ max, warnAt: undefined })),
      z.strictObject({ max: positiveUsd, warnAt: positiveUsd.optional() }),
    ],
    { error: "expected an amount in USD > 0 or { max, warnAt }" },
  )
  .superRefine((value, context) => {
    if (value.warnAt !== undefined && value.warnAt >= value.max) {
      context.addIssue({
        code: "custom",
        path: ["warnAt"],
        message: `expected an amount below max (${value.max}), received ${value.warnAt}`,
      });
    }
  })
  .transform((value): Budget => Object.freeze({ max: value.max, warnAt: value.warnAt ?? value.max * 0.8 }));

/** Operational tuning of a pool. Every field is optional; the defaults are the reference's. */
export interface OptionsInput {
  /** With several specs: `"cheapest"` (default) or `"first"`. */
  selection?: SelectionStrategy;
  /** Concurrency and executor of each node's worker. */
  worker?: WorkerInput;
  /**
   * Seconds to wait for an instance to be running with an address. Default: the provider's own
   * (`capabilities.provisionTimeout`: container providers pull images first), else 300.
   */
  provisionTimeout?: number;
  /** Seconds to wait for an SSH connection to a node. Default 300. */
  sshTimeout?: number;
  /**
   * Seconds allowed for bootstrap and worker start; default: the image's `bootstrapTimeout` (300) as
   * the plugins' image transforms leave it (`extendImage(image, { bootstrapTimeout })`). Given here,
   * it wins over both.
   */
  bootstrapTimeout?: number;
  /** Seconds between provision attempts after a failure. Default 10. */
  provisionRetryDelay?: number;
  /** Provision attempts before giving up. Default 10. */
  maxProvisionAttempts?: number;
  /** Seconds between SSH connection attempts. Default 5. */
  sshRetryInterval?: number;
  /** Default per-task timeout in seconds. Default 300. */
  defaultComputeTimeout?: number;
  /**
   * Seconds an elastic pool waits after its start and after each growth before it grows again on
   * queued tasks (a pool scaled to zero starts a node at once). Default 30.
   */
  autoscaleCooldown?: number;
  /** Seconds a node of an elastic pool stays idle before it is stopped and terminated (down to `min`). Default 60. */
  autoscaleIdleTimeout?: number;
  /**
   * Seconds between ticks of the reconcile loop, which brings the nodes to the target (autoscaling,
   * `resize`, nodes that failed to start); queued tasks and `resize` also wake it at once. Default 15.
   */
  reconcileTickInterval?: number;
  /** Seconds allowed for a graceful shutdown. Default 120. */
  shutdownTimeout?: number;
  /** `true` (automatic: rich on a TTY, log otherwise), `false` (silent) or a mode. Default true. */
  console?: boolean | ConsoleMode;
  /** `true` (defaults), `false` (off) or a log configuration. Default true. */
  logging?: boolean | LogConfigInput;
  /**
   * A live dashboard of the pool in the browser (the `@skyward/dashboard` package, installed beside
   * core): `true` on any free port, or `{ port, host }` (host default `127.0.0.1`). Its link, with its
   * token, is shown on the console and in the log file. Default (or `null`): none.
   */
  dashboard?: boolean | DashboardInput | null;
  /**
   * Whether nodes form a cluster, which enables distributed collections (`sky.dict` … in tasks,
   * `pool.dict(…)` … in the client). With `false` every collection use fails with an error naming
   * this option. Default: true.
   */
  cluster?: boolean;
  /**
   * How many times a task runs again when its node is lost before it finished (a dead or silent
   * worker, an instance terminated or interrupted). Per task; a task may set its own with
   * `withRetry`. Default 3.
   */
  retryOnInterruption?: number;
  /**
   * A spending limit, USD, counted from the nodes' hourly prices (`pool.cost()`): a number (the
   * maximum; the warning comes at 80 % of it) or `{ max, warnAt }`. At `warnAt` a `budget.warning`
   * event; at `max` a `budget.exceeded` event, the pool takes no more tasks, the tasks queued and
   * running fail with a `BudgetExceededError`, and the pool is torn down. Default (or `null`): none.
   */
  budget?: number | BudgetInput | null;
  /**
   * Seconds without hearing from a node's worker (it is pinged every few seconds) after which the
   * node is declared lost and replaced: a stopped process, a hung host or a network partition.
   * Default 30; at least 1.
   */
  livenessTimeout?: number;
  /**
   * A Python function run on every node, returning `True` or a reason: a node is ready only after
   * its first success, and replaced after `failures` consecutive failures. Default none.
   */
  healthChecker?: PythonFunctionReference | HealthCheckerInput;
}

/** The resolved options: every field present. */
export interface Options {
  readonly selection: SelectionStrategy;
  readonly worker: Worker;
  /** Undefined: the provider's own default, else 300 (see {@link OptionsInput.provisionTimeout}). */
  readonly provisionTimeout: number | undefined;
  readonly sshTimeout: number;
  readonly bootstrapTimeout: number | undefined;
  readonly provisionRetryDelay: number;
  readonly maxProvisionAttempts: number;
  readonly sshRetryInterval: number;
  readonly defaultComputeTimeout: number;
  readonly autoscaleCooldown: number;
  readonly autoscaleIdleTimeout: number;
  readonly reconcileTickInterval: number;
  readonly shutdownTimeout: number;
  readonly console: boolean | ConsoleMode;
  readonly logging: LogConfig | false;
  /** Where the dashboard listens, or null for none. */
  readonly dashboard: Dashboard | null;
  readonly cluster: boolean;
  readonly retryOnInterruption: number;
  /** The spending limit, or null for none. */
  readonly budget: Budget | null;
  readonly livenessTimeout: number;
  readonly healthChecker: HealthChecker | undefined;
}

/** Where `options.dashboard` listens. */
export interface DashboardInput {
  /** The port; default 0, any free one. */
  port?: number;
  /** The address to bind; default `127.0.0.1` (anything else makes it reachable from other machines). */
  host?: string;
}

/** The resolved `options.dashboard`. */
export interface Dashboard {
  readonly port: number;
  readonly host: string;
}

const dashboardSchema = z.union(
  [
    z.boolean(),
    z.strictObject({
      port: z
        .number({ error: "expected a port number" })
        .int({ message: "expected a whole port number" })
        .min(0, { message: "expected a port number 0–65535" })
        .max(65_535, { message: "expected a port number 0–65535" })
        .default(0),
      host: z
        .string({ error: "expected an address to bind" })
        .min(1, { message: "expected an address to bind" })
        .default("127.0.0.1"),
    }),
  ],
  { message: "expected true, false or { port, host }" },
);

const consoleExpectation = 'expected true, false, "rich", "minimal", "log" or "silent"';

/** Validates pool options and fills in the reference's defaults. */
export const optionsSchema = z
  .strictObject({
    selection: z
      .enum(["cheapest", "first"], { message: 'expected "cheapest" or "first"' })
      .default("cheapest"),
    worker: workerSchema.prefault({}),
    provisionTimeout: positiveSeconds.optional(),
    sshTimeout: positiveSeconds.default(300),
    bootstrapTimeout: positiveSeconds.optional(),
    provisionRetryDelay: nonNegativeSeconds.default(10),
    maxProvisionAttempts: positiveInteger.default(10),
    sshRetryInterval: positiveSeconds.default(5),
    defaultComputeTimeout: positiveSeconds.default(300),
    autoscaleCooldown: nonNegativeSeconds.default(30),
    autoscaleIdleTimeout: nonNegativeSeconds.default(60),
    reconcileTickInterval: positiveSeconds.default(15),
    shutdownTimeout: positiveSeconds.default(120),
    console: z
      .union([z.boolean(), z.enum(["rich", "minimal", "log", "silent"], { message: consoleExpectation })], {
        message: consoleExpectation,
      })
      .default(true),
    logging: z
      .union([z.boolean(), logConfigSchema], {
        message: "expected true, false or a log configuration { level, file, console, rotation, retention }",
      })
      .default(true),
    dashboard: dashboardSchema.nullable().default(false),
    cluster: z.boolean().default(true),
    retryOnInterruption: nonNegativeInteger.default(3),
    budget: budgetSchema.nullable().optional(),
    livenessTimeout: z
      .number({ error: "expected a number of seconds" })
      .refine((value) => Number.isFinite(value) && value >= 1, {
        message: "expected a number of seconds >= 1",
      })
      .default(30),
    healthChecker: healthCheckerSchema.optional(),
  })
  .transform(
    (value): Options =>
      Object.freeze({
        ...value,
        bootstrapTimeout: value.bootstrapTimeout,
        budget: value.budget ?? null,
        dashboard:
          value.dashboard === false || value.dashboard === null
            ? null
            : Object.freeze(value.dashboard === true ? { port: 0, host: "127.0.0.1" } : value.dashboard),
        provisionTimeout: value.provisionTimeout,
        healthChecker: value.healthChecker,
        logging:
          value.logging === false
            ? false
            : Object.freeze(value.logging === true ? logConfigSchema.parse({}) : value.logging),
      }),
  );

/** Validates and resolves pool options: `sky.options({ worker: { concurrency: 4 } })`. */
export function options(input: OptionsInput = {}): Options {
  return parseInput(optionsSchema, input, "options");
}
