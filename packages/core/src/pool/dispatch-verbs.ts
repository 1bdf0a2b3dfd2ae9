/**
 * The verbs over many calls: `broadcast` (every worker), `gather` (a tuple), `stream` (results as
 * they come) and `map` (a function over items, read lazily).
 */
import { ConfigurationError } from "../errors/errors.js";
import { fanOutArguments } from "./broadcast-fanout.js";
import { CALL_OPTION_FIELDS, checkCallOptions } from "./call-options.js";
import {
  checkPendingTask,
  type DispatchHost,
  dispatchCall,
  isPendingTask,
  submitTask,
  validateResult,
} from "./dispatch.js";
import { MapStop, STOPPED } from "./map-stop.js";
import type { BroadcastResults, MapItem, StreamOptions, WaitOptions, WorkerPlace } from "./pool.js";
import { abortError, nodeIndices } from "./pool-context.js";
import type { CallArguments, PendingTask } from "./python-function.js";
import type { TaskTicket } from "./task-manager.js";

/**
 * `pool.broadcast`: the call on every worker, results ordered by global rank. A large argument
 * crosses the client's link once and is fanned out by the nodes (`broadcast-fanout.ts`).
 */
export async function broadcastTask<R>(
  host: DispatchHost,
  pending: PendingTask<R>,
  options: WaitOptions,
): Promise<BroadcastResults<R>> {
  checkCallOptions(options, CALL_OPTION_FIELDS.wait);
  host.checkOpen();
  checkPendingTask(pending, "task");
  const fanned = await fanOutArguments(host, pending, options);
  try {
    return await broadcastEach(host, fanned.pending, options);
  } finally {
    await Promise.all(fanned.refs.map((ref) => ref.release()));
  }
}

async function broadcastEach<R>(
  host: DispatchHost,
  pending: PendingTask<R>,
  options: WaitOptions,
): Promise<BroadcastResults<R>> {
  const perNode = host.context.layout.workersPerNode;
  const places: WorkerPlace[] = nodeIndices(host.context).flatMap((index) =>
    Array.from({ length: perNode }, (_, worker) => ({
      node: index,
      worker,
      rank: index * perNode + worker,
    })),
  );
  const handles = places.map((place) =>
    submitTask(host, pending, {
      ...options,
      target: perNode > 1 ? { node: place.node, worker: place.worker } : place.node,
    }),
  );
  const results = await Promise.all(handles.map((handle) => handle.result)).catch((error) => {
    for (const handle of handles) handle.cancel();
    throw error;
  });
  // Not enumerable: the results stay a plain array to compare and print.
  Object.defineProperty(results, "places", { value: Object.freeze(places), enumerable: false });
  return results as BroadcastResults<R>;
}

/**
 * `pool.gather`: the calls in parallel, their results in order; the others cancelled on a failure.
 * Async: a pool that runs no more tasks rejects the promise (as `run` does), it throws nothing.
 */
export async function gatherTasks(
  host: DispatchHost,
  tasks: readonly PendingTask<unknown>[],
  options: WaitOptions,
): Promise<unknown[]> {
  checkCallOptions(options, CALL_OPTION_FIELDS.wait);
  host.checkOpen();
  for (const [index, task] of tasks.entries()) checkPendingTask(task, `tasks[${index}]`);
  const handles = tasks.map((task) => submitTask(host, task, options));
  return Promise.all(handles.map((handle) => handle.result)).catch((error) => {
    for (const handle of handles) handle.cancel();
    throw error;
  });
}

/** What stays in `stream`'s line of outcomes in place of one taken. */
const TAKEN = Object.freeze({ error: undefined });

