// Type-level tests of dispatch: what each call infers, and what must not compile. Nothing here runs;
// vitest's "types" project and core's `tsc --noEmit` both check it.
import { describe, expectTypeOf, test } from "vitest";
import { z } from "zod";
import { type CommandResult, script, shell } from "./commands.js";
import type { BroadcastResults, MapItem, Pool, TaskHandle, WorkerPlace } from "./pool.js";
import { kwargs, type PendingStream, type PendingTask, python } from "./python-function.js";

declare const pool: Pool;

const train = python<[config: { lr: number }], { loss: number }>("tasks:train");
const add = python<[a: number, b: number], number>("tasks:add");
const info = python<[], { node: number }>("tasks:info");
const fib = python.stream<[n: number], number>("tasks:fibonacci");
const untyped = python("tasks:anything");

describe("python references", () => {
  test("calling one gives a pending task or stream of the declared result", () => {
    expectTypeOf(train({ lr: 0.1 })).toEqualTypeOf<PendingTask<{ loss: number }>>();
    expectTypeOf(fib(10)).toEqualTypeOf<PendingStream<number>>();
    expectTypeOf(untyped(1, "a", null)).toEqualTypeOf<PendingTask<unknown>>();
  });

  test("arguments are checked against the parameter tuple", () => {
    // @ts-expect-error a string is not a number
    add(1, "2");
    // @ts-expect-error too few positional arguments and no kwargs
    add(1);
    // @ts-expect-error too many arguments
    add(1, 2, 3);
    // @ts-expect-error the wrong config shape
    train({ lr: "fast" });
  });

  test("keyword arguments end a leading part of the positional ones", () => {
    expectTypeOf(add(1, kwargs({ b: 2 }))).toEqualTypeOf<PendingTask<number>>();
    expectTypeOf(add(kwargs({ a: 1, b: 2 }))).toEqualTypeOf<PendingTask<number>>();
    expectTypeOf(fib(kwargs({ n: 5 }))).toEqualTypeOf<PendingStream<number>>();
    // @ts-expect-error kwargs go last
    add(kwargs({ a: 1 }), 2);
  });

  test("withTimeout and withKwargs keep the kind and the result type", () => {
    expectTypeOf(train({ lr: 0.1 }).withTimeout(30)).toEqualTypeOf<PendingTask<{ loss: number }>>();
    expectTypeOf(fib(10).withTimeout(30)).toEqualTypeOf<PendingStream<number>>();
    expectTypeOf(add(1, 2).withKwargs({ extra: true })).toEqualTypeOf<PendingTask<number>>();
    // @ts-expect-error seconds are a number
    train({ lr: 0.1 }).withTimeout("30s");
  });

  test("a result schema gives the result type", () => {
    const scored = python("tasks:score", { result: z.object({ loss: z.number() }) });
    expectTypeOf(scored(1)).toEqualTypeOf<PendingTask<{ loss: number }>>();
    const parsed = python("tasks:when", { result: z.string().transform((text) => new Date(text)) });
    expectTypeOf(pool.run(parsed())).resolves.toEqualTypeOf<Date>();
    const lines = python.stream("tasks:lines", { result: z.string() });
    expectTypeOf(pool.run(lines())).toEqualTypeOf<AsyncIterable<string>>();
    // @ts-expect-error the schema's type and the declared result disagree
    python<[], number>("tasks:score", { result: z.string() });
  });
});

describe("run", () => {
  test("a task resolves to its value", () => {
    expectTypeOf(pool.run(train({ lr: 0.1 }))).toEqualTypeOf<Promise<{ loss: number }>>();
    expectTypeOf(pool.run(add(1, 2), { target: "head" })).toEqualTypeOf<Promise<number>>();
    expectTypeOf(pool.run(add(1, 2), { target: 1 })).toEqualTypeOf<Promise<number>>();
  });

  test("a stream gives an async iterable of its items", () => {
    expectTypeOf(pool.run(fib(10))).toEqualTypeOf<AsyncIterable<number>>();
    expectTypeOf(pool.run(fib(10).withTimeout(5), { target: 0 })).toEqualTypeOf<AsyncIterable<number>>();
  });

  test("wrong options do not compile", () => {
    // @ts-expect-error no such target
    pool.run(add(1, 2), { target: "tail" });
    // @ts-expect-error a reference is not a call
    pool.run(add);
    // A target names the head, a node, a worker of a node, or a global rank.
    pool.run(add(1, 2), { target: "head" });
    pool.run(add(1, 2), { target: 1 });
    pool.run(add(1, 2), { target: { node: 1, worker: 0 } });
    pool.run(add(1, 2), { target: { rank: 3 } });
    // @ts-expect-error a target is not a host name
    pool.run(add(1, 2), { target: "worker-3" });
  });
});

describe("broadcast", () => {
  test("one result per worker, by global rank, with where each came from", async () => {
    expectTypeOf(pool.broadcast(info())).toEqualTypeOf<Promise<BroadcastResults<{ node: number }>>>();
    const results = await pool.broadcast(info());
    // Still an array of the results…
    expectTypeOf(results).toMatchTypeOf<{ node: number }[]>();
    expectTypeOf(results[0]).toEqualTypeOf<{ node: number } | undefined>();
    // …that says which worker (node, local rank, global rank) each one is from.
    expectTypeOf(results.places).toEqualTypeOf<readonly WorkerPlace[]>();
    expectTypeOf<WorkerPlace>().toEqualTypeOf<{
      readonly node: number;
      readonly worker: number;
      readonly rank: number;
    }>();
    // @ts-expect-error streams are not broadcast
    pool.broadcast(fib(3));
  });
});

