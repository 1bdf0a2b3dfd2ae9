/**
 * Skyward's error classes. Every error thrown by Skyward extends {@link SkywardError}, carries a
 * `cause` where there is one, and can be recognised with the static `isInstance` — which works
 * across duplicate installs of this package, unlike `instanceof`.
 */

const skywardMarker = Symbol.for("skyward.error");

function hasMarker(value: unknown, marker: symbol): boolean {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[marker] === true;
}

/** Options every Skyward error constructor accepts. */
export interface SkywardErrorOptions {
  /** The human-readable message. */
  message: string;
  /** The error that led to this one, if any. */
  cause?: unknown;
}

/** The base class of every error Skyward throws. */
export class SkywardError extends Error {
  constructor(options: SkywardErrorOptions) {
    super(options.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "SkywardError";
    Object.defineProperty(this, skywardMarker, { value: true });
  }

  /** True for any Skyward error, from any copy of this package. */
  static isInstance(error: unknown): error is SkywardError {
    return hasMarker(error, skywardMarker);
  }
}

/** Defines `isInstance` for a subclass with its own `Symbol.for` marker. */
function markerFor(name: string): symbol {
  return Symbol.for(`skyward.error.${name}`);
}

/** One problem found while validating user input. */
export interface ConfigurationIssue {
  /** Where the bad value is, as a dotted path (`nodes.min`, `image.env.HOME`, `pools.train.accelerator`). */
  path: string;
  /** What was wrong and what was expected. */
  message: string;
}

const configurationMarker = markerFor("configuration");

/** Invalid user input: a spec, options, a TOML file. Raised before any provider is called. */
export class ConfigurationError extends SkywardError {
  /** Every problem found, each with the path of the field it concerns. */
  readonly issues: readonly ConfigurationIssue[];

  constructor(options: { issues: readonly ConfigurationIssue[]; message?: string; cause?: unknown }) {
    super({
      message:
        options.message ??
        `Invalid configuration:\n${options.issues.map((issue) => `  - ${issue.path || "(root)"}: ${issue.message}`).join("\n")}`,
      cause: options.cause,
    });
    this.name = "ConfigurationError";
    Object.defineProperty(this, configurationMarker, { value: true });
    this.issues = options.issues;
  }

  static override isInstance(error: unknown): error is ConfigurationError {
    return hasMarker(error, configurationMarker);
  }
}

/** Why one offer or spec could not be used. */
export interface ProvisionAttempt {
  /** The provider's name (`aws`, `runpod`, …). */
  provider: string;
  /** The offer or instance type tried, when there was one. */
  offer?: string;
  /** The region (or zone) of the offer tried, when known. */
  region?: string;
  /** Why it failed. */
  reason: string;
}

/** `provider (offer, region)`: the attempt's place, as {@link NoCapacityError}'s message lists it. */
export function attemptPlace(attempt: Omit<ProvisionAttempt, "reason">): string {
  const where = [attempt.offer, attempt.region].filter((part) => part !== undefined && part !== "");
  return where.length > 0 ? `${attempt.provider} (${where.join(", ")})` : attempt.provider;
}

/**
 * The attempts `error` stands for when trying `tried` failed with it: a {@link NoCapacityError}'s
 * own attempts (each completed with the offer and region tried, where it leaves them out), so that
 * wrapping one in another lists each attempt once instead of nesting its message; any other error
 * is one attempt whose reason is its message.
 */
export function attemptsOf(error: unknown, tried: Omit<ProvisionAttempt, "reason">): ProvisionAttempt[] {
  if (NoCapacityError.isInstance(error) && error.attempts.length > 0) {
    return error.attempts.map((attempt) => ({
      ...tried,
      ...attempt,
      offer: attempt.offer ?? tried.offer,
      region: attempt.region ?? tried.region,
    }));
  }
  return [{ ...tried, reason: error instanceof Error ? error.message : String(error) }];
}

const noCapacityMarker = markerFor("no-capacity");

/** No provider had an offer, or capacity, for any of the specs. Lists every attempt and its reason. */
export class NoCapacityError extends SkywardError {
  /** Every attempt made, in order. */
  readonly attempts: readonly ProvisionAttempt[];