/** `pool.stream`: the calls in parallel, each result yielded in order or as it completes. */
export async function* streamTasks<R>(
  host: DispatchHost,
  tasks: Iterable<PendingTask<R>>,
  options: StreamOptions,
): AsyncGenerator<R> {
  checkCallOptions(options, CALL_OPTION_FIELDS.stream);
  host.checkOpen();
  const calls = [...tasks];
  for (const [index, task] of calls.entries()) checkPendingTask(task, `tasks[${index}]`);
  const handles = calls.map((task) => submitTask(host, task, options));
  // A later call may fail while an earlier one is awaited: its failure is thrown at its place (or
  // never, when the consumer stops first), and must not count as unhandled meanwhile (that ends a
  // Node process, and with it the pool's teardown).
  for (const handle of handles) handle.result.catch(() => undefined);
  try {
    if (options.ordered ?? true) {
      for (const handle of handles) yield await handle.result;
      return;
    }
    // Each call's outcome joins one line as it settles (a race over the calls still pending would
    // add a reaction to each of them per result: quadratic in the calls); taken in that order.
    const settled: ({ value: R } | { error: unknown })[] = [];
    let wake: (() => void) | undefined;
    const arrive = (outcome: { value: R } | { error: unknown }) => {
      settled.push(outcome);
      wake?.();
    };
    for (const handle of handles) {
      handle.result.then(
        (value) => arrive({ value }),
        (error: unknown) => arrive({ error }),
      );
    }
    for (let taken = 0; taken < handles.length; taken += 1) {
      while (settled.length <= taken) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
      }
      const outcome = settled[taken] as { value: R } | { error: unknown };
      settled[taken] = TAKEN; // the value is the consumer's now, not kept here
      if ("error" in outcome) throw outcome.error;
      yield outcome.value;
    }
  } finally {
    for (const handle of handles) handle.cancel();
  }
}

/**
 * Items `map` submits in one turn of the event loop at most. Tasks sent in one turn go out as one
 * frame at its end, and a worker starts on a frame only once all of it has come: a map whose window
 * takes every item at once (a far node's covers its round trip) would have the worker wait for the
 * whole map's frame, and the client's link carry nothing meanwhile. A turn every so many items sends
 * what is ready, and lets results already back be taken in.
 */
export const ITEMS_PER_TURN = 256;

/** Resolves in the event loop's next turn, after its I/O. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** The iterator of a sync or async iterable, and which it is. */
function iterate<T>(
  items: Iterable<T> | AsyncIterable<T>,
): { iterator: AsyncIterator<T>; sync: false } | { iterator: Iterator<T>; sync: true } {
  return Symbol.asyncIterator in items
    ? { iterator: (items as AsyncIterable<T>)[Symbol.asyncIterator](), sync: false }
    : { iterator: (items as Iterable<T>)[Symbol.iterator](), sync: true };
}

/** Refuses a `map` whose `fn` is no function (a call made already) or whose `items` cannot be iterated. */
function checkMapInput(fn: unknown, items: unknown): void {
  if (typeof fn !== "function") {
    const made = (fn as { kind?: unknown } | null)?.kind !== undefined;
    throw new ConfigurationError({
      issues: [
        {
          path: "fn",
          message: `expected a function that makes each item's call, e.g. pool.map(f, items), received ${made ? "a call made already" : typeof fn}`,
        },
      ],
    });
  }
  const iterable = items as { [Symbol.iterator]?: unknown; [Symbol.asyncIterator]?: unknown } | null;
  if (
    typeof iterable?.[Symbol.iterator] === "function" ||
    typeof iterable?.[Symbol.asyncIterator] === "function"
  )
    return;
  throw new ConfigurationError({
    issues: [
      {
        path: "items",
        message: `expected an iterable of argument arrays, e.g. [[1, 2], [3, 4]], received ${items === null ? "null" : typeof items}`,
      },
    ],
  });
}

/**
 * `pool.map`: `fn` once per item, results in input order. Items are read as the queue has room, so
 * a large or endless iterable is not queued all at once; the first failure cancels the rest.
 */
