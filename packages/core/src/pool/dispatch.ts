/**
 * Dispatch: a pending call becomes a task request for the task manager, its remote references moved
 * where it runs, its result checked against its schema; `submit` and a streaming `run` on top.
 */
import {
  CancelledError,
  ConfigurationError,
  SerializationError,
  TaskDetachedError,
} from "../errors/errors.js";
import { RemoteRef } from "../protocol/values.js";
import { CALL_OPTION_FIELDS, checkCallOptions } from "./call-options.js";
import type { RunOptions, TaskHandle } from "./pool.js";
import { abortError, nodeIndices, type PoolContext } from "./pool-context.js";
import type { Pending, PendingStream, PendingTask } from "./python-function.js";
import { type PreparedCall, remoteRefsIn } from "./remote-refs.js";
import { type Placement, resolveTarget } from "./targets.js";
import type { TaskCallbacks, TaskRequest, TaskTicket } from "./task-manager.js";

/** What dispatch needs of the pool. */
export interface DispatchHost {
  readonly context: PoolContext;
  /** Throws when the pool runs no more tasks (not ready, or its budget spent). */
  checkOpen(): void;
  /** The most nodes the pool may grow to. */
  maxNodes(): number;
}

function taskRequest(
  pending: Pending<unknown>,
  where: Placement | undefined,
  defaultTimeout: number,
): TaskRequest {
  return {
    ref: pending.ref,
    args: pending.args,
    kwargs: pending.kwargs,
    timeout: pending.timeout ?? defaultTimeout,
    ...(pending.timeout === undefined ? { defaultTimeout: true } : {}),
    stream: pending.kind === "stream",
    ...(where !== undefined ? { node: where.node } : {}),
    ...(where?.worker !== undefined ? { worker: where.worker } : {}),
    ...(pending.retry?.retries !== undefined ? { retries: pending.retry.retries } : {}),
    ...(pending.kind === "stream" && pending.retry?.restartStream ? { restartStream: true } : {}),
    ...(pending.kind === "task" && pending.keep ? { keep: true } : {}),
  };
}

/** The placement a run target names, checked against the pool's nodes now. */
export function placementOf(context: PoolContext, target: RunOptions["target"]): Placement | undefined {
  return resolveTarget(target, {
    present: context.nodes.map((node) => node.index),
    known: (index) => context.nodes.some((node) => node.index === index) || context.pending.has(index),
    workersPerNode: context.layout.workersPerNode,
  });
}

/**
 * Hands a call to the task manager. A kept result (`withKeep()`) is taken in as a remote
 * reference of this pool. Remote references among the arguments: a call with no node of its own
 * runs on a node holding the first one when `affinity` (run, submit), and a reference moves once
 * to a node that does not hold it — brought to the client first, then sent along with the call.
 */
export function dispatchCall(
  host: DispatchHost,
  pending: Pending<unknown>,
  where: Placement | undefined,
  callbacks: TaskCallbacks,
  affinity: boolean,
): TaskTicket {
  const { context } = host;
  const { tasks, refs: registry } = context;
  const defaultTimeout = context.spec.defaultComputeTimeout;
  const kept: TaskCallbacks =
    pending.kind === "task" && pending.keep
      ? {
          ...callbacks,
          result: (value) => {
            if (value instanceof RemoteRef) registry.adopt(value);
            callbacks.result?.(value);
          },
        }
      : callbacks;
  const refs = remoteRefsIn(pending.args, pending.kwargs);
  if (refs.length === 0) return tasks.submit(taskRequest(pending, where, defaultTimeout), kept);
  const first = registry.check(refs[0]!);
  const target = where ?? (affinity ? { node: Math.min(...first.holders) } : undefined);
  const indices = nodeIndices(context);
  const prepared = registry.prepare(
    refs,
    pending.args,
    pending.kwargs,
    target?.node,
    indices,
    indices.length < host.maxNodes(),
  );
  const send = (call: PreparedCall): TaskTicket =>
    tasks.submit(
      { ...taskRequest(pending, target, defaultTimeout), args: call.args, kwargs: call.kwargs, refs: true },
      { ...kept, ...call.hooks },
    );
  if (prepared.ready) return send(prepared);
  let ticket: TaskTicket | undefined;
  let cancelled: string | undefined;
  const stopped = () =>
    new CancelledError({
      message: `${pending.ref} was cancelled (${cancelled}) while a remote reference it takes moved to its node`,
    });
  prepared.later.then(
    (call) => {
      if (cancelled !== undefined) kept.error(stopped());
      else ticket = send(call);
    },
    (error: Error) => kept.error(cancelled !== undefined ? stopped() : error),
  );
  return {
    get id() {
      return ticket?.id ?? "";
    },
    cancel(reason?: string) {
      if (ticket !== undefined) ticket.cancel(reason);
      else cancelled ??= reason ?? "cancel() was called";
    },
  };
}