  constructor(options: { attempts: readonly ProvisionAttempt[]; message?: string; cause?: unknown }) {
    super({
      message:
        options.message ??
        `No capacity for the requested pool; attempts:\n${options.attempts
          .map((attempt) => `  - ${attemptPlace(attempt)}: ${attempt.reason}`)
          .join("\n")}`,
      cause: options.cause,
    });
    this.name = "NoCapacityError";
    Object.defineProperty(this, noCapacityMarker, { value: true });
    this.attempts = options.attempts;
  }

  static override isInstance(error: unknown): error is NoCapacityError {
    return hasMarker(error, noCapacityMarker);
  }
}

const noOffersMarker = markerFor("no-offers");

/** No offer matched the spec (accelerator, vCPUs, memory, price cap…) at any provider. */
export class NoOffersError extends NoCapacityError {
  constructor(options: { attempts: readonly ProvisionAttempt[]; message?: string; cause?: unknown }) {
    super({
      ...options,
      message:
        options.message ??
        `No offer matches the requested spec; checked:\n${options.attempts
          .map((attempt) => `  - ${attempt.provider}: ${attempt.reason}`)
          .join("\n")}`,
    });
    this.name = "NoOffersError";
    Object.defineProperty(this, noOffersMarker, { value: true });
  }

  static override isInstance(error: unknown): error is NoOffersError {
    return hasMarker(error, noOffersMarker);
  }
}

const provisionMarker = markerFor("provision");

/** A provider failed to create, find or destroy an instance. */
export class ProvisionError extends SkywardError {
  /** The provider that failed. */
  readonly provider: string;
  /** Whether trying again (or another offer) may succeed. */
  readonly isRetryable: boolean;

  constructor(options: { provider: string; message: string; isRetryable?: boolean; cause?: unknown }) {
    super(options);
    this.name = "ProvisionError";
    Object.defineProperty(this, provisionMarker, { value: true });
    this.provider = options.provider;
    this.isRetryable = options.isRetryable ?? false;
  }

  static override isInstance(error: unknown): error is ProvisionError {
    return hasMarker(error, provisionMarker);
  }
}

const connectionMarker = markerFor("connection");

/** An SSH connection, tunnel or worker connection failed or was lost. */
export class ConnectionError extends SkywardError {
  /** The host (or `host:port`) concerned. */
  readonly host: string;
  /** The node index, when the host is a pool node. */
  readonly node: number | undefined;

  constructor(options: { host: string; node?: number; message: string; cause?: unknown }) {
    super(options);
    this.name = "ConnectionError";
    Object.defineProperty(this, connectionMarker, { value: true });
    this.host = options.host;
    this.node = options.node;
  }

  static override isInstance(error: unknown): error is ConnectionError {
    return hasMarker(error, connectionMarker);
  }
}

const bootstrapMarker = markerFor("bootstrap");

/** The bootstrap script failed or timed out on a node. Carries the tail of the remote log. */
export class BootstrapError extends SkywardError {
  /** The node index. */
  readonly node: number;
  /** The bootstrap phase that failed, when known (`apt`, `pip`, …). */
  readonly phase: string | undefined;
  /** The last lines of the remote bootstrap log. */
  readonly logTail: string;

  constructor(options: { node: number; phase?: string; logTail: string; message: string; cause?: unknown }) {
    super({
      ...options,
      message: options.logTail
        ? `${options.message}\n--- remote log (tail) ---\n${options.logTail}`
        : options.message,
    });
    this.name = "BootstrapError";
    Object.defineProperty(this, bootstrapMarker, { value: true });
    this.node = options.node;
    this.phase = options.phase;
    this.logTail = options.logTail;
  }

  static override isInstance(error: unknown): error is BootstrapError {
    return hasMarker(error, bootstrapMarker);
  }
}

const remoteTaskMarker = markerFor("remote-task");

/** A task raised an exception on the worker. */
export class RemoteTaskError extends SkywardError {
  /** The task id. */
  readonly taskId: string;
  /** The Python exception's qualified type name (`ValueError`, `torch.OutOfMemoryError`). */
  readonly exceptionType: string;
  /** The Python exception's message. */
  readonly exceptionMessage: string;
  /** The remote traceback, as Python formatted it. */
  readonly remoteTraceback: string;
  /** The node the task ran on. */
  readonly node: number;

