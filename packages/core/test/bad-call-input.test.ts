// Slips in what a pool's calls are given, refused with a ConfigurationError naming the field before
// anything starts or is submitted, on a real Local pool: a `signal` that is not an AbortSignal (the
// AbortController itself), a function not called, a streaming call where a task goes (it hung).
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const sqrt = sky.python<[number], number>("math:sqrt");
const numbers = sky.python.stream<[number], number>("builtins:range");

/** What a wrong signal must be refused with. */
const refusal = (error: unknown) =>
  sky.ConfigurationError.isInstance(error) &&
  /signal: expected an AbortSignal .*received an AbortController/.test(error.message);

describe("a signal that is not an AbortSignal", () => {
  it("is refused by compute before anything is provisioned", async () => {
    const provisioned: string[] = [];
    const error = await sky
      .compute(
        { options: { console: false } },
        {
          signal: new AbortController() as unknown as AbortSignal,
          onEvent: (event) => {
            if (event.type === "node.provisioned") provisioned.push(event.instanceId);
          },
        },
      )
      .catch((caught: unknown) => caught);
    expect(refusal(error), String(error)).toBe(true);
    expect(provisioned).toEqual([]);
  });

  it("is refused by every call of a pool, which submits nothing and goes on working", async () => {
    const submitted: string[] = [];
    await using pool = await sky.compute(
      { nodes: 2, options: { console: false } },
      {
        onEvent: (event) => {
          if (event.type === "task.queued") submitted.push(event.taskId);
        },
      },
    );
    const signal = new AbortController() as unknown as AbortSignal;
    const calls: [string, () => unknown][] = [
      ["run", () => pool.run(sqrt(4), { signal })],
      ["submit", () => pool.submit(sqrt(4), { signal }).result],
      ["broadcast", () => pool.broadcast(sqrt(4), { signal })],
      ["gather", () => pool.gather([sqrt(4), sqrt(9)], { signal })],
      ["map", () => pool.map(sqrt, [[4], [9]], { signal })],
      [
        "stream",
        async () => {
          for await (const _ of pool.stream([sqrt(4)], { signal })) void _;
        },
      ],
      [
        "run of a stream",
        async () => {
          for await (const _ of pool.run(numbers(3), { signal })) void _;
        },
      ],
      ["resize", () => pool.resize(1, { signal })],
    ];
    for (const [name, call] of calls) {
      const error = await (async () => call())().then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(refusal(error), `${name}: ${String(error)}`).toBe(true);
    }
    expect(submitted).toEqual([]);
    expect(pool.currentNodes()).toBe(2);
    expect(await pool.gather(sqrt(16), sqrt(25))).toEqual([4, 5]);
  });
});

describe("a call that is not a pending task", () => {
  it("is refused by run, submit, broadcast, gather, stream and map, naming the slip; the pool goes on", async () => {
    await using pool = await sky.compute({ nodes: 2, options: { console: false } });
    const fn = sqrt as unknown as sky.PendingTask<number>;
    const stream = numbers(3) as unknown as sky.PendingTask<number>;
    const calls: [string, () => unknown, RegExp][] = [
      ["run(fn)", () => pool.run(fn), /task: .*the function math:sqrt itself.*call it/],
      ["submit(fn)", () => pool.submit(fn).result, /task: .*the function math:sqrt itself/],
      ["broadcast(fn)", () => pool.broadcast(fn), /task: .*the function math:sqrt itself/],
      ["gather(fn)", () => pool.gather(sqrt(4), fn), /tasks\[1\]: .*the function math:sqrt itself/],
      [
        "gather(undefined)",
        () => pool.gather(sqrt(4), undefined as never),
        /tasks\[1\]: .*received undefined/,
      ],
      [
        "stream([fn])",
        async () => {
          for await (const _ of pool.stream([fn])) void _;
        },
        /tasks\[0\]: .*the function math:sqrt itself/,
      ],
      // A generator's call has no single result: it hung for ever, waiting for one.
      ["broadcast(stream)", () => pool.broadcast(stream), /task: .*a streaming call of builtins:range/],
      ["gather(stream)", () => pool.gather(stream), /tasks\[0\]: .*a streaming call of builtins:range/],
      ["map(call)", () => pool.map(sqrt(4) as never, [[1]]), /fn: expected a function/],
      ["map(items)", () => pool.map(sqrt, 5 as never), /items: expected an iterable/],
      [
        "map(generator)",
        () => pool.map(numbers as never, [[1], [2]]),
        /fn\(items\[0\]\): .*a streaming call of builtins:range/,
      ],
    ];
    for (const [name, call, message] of calls) {
      const error = await (async () => call())().then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(sky.ConfigurationError.isInstance(error), `${name}: ${String(error)}`).toBe(true);
      expect((error as Error).message, name).toMatch(message);
    }
    expect(await pool.gather(sqrt(16), sqrt(25))).toEqual([4, 5]);
  });
});