describe("gather", () => {
  test("a typed tuple, in order, from arguments or an array", () => {
    expectTypeOf(pool.gather(train({ lr: 0.1 }), info(), add(1, 2))).toEqualTypeOf<
      Promise<[{ loss: number }, { node: number }, number]>
    >();
    expectTypeOf(pool.gather([add(1, 2), info()], { signal: AbortSignal.timeout(1000) })).toEqualTypeOf<
      Promise<[number, { node: number }]>
    >();
    expectTypeOf(pool.gather()).toEqualTypeOf<Promise<[]>>();
  });

  test("an array of unknown length gives an array", () => {
    const tasks = [1, 2, 3].map((n) => add(n, n));
    expectTypeOf(pool.gather(tasks)).toEqualTypeOf<Promise<number[]>>();
  });

  test("streams are not gathered", () => {
    // @ts-expect-error a stream has no single result
    pool.gather(add(1, 2), fib(3));
  });
});

describe("stream", () => {
  test("yields the results, ordered or as completed", () => {
    const tasks = [add(1, 2), add(3, 4)];
    expectTypeOf(pool.stream(tasks)).toEqualTypeOf<AsyncGenerator<number>>();
    expectTypeOf(pool.stream(tasks, { ordered: false })).toEqualTypeOf<AsyncGenerator<number>>();
    expectTypeOf(pool.stream([train({ lr: 0.1 })])).toEqualTypeOf<AsyncGenerator<{ loss: number }>>();
    // @ts-expect-error ordered is a boolean
    pool.stream(tasks, { ordered: "no" });
  });
});

describe("map", () => {
  test("the README form: literal items take the function's parameter tuple", () => {
    expectTypeOf(pool.map(train, [[{ lr: 0.1 }], [{ lr: 0.2 }]])).toEqualTypeOf<
      Promise<{ loss: number }[]>
    >();
    expectTypeOf(
      pool.map(
        add,
        [1, 2, 3].map((n) => [n, n]),
      ),
    ).toEqualTypeOf<Promise<number[]>>();
    expectTypeOf(pool.map(info, [[], []])).toEqualTypeOf<Promise<{ node: number }[]>>();
  });

  test("typed, read-only and lazy items", () => {
    const pairs: [a: number, b: number][] = [
      [1, 2],
      [3, 4],
    ];
    expectTypeOf(pool.map(add, pairs)).toEqualTypeOf<Promise<number[]>>();
    expectTypeOf(pool.map(add, [[1, 2]] as const)).toEqualTypeOf<Promise<number[]>>();
    async function* generated(): AsyncGenerator<[number, number]> {
      yield [1, 2];
    }
    expectTypeOf(pool.map(add, generated())).toEqualTypeOf<Promise<number[]>>();
    expectTypeOf(pool.map(add, new Set<[number, number]>())).toEqualTypeOf<Promise<number[]>>();
  });

  test("items may end in kwargs", () => {
    expectTypeOf(pool.map(add, [[1, kwargs({ b: 2 })], [kwargs({ a: 1, b: 2 })], [3, 4]])).toEqualTypeOf<
      Promise<number[]>
    >();
    expectTypeOf<MapItem<[a: number, b: number]>>().toExtend<readonly unknown[]>();
  });

  test("an untyped reference takes any argument lists", () => {
    expectTypeOf(pool.map(untyped, [[1, "a"], [], [null]])).toEqualTypeOf<Promise<unknown[]>>();
  });

  test("wrong items do not compile", () => {
    // @ts-expect-error a string where a number goes
    pool.map(add, [["1", 2]]);
    // @ts-expect-error the wrong config shape
    pool.map(train, [[{ lr: "fast" }]]);
    // @ts-expect-error an item is an argument list, not a bare argument
    pool.map(train, [{ lr: 0.1 }]);
    // @ts-expect-error too many arguments
    pool.map(add, [[1, 2, 3]]);
    const widened = [1, 2].map((n) => [n, n]);
    // @ts-expect-error number[] is not [number, number]
    pool.map(add, widened);
  });

  test("task factories: sky.shell, sky.script, a function returning a pending task", () => {
    expectTypeOf(pool.map(shell, [["echo a"], ["echo b", { timeout: 5 }]])).toEqualTypeOf<
      Promise<CommandResult[]>
    >();
    expectTypeOf(pool.map(script, [["tool.py", ["--x"]]])).toEqualTypeOf<Promise<CommandResult[]>>();
    const double = (n: number) => add(n, n);
    expectTypeOf(pool.map(double, [[1], [2]])).toEqualTypeOf<Promise<number[]>>();
    // @ts-expect-error: a command is a string
    void pool.map(shell, [[42]]);
  });

  test("generator functions are not mapped", () => {
    // @ts-expect-error map takes a function that returns one value; run a stream per item instead
    pool.map(fib, [[1], [2]]);
  });
});

describe("submit", () => {
  test("a handle with the task's result", () => {
    const handle = pool.submit(train({ lr: 0.3 }), { target: "head" });
    expectTypeOf(handle).toEqualTypeOf<TaskHandle<{ loss: number }>>();
    expectTypeOf(handle.result).toEqualTypeOf<Promise<{ loss: number }>>();
    expectTypeOf(handle.id).toEqualTypeOf<string>();
    expectTypeOf(handle.cancel).toEqualTypeOf<() => void>();
    expectTypeOf(pool.submit(add(1, 2).withTimeout(5)).result).resolves.toEqualTypeOf<number>();
    // @ts-expect-error a stream is run, not submitted
    pool.submit(fib(3));
  });
});