  constructor(options: {
    taskId: string;
    exceptionType: string;
    exceptionMessage: string;
    remoteTraceback: string;
    node: number;
    message?: string;
    cause?: unknown;
  }) {
    super({
      message:
        options.message ?? `${options.exceptionType}: ${options.exceptionMessage} (on node ${options.node})`,
      cause: options.cause,
    });
    this.name = "RemoteTaskError";
    Object.defineProperty(this, remoteTaskMarker, { value: true });
    this.taskId = options.taskId;
    this.exceptionType = options.exceptionType;
    this.exceptionMessage = options.exceptionMessage;
    this.remoteTraceback = options.remoteTraceback;
    this.node = options.node;
  }

  static override isInstance(error: unknown): error is RemoteTaskError {
    return hasMarker(error, remoteTaskMarker);
  }
}

const commandFailedMarker = markerFor("command-failed");

/**
 * A command or script run as a task (`sky.shell`, `sky.script`) exited with a non-zero status or
 * was killed by a signal. A {@link RemoteTaskError} too, so code that handles task failures
 * handles it.
 */
export class CommandFailedError extends RemoteTaskError {
  /** The exit status; 128 + n when signal n killed it (as a shell reports it). */
  readonly exitCode: number;
  /** The signal that killed it (`"SIGKILL"`), or null when it exited. */
  readonly signal: string | null;
  /** The last few KiB of its stdout and stderr, interleaved as they arrived. */
  readonly outputTail: string;

  constructor(options: {
    taskId: string;
    node: number;
    exitCode: number;
    signal?: string | null;
    outputTail: string;
    /** The worker's one-line summary (`` `make` exited with code 2 ``). */
    summary: string;
    remoteTraceback?: string;
    message?: string;
    cause?: unknown;
  }) {
    const tail = options.outputTail ? `\n--- output (tail) ---\n${options.outputTail}` : "";
    super({
      taskId: options.taskId,
      exceptionType: "skyward.commands.CommandFailedError",
      exceptionMessage: `${options.summary}${tail}`,
      remoteTraceback: options.remoteTraceback ?? "",
      node: options.node,
      message: options.message ?? `${options.summary} (on node ${options.node})${tail}`,
      cause: options.cause,
    });
    this.name = "CommandFailedError";
    Object.defineProperty(this, commandFailedMarker, { value: true });
    this.exitCode = options.exitCode;
    this.signal = options.signal ?? null;
    this.outputTail = options.outputTail;
  }

  static override isInstance(error: unknown): error is CommandFailedError {
    return hasMarker(error, commandFailedMarker);
  }
}

const taskTimeoutMarker = markerFor("task-timeout");

/** A task ran longer than its timeout. */
export class TaskTimeoutError extends SkywardError {
  /** The task id. */
  readonly taskId: string;
  /** The timeout that was exceeded, in seconds. */
  readonly timeoutSeconds: number;

  constructor(options: { taskId: string; timeoutSeconds: number; message?: string; cause?: unknown }) {
    super({
      message: options.message ?? `Task ${options.taskId} timed out after ${options.timeoutSeconds} s`,
      cause: options.cause,
    });
    this.name = "TaskTimeoutError";
    Object.defineProperty(this, taskTimeoutMarker, { value: true });
    this.taskId = options.taskId;
    this.timeoutSeconds = options.timeoutSeconds;
  }

  static override isInstance(error: unknown): error is TaskTimeoutError {
    return hasMarker(error, taskTimeoutMarker);
  }
}

const cancelledMarker = markerFor("cancelled");

/** A task or operation was cancelled (an `AbortSignal`, `cancel()`, or pool shutdown). */
export class CancelledError extends SkywardError {
  /** The task id, when a task was cancelled. */
  readonly taskId: string | undefined;

  constructor(options: { taskId?: string; message?: string; cause?: unknown }) {
    super({
      message: options.message ?? (options.taskId ? `Task ${options.taskId} was cancelled` : "Cancelled"),
      cause: options.cause,
    });
    this.name = "CancelledError";
    Object.defineProperty(this, cancelledMarker, { value: true });
    this.taskId = options.taskId;
  }

