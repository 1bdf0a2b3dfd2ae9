/**
 * Lazy references to Python callables. `sky.python("tasks:add")` names a function; calling the
 * reference runs nothing — it returns a frozen {@link PendingTask} that a pool dispatches.
 */
import type { z } from "zod";
import { ConfigurationError } from "../errors/errors.js";
import type { RemoteRef } from "../protocol/values.js";

/** Keyword arguments for a Python call. Values must be sendable (JSON, bytes, bigint…). */
export type Kwargs = Readonly<Record<string, unknown>>;

const kwargsMarker = Symbol.for("skyward.kwargs");

/** Keyword arguments given as the last argument of a call: `add(1, sky.kwargs({ b: 2 }))`. */
export interface KwargsArgument {
  readonly [kwargsMarker]: true;
  readonly values: Kwargs;
}

/** Wraps keyword arguments to pass as the last argument of a call: `train(data, sky.kwargs({ epochs: 3 }))`. */
export function kwargs(values: Kwargs): KwargsArgument {
  if (typeof values !== "object" || values === null || Array.isArray(values)) {
    throw new ConfigurationError({
      issues: [{ path: "kwargs", message: "expected an object of keyword arguments" }],
    });
  }
  return Object.freeze({ [kwargsMarker]: true as const, values: Object.freeze({ ...values }) });
}

function isKwargsArgument(value: unknown): value is KwargsArgument {
  return (
    typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[kwargsMarker] === true
  );
}

const REF_PATTERN = /^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$/;

/**
 * What happens to a call whose node is lost before it finished (its worker died, went silent, or
 * its instance was terminated or interrupted): it runs again on another node (a call pinned to a
 * node: on that node's replacement), and its result is delivered once.
 */
export interface RetryPolicy {
  /**
   * How many times it may run again; default the pool's `retryOnInterruption` (3). `0`: it never
   * runs twice, and fails with a `TaskInterruptedError` instead.
   */
  readonly retries?: number;
}

/** A generator's retry policy: {@link RetryPolicy} plus what to do once items were delivered. */
export interface StreamRetryPolicy extends RetryPolicy {
  /**
   * Run it again even after it yielded items: the generator starts over and the items already
   * delivered are skipped, so it must yield the same items again. Default false: a stream that
   * yielded something fails with a `TaskInterruptedError` instead of starting over.
   */
  readonly restartStream?: boolean;
}

/** Options of a Python function reference. */
export interface PythonFunctionOptions<R> {
  /** Validates (and may transform) the result at the boundary. */
  result?: z.ZodType<R>;
  /** Default timeout of its calls, seconds; default: the pool's `defaultComputeTimeout`. */
  timeout?: number;
  /** Its calls' retry policy; `false` for work that must not run twice. */
  retry?: false | StreamRetryPolicy;
}

/** A frozen call of a Python function that returns one value. Runs nothing until a pool dispatches it. */
export interface PendingTask<R> {
  readonly kind: "task";
  /** `module:qualname`. */
  readonly ref: string;
  readonly args: readonly unknown[];
  readonly kwargs: Kwargs;
  /** Seconds, or undefined for the pool's default. */
  readonly timeout: number | undefined;
  /** Validates the result, when the function was declared with a schema. */
  readonly resultSchema: z.ZodType<R> | undefined;
  /** Its retry policy, or undefined for the pool's. */
  readonly retry: RetryPolicy | undefined;
  /** Whether its result stays on its node as a {@link RemoteRef} (see {@link PendingTask.withKeep}). */
  readonly keep: boolean;
  /** A new pending task with this timeout (seconds). */
  withTimeout(seconds: number): PendingTask<R>;
  /**
   * A new pending task whose result stays on the node that computes it: the call resolves to a
   * {@link RemoteRef} (id, node, Python type, size) instead of the value. Pass the reference to later
   * tasks of the same pool; a call given one and no `target` runs on a node holding it. A function
   * with a result schema cannot be kept (the value never reaches the client to be checked).
   */
  withKeep(): PendingTask<RemoteRef<R>>;
  /**
   * A new pending task with this retry policy: `withRetry(false)` for work that must not run twice
   * (it fails with a `TaskInterruptedError` if its node is lost while it runs), `withRetry({ retries: 5 })`.
   * A task that may not run again is never prefetched onto a node (`worker.buffer`): it waits in the
   * client until a worker slot is free, so a node lost before it started takes nothing of it down.
   */
  withRetry(policy: false | RetryPolicy): PendingTask<R>;
  /** A new pending task with these keyword arguments added. */
  withKwargs(values: Kwargs): PendingTask<R>;
}