export async function mapTasks<A extends unknown[], R>(
  host: DispatchHost,
  fn: (...args: CallArguments<A>) => PendingTask<R>,
  items: Iterable<MapItem<A>> | AsyncIterable<MapItem<A>>,
  options: WaitOptions,
): Promise<R[]> {
  checkCallOptions(options, CALL_OPTION_FIELDS.wait);
  host.checkOpen();
  checkMapInput(fn, items);
  const { signal } = options;
  if (signal?.aborted) throw abortError(signal, "map");
  const results: R[] = [];
  // Only the tickets still running, so that cancelling on failure is cheap and memory stays flat.
  const tickets = new Set<{ cancel(reason?: string): void }>();
  let outstanding = 0;
  let failure: Error | undefined;
  let settle: (() => void) | undefined;
  // Ends a wait once the map fails: a wait for the next item (an iterable that stalls: a live source,
  // a queue) or for room in the queue ends then, not when that item or room comes.
  const stop = new MapStop();
  const fail = (error: Error) => {
    failure ??= error;
    stop.stop();
    settle?.();
  };
  const onAbort = () => {
    fail(abortError(signal as AbortSignal, "map"));
    for (const ticket of [...tickets]) ticket.cancel("map was aborted");
  };
  signal?.addEventListener("abort", onAbort, { once: true });
  const window = Math.max(64, host.context.tasks.capacity * 4);
  let index = 0;
  let submittedThisTurn = 0;
  const source = iterate(items);
  const { iterator } = source;
  let exhausted = false;
  try {
    for (;;) {
      if (failure) break;
      // A sync iterable's item is taken as it is (no wait per item); an async one's next() is
      // awaited until the map stops.
      const step = source.sync
        ? source.iterator.next()
        : await stop.until(Promise.resolve(source.iterator.next()));
      if (step === STOPPED) break;
      if (step.done) {
        exhausted = true;
        break;
      }
      const item = step.value;
      if (!Array.isArray(item)) {
        throw new ConfigurationError({
          issues: [
            {
              path: `items[${index}]`,
              message: "expected the call's arguments as an array, e.g. [[1, 2], [3, 4]]",
            },
          ],
        });
      }
      const position = index;
      index += 1;
      const pending = fn(...(item as CallArguments<A>));
      // The path (a string per item) is made only for a call that is refused.
      if (!isPendingTask(pending)) checkPendingTask(pending, `fn(items[${position}])`);
      outstanding += 1;
      let ticket: TaskTicket;
      try {
        ticket = dispatchCall(
          host,
          pending,
          undefined,
          {
            result: (value) => {
              tickets.delete(ticket);
              outstanding -= 1;
              try {
                results[position] = validateResult(pending, value, "");
              } catch (error) {
                fail(error as Error);
              }
              if (outstanding === 0) settle?.();
            },
            error: (error) => {
              tickets.delete(ticket);
              outstanding -= 1;
              fail(error);
            },
          },
          false,
        );
      } catch (error) {
        // A remote reference that cannot be used: the map fails as if that call had.
        outstanding -= 1;
        fail(error as Error);
        break;
      }
      tickets.add(ticket);
      if (host.context.tasks.queued >= window) {
        await stop.until(host.context.tasks.whenQueueBelow(window));
        submittedThisTurn = 0;
      } else if (++submittedThisTurn >= ITEMS_PER_TURN) {
        await nextTurn();
        submittedThisTurn = 0;
      }
    }
    if (outstanding > 0 && !failure) {
      await new Promise<void>((resolve) => {
        settle = resolve;
        if (outstanding === 0 || failure) resolve();
      });
    }
  } catch (error) {
    // The items failed (an item not an array, the iterable itself throwing): the calls sent go too.
    failure ??= error as Error;
  } finally {
    signal?.removeEventListener("abort", onAbort);
    // As a `for await` left early, the iterable is told (not awaited: it may be stalled in a read).
    if (!exhausted) {
      try {
        Promise.resolve(iterator.return?.()).catch(() => undefined);
      } catch {
        // a synchronous iterator's return() threw: the map's own outcome stands
      }
    }
  }
  if (failure) {
    for (const ticket of [...tickets]) ticket.cancel("another item of the map failed");
    throw failure;
  }
  return results;
}