  static override isInstance(error: unknown): error is CancelledError {
    return hasMarker(error, cancelledMarker);
  }
}

const budgetExceededMarker = markerFor("budget-exceeded");

/**
 * The pool reached its `options.budget`: it takes no more tasks, the tasks it had fail with this
 * error, and it is torn down. A {@link CancelledError} too, so code that handles cancellation handles
 * it; `BudgetExceededError.isInstance` tells it apart.
 */
export class BudgetExceededError extends CancelledError {
  /** The budget, USD. */
  readonly budget: number;
  /** What the pool had cost when it was stopped, USD. */
  readonly total: number;

  constructor(options: {
    budget: number;
    total: number;
    taskId?: string;
    message?: string;
    cause?: unknown;
  }) {
    super({
      ...options,
      message:
        options.message ??
        `The pool's budget of $${options.budget.toFixed(2)} is spent ($${options.total.toFixed(2)} so far): it runs no more tasks and is shutting down`,
    });
    this.name = "BudgetExceededError";
    Object.defineProperty(this, budgetExceededMarker, { value: true });
    this.budget = options.budget;
    this.total = options.total;
  }

  static override isInstance(error: unknown): error is BudgetExceededError {
    return hasMarker(error, budgetExceededMarker);
  }
}

const taskDetachedMarker = markerFor("task-detached");

/**
 * The pool was detached while the task ran on a worker: the task goes on there, and this process no
 * longer waits for it — its outcome is handed to whoever attaches (`sky.attach(poolId)`, then
 * `collected()`). A {@link CancelledError} too (this caller's wait ended), which
 * `TaskDetachedError.isInstance` tells apart. A handle nobody looked at does not end the process.
 */
export class TaskDetachedError extends CancelledError {
  /** The detached pool: `sky.attach(poolId)` collects the task's outcome. */
  readonly poolId: string;

  constructor(options: { taskId: string; ref: string; poolId: string; cause?: unknown }) {
    super({
      taskId: options.taskId,
      message: `${options.ref} (task ${options.taskId}) goes on in the detached pool ${options.poolId}; this process no longer waits for it: sky.attach("${options.poolId}") collects its outcome`,
      cause: options.cause,
    });
    this.name = "TaskDetachedError";
    Object.defineProperty(this, taskDetachedMarker, { value: true });
    this.poolId = options.poolId;
  }

  static override isInstance(error: unknown): error is TaskDetachedError {
    return hasMarker(error, taskDetachedMarker);
  }
}

const protocolMarker = markerFor("protocol");

/** A peer broke the wire protocol: bad frame, wrong version, wrong token. */
export class ProtocolError extends SkywardError {
  constructor(options: SkywardErrorOptions) {
    super(options);
    this.name = "ProtocolError";
    Object.defineProperty(this, protocolMarker, { value: true });
  }

  static override isInstance(error: unknown): error is ProtocolError {
    return hasMarker(error, protocolMarker);
  }
}

const functionNotFoundMarker = markerFor("function-not-found");

/** The task's module or function could not be found on the worker. */
export class FunctionNotFoundError extends SkywardError {
  /** The task id. */
  readonly taskId: string;
  /** The `module:qualname` that was asked for. */
  readonly ref: string;
  /** The node that looked for it. */
  readonly node: number;

  constructor(options: { taskId: string; ref: string; node: number; message: string; cause?: unknown }) {
    super(options);
    this.name = "FunctionNotFoundError";
    Object.defineProperty(this, functionNotFoundMarker, { value: true });
    this.taskId = options.taskId;
    this.ref = options.ref;
    this.node = options.node;
  }

  static override isInstance(error: unknown): error is FunctionNotFoundError {
    return hasMarker(error, functionNotFoundMarker);
  }
}

const serializationMarker = markerFor("serialization");

/** A value could not cross between TypeScript and Python: an argument, a result or a stream item. */
export class SerializationError extends SkywardError {
  /** The task id, when a task's value failed. */
  readonly taskId: string | undefined;
  /** Which side failed: `"client"` (encoding in TypeScript) or `"worker"` (in Python). */
  readonly side: "client" | "worker";

  constructor(options: { taskId?: string; side: "client" | "worker"; message: string; cause?: unknown }) {
    super(options);
    this.name = "SerializationError";
    Object.defineProperty(this, serializationMarker, { value: true });
    this.taskId = options.taskId;
    this.side = options.side;
  }