/** A call's result checked against its schema (when it has one). */
export function validateResult<R>(pending: Pending<R>, value: unknown, taskId: string): R {
  const schema = pending.resultSchema;
  if (!schema) return value as R;
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new SerializationError({
    taskId,
    side: "client",
    message: `The result of ${pending.ref} does not match its schema: ${parsed.error.issues.map((issue) => `${issue.path.join(".") || "(result)"}: ${issue.message}`).join("; ")}`,
  });
}

/** Whether `pending` is a pending task (a call with one result): per item in `map`, so it builds nothing. */
export function isPendingTask(pending: unknown): boolean {
  const candidate = pending as { kind?: unknown; ref?: unknown } | null | undefined;
  return candidate?.kind === "task" && typeof candidate.ref === "string";
}

/**
 * Refuses what is not a pending task (a call with one result) at `path`: the function itself, not
 * called, or a generator's call, whose items have no single result to wait for (it waited for ever).
 */
export function checkPendingTask(pending: unknown, path: string): void {
  if (isPendingTask(pending)) return;
  const candidate = pending as { kind?: unknown; ref?: unknown } | null | undefined;
  const kind = candidate?.kind;
  const ref = typeof candidate?.ref === "string" ? candidate.ref : undefined;
  const message =
    kind === "stream"
      ? `expected a call with one result, received a streaming call of ${ref} (sky.python.stream): iterate pool.run(call) for its items`
      : typeof pending === "function" && ref !== undefined
        ? `expected a pending call such as f(...args), received the function ${ref} itself: call it with its arguments`
        : `expected a pending call such as f(...args), received ${pending === undefined ? "undefined" : pending === null ? "null" : typeof pending}`;
  throw new ConfigurationError({ issues: [{ path, message }] });
}

/** `pool.submit`: the task's handle at once. */
export function submitTask<R>(
  host: DispatchHost,
  pending: PendingTask<R>,
  options: RunOptions,
): TaskHandle<R> {
  host.checkOpen();
  checkPendingTask(pending, "task");
  const node = placementOf(host.context, options.target);
  let ticket: TaskTicket | undefined;
  let cancel: () => void = () => {};
  const result = new Promise<R>((resolve, reject) => {
    const { signal } = options;
    if (signal?.aborted) {
      reject(abortError(signal, `${pending.ref}`));
      return;
    }
    const onAbort = () => ticket?.cancel("its signal was aborted");
    const callbacks: TaskCallbacks = {
      result: (value) => {
        signal?.removeEventListener("abort", onAbort);
        try {
          resolve(validateResult(pending, value, ticket?.id ?? ""));
        } catch (error) {
          reject(error);
        }
      },
      error: (error) => {
        signal?.removeEventListener("abort", onAbort);
        // A task that goes on detached is no failure of this process: an unobserved handle must not end it.
        if (TaskDetachedError.isInstance(error)) void result.catch(() => undefined);
        reject(error);
      },
    };
    const made = dispatchCall(host, pending, node, callbacks, true);
    ticket = made;
    cancel = () => made.cancel("cancel() was called");
    signal?.addEventListener("abort", onAbort, { once: true });
  });
  return {
    get id() {
      return ticket?.id ?? "";
    },
    result,
    cancel: () => cancel(),
  };
}

/** `pool.run` of a generator: its items as an async iterable; the task starts when iterated. */
export function runStream<T>(
  host: DispatchHost,
  pending: PendingStream<T>,
  options: RunOptions,
): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator](): AsyncIterator<T> {
      checkCallOptions(options, CALL_OPTION_FIELDS.run);
      host.checkOpen();
      // An abort listener never fires for a signal aborted already: such a run starts nothing.
      const { signal } = options;
      if (signal?.aborted) {
        const error = abortError(signal, `${pending.ref}`);
        return {
          next: () => Promise.reject(error),
          return: async () => ({ value: undefined, done: true }),
        };
      }
      const node = placementOf(host.context, options.target);
      const buffered: T[] = [];
      let finished = false;
      let failure: Error | undefined;
      let wake: (() => void) | undefined;
      const notify = () => {
        wake?.();
        wake = undefined;
      };
      const ticket = dispatchCall(
        host,
        pending,
        node,
        {
          item: (value) => {
            try {
              buffered.push(validateResult(pending, value, ticket.id));
            } catch (error) {
              failure ??= error as Error;
              ticket.cancel("an item did not match its schema");
            }
            notify();
          },
          end: () => {
            finished = true;
            notify();
          },
          error: (error) => {
            failure ??= error;
            finished = true;
            notify();
          },
        },
        true,
      );
      const onAbort = () => ticket.cancel("its signal was aborted");
      options.signal?.addEventListener("abort", onAbort, { once: true });
      const cleanup = () => options.signal?.removeEventListener("abort", onAbort);
      return {
        async next(): Promise<IteratorResult<T>> {
          for (;;) {
            if (buffered.length > 0) return { value: buffered.shift() as T, done: false };
            if (failure) {
              cleanup();
              throw failure;
            }
            if (finished) {
              cleanup();
              return { value: undefined, done: true };
            }
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
          }
        },
        async return(): Promise<IteratorResult<T>> {
          cleanup();
          ticket.cancel("the consumer stopped reading");
          return { value: undefined, done: true };
        },
      };
    },
  };
}