/** A frozen call of a Python generator function; dispatching it gives an async iterable of its items. */
export interface PendingStream<T> {
  readonly kind: "stream";
  readonly ref: string;
  readonly args: readonly unknown[];
  readonly kwargs: Kwargs;
  readonly timeout: number | undefined;
  readonly resultSchema: z.ZodType<T> | undefined;
  /** Its retry policy, or undefined for the pool's. */
  readonly retry: StreamRetryPolicy | undefined;
  /** A new pending stream with this timeout (seconds) for the whole stream. */
  withTimeout(seconds: number): PendingStream<T>;
  /**
   * A new pending stream with this retry policy. By default a stream whose node is lost runs again
   * only if it had yielded nothing; `withRetry({ restartStream: true })` restarts it after items too.
   */
  withRetry(policy: false | StreamRetryPolicy): PendingStream<T>;
  /** A new pending stream with these keyword arguments added. */
  withKwargs(values: Kwargs): PendingStream<T>;
}

/** Either kind of pending call. */
export type Pending<T> = PendingTask<T> | PendingStream<T>;

/**
 * Every leading part of an argument list, the whole included: the positional arguments a call may
 * give before its keyword arguments (Python lets any parameter be passed by keyword).
 */
export type ArgumentPrefixes<A extends unknown[]> = number extends A["length"]
  ? A
  : A extends []
    ? []
    : A extends [infer Head, ...infer Tail]
      ? [] | [Head, ...ArgumentPrefixes<Tail>]
      : A extends [(infer Head)?, ...infer Tail]
        ? [] | [Head, ...ArgumentPrefixes<Tail>]
        : [];

/** Each argument, or a {@link RemoteRef} to a value of its type kept on a node. */
export type WithRemoteRefs<A extends unknown[]> = { [K in keyof A]: A[K] | RemoteRef<A[K]> };

/**
 * The argument list of a call: the positional arguments, or a leading part of them plus
 * {@link kwargs}; any argument may be a {@link RemoteRef} to a value of its type.
 */
export type CallArguments<A extends unknown[]> =
  | WithRemoteRefs<A>
  | [...ArgumentPrefixes<WithRemoteRefs<A>>, KwargsArgument];

/** A typed reference to a Python function; call it to get a {@link PendingTask}. */
export interface PythonFunction<A extends unknown[], R> {
  (...args: CallArguments<A>): PendingTask<R>;
  /** `module:qualname`. */
  readonly ref: string;
}

/** A typed reference to a Python generator function; call it to get a {@link PendingStream}. */
export interface PythonStreamFunction<A extends unknown[], T> {
  (...args: CallArguments<A>): PendingStream<T>;
  /** `module:qualname`. */
  readonly ref: string;
}

function checkTimeout(seconds: unknown, path: string): number {
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds <= 0) {
    throw new ConfigurationError({
      issues: [{ path, message: `expected a timeout in seconds > 0, received ${String(seconds)}` }],
    });
  }
  return seconds;
}

function checkRetry(policy: unknown, kind: "task" | "stream", path: string): StreamRetryPolicy {
  const issue = (message: string) => new ConfigurationError({ issues: [{ path, message }] });
  if (policy === false) return Object.freeze({ retries: 0 });
  if (typeof policy !== "object" || policy === null || Array.isArray(policy))
    throw issue(
      `expected false or { retries${kind === "stream" ? ", restartStream" : ""} }, received ${String(policy)}`,
    );
  const { retries, restartStream, ...rest } = policy as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0)
    throw issue(`unknown field ${unknown.map((key) => JSON.stringify(key)).join(", ")}`);
  if (retries !== undefined && (typeof retries !== "number" || !Number.isInteger(retries) || retries < 0))
    throw issue(`retries: expected an integer >= 0, received ${String(retries)}`);
  if (restartStream !== undefined) {
    if (kind !== "stream")
      throw issue("restartStream applies to generator functions (sky.python.stream) only");
    if (typeof restartStream !== "boolean")
      throw issue(`restartStream: expected a boolean, received ${String(restartStream)}`);
  }
  return Object.freeze({
    ...(retries !== undefined ? { retries } : {}),
    ...(restartStream !== undefined ? { restartStream } : {}),
  });
}

function checkRef(ref: unknown): string {
  if (typeof ref !== "string" || !REF_PATTERN.test(ref)) {
    throw new ConfigurationError({
      issues: [
        {
          path: "ref",
          message: `expected "module:function" (e.g. "tasks:train" or "pkg.mod:Class.method"), received ${JSON.stringify(ref)}`,
        },
      ],
    });
  }
  return ref;
}

interface PendingFields<T> {
  ref: string;
  args: readonly unknown[];
  kwargs: Kwargs;
  timeout: number | undefined;
  resultSchema: z.ZodType<T> | undefined;
  retry: StreamRetryPolicy | undefined;
  keep: boolean;
}