  static override isInstance(error: unknown): error is SerializationError {
    return hasMarker(error, serializationMarker);
  }
}

const workerDiedMarker = markerFor("worker-died");

/** The process running a task died (a crash, `os._exit`, the OOM killer), or its node was lost. */
export class WorkerDiedError extends SkywardError {
  /** The task id. */
  readonly taskId: string;
  /** The node it ran on. */
  readonly node: number;

  constructor(options: { taskId: string; node: number; message: string; cause?: unknown }) {
    super(options);
    this.name = "WorkerDiedError";
    Object.defineProperty(this, workerDiedMarker, { value: true });
    this.taskId = options.taskId;
    this.node = options.node;
  }

  static override isInstance(error: unknown): error is WorkerDiedError {
    return hasMarker(error, workerDiedMarker);
  }
}

const taskInterruptedMarker = markerFor("task-interrupted");

/** Why an interrupted task was not run again. */
export type TaskInterruptionReason =
  /** It opted out of retries (`withRetry(false)`): it must not run twice. */
  | "retry-disabled"
  /** It had run `retries` more times already. */
  | "retries-exhausted"
  /** A stream that had yielded items, without `restartStream`. */
  | "stream-started"
  /** It had read items from an input stream, which cannot be read again. */
  | "input-consumed";

/**
 * A task's node was lost (its worker died, it went silent, its instance was terminated or
 * interrupted) before the task finished, and the task was not run again: why is in `reason`.
 * Tasks that may run again are retried elsewhere instead, up to `retryOnInterruption` times.
 */
export class TaskInterruptedError extends WorkerDiedError {
  /** Why it was not run again. */
  readonly reason: TaskInterruptionReason;
  /** How many times it was started, this last one included. */
  readonly attempts: number;

  constructor(options: {
    taskId: string;
    node: number;
    reason: TaskInterruptionReason;
    attempts: number;
    message: string;
    cause?: unknown;
  }) {
    super(options);
    this.name = "TaskInterruptedError";
    Object.defineProperty(this, taskInterruptedMarker, { value: true });
    this.reason = options.reason;
    this.attempts = options.attempts;
  }

  static override isInstance(error: unknown): error is TaskInterruptedError {
    return hasMarker(error, taskInterruptedMarker);
  }
}

const nodeUnavailableMarker = markerFor("node-unavailable");

/**
 * A task bound to one node (a `broadcast`'s part, `run(…, { target })`) could not run because that
 * node is gone and its replacement did not come: it failed, or did not come within the pool's
 * `provisionTimeout`.
 */
export class NodeUnavailableError extends ConnectionError {
  /** The node (its rank) that is missing. */
  declare readonly node: number;

  constructor(options: { node: number; message: string; cause?: unknown }) {
    super({
      host: `node ${options.node}`,
      node: options.node,
      message: options.message,
      cause: options.cause,
    });
    this.name = "NodeUnavailableError";
    Object.defineProperty(this, nodeUnavailableMarker, { value: true });
  }

  static override isInstance(error: unknown): error is NodeUnavailableError {
    return hasMarker(error, nodeUnavailableMarker);
  }
}

const remoteRefMarker = markerFor("remote-ref");

/** Why a remote reference cannot be used. */
export type RemoteRefProblem = "released" | "lost" | "other-pool";

/**
 * A remote reference (a result kept on its node with `withKeep()`) was used after it was released
 * (`ref.release()`, `pool.release(ref)`, or the pool closed), after every node holding it was lost,
 * or with a pool other than the one that made it.
 */
export class RemoteRefError extends SkywardError {
  /** The reference's id (`r0-…`). */
  readonly refId: string;
  /** The node that made it. */
  readonly node: number;
  /** What is wrong with it. */
  readonly problem: RemoteRefProblem;

  constructor(options: {
    refId: string;
    node: number;
    problem: RemoteRefProblem;
    message: string;
    cause?: unknown;
  }) {
    super(options);
    this.name = "RemoteRefError";
    Object.defineProperty(this, remoteRefMarker, { value: true });
    this.refId = options.refId;
    this.node = options.node;
    this.problem = options.problem;
  }

  static override isInstance(error: unknown): error is RemoteRefError {
    return hasMarker(error, remoteRefMarker);
  }
}