function makePending<T>(kind: "task", fields: PendingFields<T>): PendingTask<T>;
function makePending<T>(kind: "stream", fields: PendingFields<T>): PendingStream<T>;
function makePending<T>(
  kind: "task" | "stream",
  fields: PendingFields<T>,
): PendingTask<T> | PendingStream<T> {
  return Object.freeze({
    kind: kind as "task",
    ...fields,
    withTimeout(seconds: number) {
      return makePending(kind as "task", { ...fields, timeout: checkTimeout(seconds, "timeout") });
    },
    withRetry(policy: false | StreamRetryPolicy) {
      return makePending(kind as "task", { ...fields, retry: checkRetry(policy, kind, "retry") });
    },
    withKwargs(values: Kwargs) {
      return makePending(kind as "task", {
        ...fields,
        kwargs: Object.freeze({ ...fields.kwargs, ...kwargs(values).values }),
      });
    },
    ...(kind === "task"
      ? {
          withKeep() {
            if (fields.resultSchema !== undefined) {
              throw new ConfigurationError({
                issues: [
                  {
                    path: "keep",
                    message: `${fields.ref} validates its result with a schema, so its result cannot stay on its node (the schema never sees it): declare it without \`result\` to keep it`,
                  },
                ],
              });
            }
            return makePending("task", { ...fields, resultSchema: undefined, keep: true });
          },
        }
      : {}),
  }) as unknown as PendingTask<T> | PendingStream<T>;
}

function splitArguments(args: readonly unknown[]): { args: readonly unknown[]; kwargs: Kwargs } {
  const last = args[args.length - 1];
  if (isKwargsArgument(last)) return { args: Object.freeze(args.slice(0, -1)), kwargs: last.values };
  return { args: Object.freeze([...args]), kwargs: Object.freeze({}) };
}

const OPTION_FIELDS = new Set(["result", "timeout", "retry"]);

/** The options of a function reference, each known field checked (JavaScript callers have no types). */
function checkOptions(options: unknown): void {
  const issue = (path: string, message: string) => new ConfigurationError({ issues: [{ path, message }] });
  if (typeof options !== "object" || options === null || Array.isArray(options))
    throw issue("options", `expected an object ({ result, timeout, retry }), received ${String(options)}`);
  const unknown = Object.keys(options).filter((key) => !OPTION_FIELDS.has(key));
  if (unknown.length > 0)
    throw issue(
      "options",
      `unknown field ${unknown.map((key) => JSON.stringify(key)).join(", ")} (expected result, timeout, retry)`,
    );
  const { result } = options as { result?: unknown };
  if (result !== undefined && typeof (result as { safeParse?: unknown } | null)?.safeParse !== "function")
    throw issue("result", `expected a zod schema (z.number(), z.object({…})), received ${typeof result}`);
}

function define<T>(
  kind: "task" | "stream",
  ref: string,
  options: PythonFunctionOptions<T>,
): (...args: unknown[]) => PendingTask<T> | PendingStream<T> {
  const checked = checkRef(ref);
  checkOptions(options);
  const timeout = options.timeout === undefined ? undefined : checkTimeout(options.timeout, "timeout");
  const retry = options.retry === undefined ? undefined : checkRetry(options.retry, kind, "retry");
  const call = (...args: unknown[]) =>
    makePending(kind as "task", {
      ref: checked,
      ...splitArguments(args),
      timeout,
      resultSchema: options.result,
      retry,
      keep: false,
    });
  Object.defineProperty(call, "ref", { value: checked, enumerable: true });
  Object.defineProperty(call, "name", { value: checked });
  return call;
}

/**
 * A typed reference to a Python function `module:qualname` (modules come from the image's
 * `includes` or installed packages): `const add = sky.python<[number, number], number>("tasks:add")`.
 */
function pythonFunction<A extends unknown[] = unknown[], R = unknown>(
  ref: string,
  options: PythonFunctionOptions<R> = {},
): PythonFunction<A, R> {
  return define("task", ref, options) as unknown as PythonFunction<A, R>;
}

/**
 * A typed reference to a Python generator function; dispatching its calls streams the items back:
 * `for await (const n of pool.run(fib(10)))`.
 */
function pythonStreamFunction<A extends unknown[] = unknown[], T = unknown>(
  ref: string,
  options: PythonFunctionOptions<T> = {},
): PythonStreamFunction<A, T> {
  return define("stream", ref, options) as unknown as PythonStreamFunction<A, T>;
}

/** `sky.python(ref)` for functions and `sky.python.stream(ref)` for generator functions. */
export const python: typeof pythonFunction & { stream: typeof pythonStreamFunction } = Object.assign(
  pythonFunction,
  { stream: pythonStreamFunction },
);

/** True for a value made by calling a {@link python} reference. */
export function isPending(value: unknown): value is Pending<unknown> {
  return (
    typeof value === "object" &&
    value !== null &&
    ((value as { kind?: unknown }).kind === "task" || (value as { kind?: unknown }).kind === "stream") &&
    typeof (value as { ref?: unknown }).ref === "string"
  );
}
